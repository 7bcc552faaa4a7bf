import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A failure starting or controlling a child process.
public struct ProcessRunnerError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The errno (or 0) behind the failure.
    public let code: Int32
    /// A readable explanation.
    public let message: String

    public var description: String { "ProcessRunnerError(\(code)): \(message)" }
}

/// How a child process ended.
public enum ProcessExitStatus: Sendable, Equatable, CustomStringConvertible {
    /// Normal exit with this status code.
    case exited(Int32)
    /// Killed by this signal.
    case signaled(Int32)

    public var description: String {
        switch self {
        case .exited(let code): "exited(\(code))"
        case .signaled(let signal): "signaled(\(signal))"
        }
    }
}

/// A child process started with `posix_spawn`: stdout/stderr go to files, signals and exit status
/// are handled with `kill`/`waitpid` (no Foundation `Process`, whose `waitUntilExit` can hang on Linux).
/// The child is killed when this object goes away or the test process exits normally.
public final class ProcessRunner: Sendable {
    private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), which Swift's Glibc module does not export.
    private static let closeFrom: CloseFrom? = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np").map {
        unsafeBitCast($0, to: CloseFrom.self)
    }

    /// Open descriptors above stderr, for a libc without `closefrom` actions. Only the name is read from each
    /// entry: a whole `dirent` copied from the last entry reads past the end of readdir's buffer.
    static func inheritedDescriptors() -> [Int32] {
        guard let directory = opendir("/proc/self/fd") else { return [] }
        defer { closedir(directory) }
        var descriptors: [Int32] = []
        let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name) ?? 19
        while let entry = readdir(directory) {
            let name = String(cString: UnsafeRawPointer(entry).advanced(by: nameOffset).assumingMemoryBound(to: CChar.self))
            if let fd = Int32(name), fd > 2 { descriptors.append(fd) }
        }
        return descriptors
    }

    /// The child's process id.
    public let pid: pid_t
    /// The executable path that was started.
    public let executable: String
    /// File receiving the child's standard output.
    public let stdoutPath: String
    /// File receiving the child's standard error.
    public let stderrPath: String
    private let status = Mutex<ProcessExitStatus?>(nil)

    /// Starts `executable` (a path, or a name looked up in PATH) with `arguments`.
    /// - Parameters:
    ///   - environment: the complete environment; nil inherits this process's environment.
    ///   - workingDirectory: runs the child there (via `env -C`); nil keeps the current directory.
    ///   - outputDirectory: where `<name>.stdout` / `<name>.stderr` are written.
    ///   - name: base name for the output files; defaults to the executable's last path component.
    public init(executable: String, arguments: [String] = [], environment: [String: String]? = nil,
                workingDirectory: String? = nil, outputDirectory: String, name: String? = nil) throws(ProcessRunnerError) {
        guard let resolved = Self.resolve(executable) else {
            throw ProcessRunnerError(code: ENOENT, message: "executable not found: \(executable)")
        }
        let baseName = name ?? String(resolved.split(separator: "/").last ?? "process")
        stdoutPath = "\(outputDirectory)/\(baseName).stdout"
        stderrPath = "\(outputDirectory)/\(baseName).stderr"
        self.executable = resolved

        var argv = [resolved] + arguments
        var path = resolved
        if let workingDirectory {
            path = "/usr/bin/env"
            argv = ["/usr/bin/env", "-C", workingDirectory, resolved] + arguments
        }
        let envp: [String] = if let environment {
            environment.map { "\($0.key)=\($0.value)" }
        } else {
            Self.currentEnvironment()
        }

        var fileActions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&fileActions)
        defer { posix_spawn_file_actions_destroy(&fileActions) }
        posix_spawn_file_actions_addopen(&fileActions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&fileActions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&fileActions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        // Close everything else the child would inherit: tests run in parallel in one process, and a
        // child (broker, gateway) holding a copy of a simulator's listening socket keeps its port bound
        // after the simulator stops, so connections queue unanswered and restarts fail (EADDRINUSE).
        // `closefrom` in the child also covers descriptors other tests open while this one spawns (listing
        // /proc/self/fd beforehand missed those, and copying whole `dirent`s read past readdir's buffer).
        if let closeFrom = Self.closeFrom {
            _ = closeFrom(&fileActions, 3)
        } else {
            for fd in Self.inheritedDescriptors() { posix_spawn_file_actions_addclose(&fileActions, fd) }
        }

        // Worker threads may block signals and libmosquitto ignores SIGPIPE; both would be inherited.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var emptySet = sigset_t()
        sigemptyset(&emptySet)
        var fullSet = sigset_t()
        sigfillset(&fullSet)
        posix_spawnattr_setsigmask(&attributes, &emptySet)
        posix_spawnattr_setsigdefault(&attributes, &fullSet)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        var childPID = pid_t()
        let rc = withCStringArray(argv) { cArgs in
            withCStringArray(envp) { cEnv in
                posix_spawn(&childPID, path, &fileActions, &attributes, cArgs, cEnv)
            } ?? EINVAL
        } ?? EINVAL
        guard rc == 0 else {
            throw ProcessRunnerError(code: rc, message: "posix_spawn \(resolved) failed: \(String(cString: strerror(rc)))")
        }
        pid = childPID
        ChildRegistry.shared.add(childPID)
    }

    deinit {
        if exitStatus == nil {
            sendSignal(SIGKILL)
            reap(blocking: true)
        }
    }

    /// The exit status once the child has ended; nil while it runs (never blocks).
    public var exitStatus: ProcessExitStatus? { reap(blocking: false) }

    /// True while the child has not exited.
    public var isRunning: Bool { exitStatus == nil }

    /// Sends `signal` unless the child was already reaped (its pid could be reused).
    public func sendSignal(_ signal: Int32) {
        status.withLock { status in
            if status == nil { _ = Glibc.kill(pid, signal) }
        }
    }

    /// Sends SIGTERM.
    public func terminate() { sendSignal(SIGTERM) }

    /// Sends SIGKILL.
    public func kill() { sendSignal(SIGKILL) }

    /// Polls until the child exits; nil if it still runs after `timeout`.
    @discardableResult
    public func waitForExit(timeout: Duration) async -> ProcessExitStatus? {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let status = exitStatus { return status }
            if ContinuousClock.now >= deadline { return nil }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    /// SIGTERM, wait up to `grace`, then SIGKILL; returns how the child ended.
    @discardableResult
    public func stop(grace: Duration = .seconds(5)) async -> ProcessExitStatus {
        terminate()
        if let status = await waitForExit(timeout: grace) { return status }
        kill()
        return await waitForExit(timeout: .seconds(30)) ?? reap(blocking: true) ?? .signaled(SIGKILL)
    }

    /// What the child wrote to stdout so far.
    public func standardOutput() -> String { Self.readFile(stdoutPath) }

    /// What the child wrote to stderr so far.
    public func standardError() -> String { Self.readFile(stderrPath) }

    @discardableResult
    private func reap(blocking: Bool) -> ProcessExitStatus? {
        status.withLock { status in
            if let status { return status }
            var raw: Int32 = 0
            let result = waitpid(pid, &raw, blocking ? 0 : WNOHANG)
            guard result == pid else {
                if result == -1, errno == ECHILD { status = .exited(-1) }
                return status
            }
            let signal = raw & 0x7f
            status = signal == 0 ? .exited((raw >> 8) & 0xff) : .signaled(signal)
            ChildRegistry.shared.remove(pid)
            return status
        }
    }

    private static func resolve(_ executable: String) -> String? {
        if executable.contains("/") { return access(executable, X_OK) == 0 ? executable : nil }
        let searchPath = getenv("PATH").map { String(cString: $0) } ?? "/usr/bin:/bin"
        for directory in (searchPath + ":/usr/sbin:/sbin").split(separator: ":") {
            let candidate = "\(directory)/\(executable)"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    private static func currentEnvironment() -> [String] {
        var result: [String] = []
        var pointer = environ
        while let entry = pointer.pointee {
            result.append(String(cString: entry))
            pointer += 1
        }
        return result
    }

    static func readFile(_ path: String) -> String {
        guard let file = fopen(path, "rb") else { return "" }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = fread(&buffer, 1, buffer.count, file)
            if count <= 0 { break }
            bytes.append(contentsOf: buffer[0..<count])
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// Children still running; killed by an `atexit` hook so a finished test run leaves no orphans.
final class ChildRegistry: Sendable {
    static let shared = ChildRegistry()
    private let pids = Mutex<Set<pid_t>>([])

    private init() {
        atexit { ChildRegistry.shared.killAll() }
    }

    func add(_ pid: pid_t) { pids.withLock { _ = $0.insert(pid) } }
    func remove(_ pid: pid_t) { pids.withLock { _ = $0.remove(pid) } }

    private func killAll() {
        for pid in pids.withLock({ $0 }) {
            _ = kill(pid, SIGKILL)
            var raw: Int32 = 0
            _ = waitpid(pid, &raw, 0)
        }
    }
}

/// Calls `body` with a NULL-terminated C array of C strings (nil only if no buffer could be made).
private func withCStringArray<Result>(_ strings: [String],
                                      _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> Result) -> Result? {
    let pointers = strings.map { strdup($0) } + [nil]
    defer { pointers.forEach { free($0) } }
    return pointers.withUnsafeBufferPointer { buffer in buffer.baseAddress.map(body) }
}
