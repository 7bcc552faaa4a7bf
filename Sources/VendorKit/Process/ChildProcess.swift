#if canImport(Glibc)
import Glibc
#endif
import CProcessSpawn
import Dispatch
import Synchronization

/// A helper program the gateway starts (Avahi's `avahi-browse`, `avahi-publish`), through `posix_spawnp`:
/// Foundation's `Process` needs full Foundation, which the installed binary leaves out (about 15 MB with ICU).
///
/// The child gets /dev/null for what is not captured, none of the gateway's other descriptors, the default
/// signal mask and dispositions (the gateway blocks SIGTERM for its own handling; a child must not inherit that).
public final class ChildProcess: Sendable {
    public enum Termination: Equatable, Sendable {
        case exited(Int32)
        case signalled(Int32)
    }

    public struct SpawnError: Error, CustomStringConvertible {
        public let program: String
        public let errno: Int32
        /// The program is not on the PATH.
        public var notFound: Bool { errno == ENOENT }
        public var description: String { "cannot start \(program): \(String(cString: strerror(errno)))" }
    }

    public let pid: pid_t
    /// The child's standard output and error, when captured (read them to the end, then `close`).
    public let output: Int32?
    public let errors: Int32?
    private let termination = Mutex<Termination?>(nil)

    private init(pid: pid_t, output: Int32?, errors: Int32?) {
        self.pid = pid
        self.output = output
        self.errors = errors
    }

    /// A child that ended is reaped here at the latest (one still running is left to run; `kill` it first).
    deinit { _ = exitStatus }

    /// Starts `arguments[0]` (looked up on the PATH) with the rest as its arguments.
    public static func spawn(_ arguments: [String], captureOutput: Bool) throws(SpawnError) -> ChildProcess {
        let program = arguments.first ?? ""
        var outputPipe: [Int32] = [-1, -1], errorPipe: [Int32] = [-1, -1]
        if captureOutput {
            guard lbs_pipe_cloexec(&outputPipe) == 0 else { throw SpawnError(program: program, errno: Glibc.errno) }
            guard lbs_pipe_cloexec(&errorPipe) == 0 else {
                let code = Glibc.errno
                close(outputPipe[0]); close(outputPipe[1])
                throw SpawnError(program: program, errno: code)
            }
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        if captureOutput {
            posix_spawn_file_actions_adddup2(&actions, outputPipe[1], 1)
            posix_spawn_file_actions_adddup2(&actions, errorPipe[1], 2)
        } else {
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        }
        // Sockets libmosquitto or libcurl opened without O_CLOEXEC must not outlive the gateway in a child.
        lbs_spawn_file_actions_addclosefrom(&actions, 3)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t(), everySignal = sigset_t()
        sigemptyset(&noSignals)
        sigfillset(&everySignal)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setsigdefault(&attributes, &everySignal)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let rc = posix_spawnp(&pid, program, &actions, &attributes, &argv, environ)
        if captureOutput { close(outputPipe[1]); close(errorPipe[1]) }
        guard rc == 0 else {
            if captureOutput { close(outputPipe[0]); close(errorPipe[0]) }
            throw SpawnError(program: program, errno: rc)
        }
        return ChildProcess(pid: pid, output: captureOutput ? outputPipe[0] : nil, errors: captureOutput ? errorPipe[0] : nil)
    }

    /// How the child ended; nil while it runs. Reaps it once it ended.
    public var exitStatus: Termination? {
        termination.withLock { termination in
            if let termination { return termination }
            var status: Int32 = 0
            let rc = waitpid(pid, &status, WNOHANG)
            guard rc == pid else { return nil }
            // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift does not import (they are macros).
            termination = status & 0x7F == 0 ? .exited((status >> 8) & 0xFF) : .signalled(status & 0x7F)
            return termination
        }
    }

    public var isRunning: Bool { exitStatus == nil }

    public func kill(_ signal: Int32 = SIGKILL) {
        // Never signal a reaped pid: the number may already belong to another process.
        termination.withLock { termination in
            if termination == nil { _ = Glibc.kill(pid, signal) }
        }
    }

    /// Waits for the child to end (polling: a blocking `waitpid` could race with `isRunning` on another thread).
    public func waitForExit() async -> Termination {
        while true {
            if let status = exitStatus { return status }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Everything the descriptor gives until end of file, read off the cooperative pool (a pipe may hold more than
    /// its buffer, and a blocking read must not hold one of the pool's threads); closes it.
    public static func readToEnd(_ descriptor: Int32) async -> [UInt8] {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                var bytes: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 16_384)
                while true {
                    let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                    if count > 0 { bytes += buffer[0..<count]; continue }
                    if count < 0, errno == EINTR { continue }
                    break
                }
                close(descriptor)
                continuation.resume(returning: bytes)
            }
        }
    }
}
