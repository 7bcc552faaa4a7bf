import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A real `mosquitto` broker on a free loopback port, for tests. Each instance owns its port, config
/// and log in a temp dir; `restart()` reuses the port. The process is killed on deinit and at exit.
public final class MosquittoBroker: Sendable {
    /// Temp dir holding `mosquitto.conf` and the broker's output files.
    public let directory: TemporaryDirectory
    private let state: Mutex<State>
    private let extraConfiguration: String

    private struct State {
        var port: Int
        var process: ProcessRunner?
        var starts = 0
    }

    /// Prepares a broker on a free port; `extraConfiguration` lines are appended to the config file.
    public init(extraConfiguration: String = "") throws {
        directory = try TemporaryDirectory(prefix: "lbs-mosquitto")
        state = Mutex(State(port: try freeLoopbackPort()))
        self.extraConfiguration = extraConfiguration
    }

    /// Creates and starts a broker.
    public static func started(extraConfiguration: String = "") async throws -> MosquittoBroker {
        let broker = try MosquittoBroker(extraConfiguration: extraConfiguration)
        try await broker.start()
        return broker
    }

    deinit {
        // Releasing the runner SIGKILLs and reaps the broker before its directory is removed.
        state.withLock { $0.process = nil }
        directory.remove()
    }

    /// The loopback port the broker listens on.
    public var port: Int { state.withLock { $0.port } }

    /// `mqtt://127.0.0.1:<port>`.
    public var url: String { "mqtt://127.0.0.1:\(port)" }

    /// True while the broker process runs.
    public var isRunning: Bool { state.withLock { $0.process?.isRunning ?? false } }

    /// Starts the broker and waits until it accepts TCP connections. Before the first successful
    /// start a port lost to a race is replaced by a new free port; later starts keep the port.
    public func start(timeout: Duration = .seconds(10)) async throws {
        guard !isRunning else { return }
        var lastOutput = ""
        for _ in 0..<5 {
            let (port, firstStart) = state.withLock { ($0.port, $0.starts == 0) }
            try writeConfiguration(port: port)
            let process = try ProcessRunner(executable: "mosquitto", arguments: ["-c", directory.file("mosquitto.conf")],
                                            outputDirectory: directory.path, name: "mosquitto")
            state.withLock { $0.process = process }
            if try await waitForListener(process, port: port, timeout: timeout) {
                state.withLock { $0.starts += 1 }
                return
            }
            lastOutput = process.standardError() + process.standardOutput()
            await process.stop(grace: .seconds(1))
            state.withLock { $0.process = nil }
            if firstStart {
                let newPort = try freeLoopbackPort()
                state.withLock { $0.port = newPort }
            } else {
                try await Task.sleep(for: .milliseconds(200))
            }
        }
        throw TestSupportError("mosquitto did not start on port \(port): \(lastOutput)")
    }

    /// SIGTERM and wait for the broker to exit (SIGKILL after 5 s).
    public func stop() async {
        guard let process = state.withLock({ $0.process }) else { return }
        await process.stop(grace: .seconds(5))
        state.withLock { $0.process = nil }
    }

    /// SIGKILL: the broker vanishes without closing connections cleanly.
    public func kill() async {
        guard let process = state.withLock({ $0.process }) else { return }
        process.kill()
        await process.waitForExit(timeout: .seconds(30))
        state.withLock { $0.process = nil }
    }

    /// Stops (if running) and starts again on the same port.
    public func restart() async throws {
        await stop()
        try await start()
    }

    /// The broker's log so far (stderr and stdout).
    public func log() -> String {
        ProcessRunner.readFile(directory.file("mosquitto.stderr")) + ProcessRunner.readFile(directory.file("mosquitto.stdout"))
    }

    private func writeConfiguration(port: Int) throws {
        // `user root`: when tests run as root, keep root so the broker can read files in 0700 temp dirs
        // (certificates, password files); ignored when not running as root.
        let text = """
            user root
            listener \(port) 127.0.0.1
            allow_anonymous true
            persistence false
            log_dest stderr
            log_type error
            log_type warning
            log_type notice
            \(extraConfiguration)

            """
        let path = directory.file("mosquitto.conf")
        guard let file = fopen(path, "w") else {
            throw TestSupportError("cannot write \(path): \(String(cString: strerror(errno)))")
        }
        defer { fclose(file) }
        guard fputs(text, file) >= 0 else { throw TestSupportError("cannot write \(path)") }
    }
}
