import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// HTTPS in front of a plain TCP server on loopback, like a LAN device with a self-signed certificate:
/// `socat` terminates TLS with a throwaway key made by `openssl` and forwards to `127.0.0.1:<targetPort>`.
/// `restart(newKey:)` keeps the port and can present a new key (a replaced device). Needs `socat` and `openssl`.
public final class TLSFront: Sendable {
    /// Temp dir holding keys, certificates and the tools' output files.
    public let directory: TemporaryDirectory
    /// The plain server the front forwards to.
    public let targetPort: Int
    private let state: Mutex<State>

    private struct State {
        var port: Int
        var process: ProcessRunner?
        var generation = 0
        var pin = ""
        var starts = 0
    }

    /// True when `socat` and `openssl` are installed.
    public static var isAvailable: Bool {
        let tools: [String] = ["/usr/bin/socat", "/usr/bin/openssl", "/usr/bin/setsid"]
        return tools.allSatisfy { access($0, X_OK) == 0 }
    }

    /// Makes a key and starts the front for `127.0.0.1:<targetPort>` on a free port.
    public static func started(targetPort: Int) async throws -> TLSFront {
        let front = try TLSFront(targetPort: targetPort)
        try await front.makeKey()
        try await front.start()
        return front
    }

    private init(targetPort: Int) throws {
        directory = try TemporaryDirectory(prefix: "lbs-tlsfront")
        self.targetPort = targetPort
        state = Mutex(State(port: try freeLoopbackPort()))
    }

    deinit {
        killGroup()
        directory.remove()
    }

    /// The port the front listens on.
    public var port: Int { state.withLock { $0.port } }

    /// `https://127.0.0.1:<port>`.
    public var url: String { "https://127.0.0.1:\(port)" }

    /// `127.0.0.1:<port>`, the key the gateway stores the pin under.
    public var hostPort: String { "127.0.0.1:\(port)" }

    /// The SPKI SHA-256 (base64) of the key served now, computed by `openssl` independently of the code under test.
    public var pin: String { state.withLock { $0.pin } }

    /// Stops the front (its forked children too, so no kept-alive connection survives) and starts it again
    /// on the same port, with a fresh key when `newKey` is true.
    public func restart(newKey: Bool = true) async throws {
        await stop()
        if newKey { try await makeKey() }
        try await start()
    }

    /// Stops listening and closes every open connection.
    public func stop() async {
        guard let process = state.withLock({ $0.process }) else { return }
        killGroup()
        await process.waitForExit(timeout: .seconds(10))
        state.withLock { $0.process = nil }
    }

    /// What socat reported (handshake failures appear here).
    public func log() -> String {
        ProcessRunner.readFile(directory.file("socat.stderr"))
    }

    // MARK: Internals

    /// SIGKILL to socat's process group: its per-connection children hold kept-alive connections with the old key.
    private func killGroup() {
        state.withLock { state in
            // The group id is the pid of a child not yet reaped, so it cannot have been reused.
            if let process = state.process, process.isRunning { _ = kill(-process.pid, SIGKILL) }
        }
    }

    private func makeKey() async throws {
        let generation = state.withLock { state in
            state.generation += 1
            return state.generation
        }
        let key = directory.file("key-\(generation).pem")
        let certificate = directory.file("cert-\(generation).pem")
        try await run("/usr/bin/openssl", [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", key, "-out", certificate, "-days", "2", "-subj", "/CN=device.local",
        ], name: "openssl-req")
        let pin = try await run("/bin/sh", ["-c",
            "openssl x509 -in '\(certificate)' -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64",
        ], name: "openssl-pin").filter { !$0.isWhitespace }
        guard pin.count == 44 else { throw TestSupportError("openssl printed no key pin: '\(pin)'") }
        state.withLock { $0.pin = pin }
    }

    private func start(timeout: Duration = .seconds(10)) async throws {
        var lastOutput = ""
        for _ in 0..<5 {
            let (port, generation, firstStart) = state.withLock { ($0.port, $0.generation, $0.starts == 0) }
            let listen = "OPENSSL-LISTEN:\(port),bind=127.0.0.1,reuseaddr,fork,verify=0,"
                + "cert=\(directory.file("cert-\(generation).pem")),key=\(directory.file("key-\(generation).pem"))"
            // setsid: socat leads its own process group, so `stop()` can end its forked children with it.
            let process = try ProcessRunner(
                executable: "/usr/bin/setsid", arguments: ["/usr/bin/socat", listen, "TCP:127.0.0.1:\(targetPort)"],
                outputDirectory: directory.path, name: "socat"
            )
            state.withLock { $0.process = process }
            let deadline = ContinuousClock.now + timeout
            while process.isRunning, ContinuousClock.now < deadline, !loopbackPortAcceptsConnections(port) {
                try await Task.sleep(for: .milliseconds(20))
            }
            if process.isRunning, loopbackPortAcceptsConnections(port) {
                state.withLock { $0.starts += 1 }
                return
            }
            lastOutput = log()
            await stop()
            if firstStart {
                let newPort = try freeLoopbackPort()
                state.withLock { $0.port = newPort }
            } else {
                try await Task.sleep(for: .milliseconds(200))
            }
        }
        throw TestSupportError("socat did not start on port \(port): \(lastOutput)")
    }

    /// Runs a short tool to completion and returns its standard output.
    @discardableResult
    private func run(_ executable: String, _ arguments: [String], name: String) async throws -> String {
        let process = try ProcessRunner(executable: executable, arguments: arguments, outputDirectory: directory.path, name: name)
        guard let status = await process.waitForExit(timeout: .seconds(30)) else {
            process.kill()
            throw TestSupportError("\(name) did not finish")
        }
        guard status == .exited(0) else {
            throw TestSupportError("\(name) failed (\(status)): \(process.standardError().suffix(500))")
        }
        return process.standardOutput()
    }
}
