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
        var key: KeyMaterial
        var generation = 0
        var starts = 0
        /// While stopped: a socket bound to the port that never listens. Connections to it are refused (a device
        /// that is down), and no other test's server can take the port meanwhile (it would answer in its place).
        var held: Int32?
    }

    /// True when `socat` and `openssl` are installed.
    public static var isAvailable: Bool {
        let tools: [String] = ["/usr/bin/socat", "/usr/bin/openssl", "/usr/bin/setsid"]
        return tools.allSatisfy { access($0, X_OK) == 0 }
    }

    /// Starts the front for `127.0.0.1:<targetPort>` on a free port. Fronts share one key made once per test
    /// process (key generation is the costly part while the suite loads both cores) unless `freshKey` is true.
    public static func started(targetPort: Int, freshKey: Bool = false) async throws -> TLSFront {
        let directory = try TemporaryDirectory(prefix: "lbs-tlsfront")
        let key = freshKey ? try await KeyMaterial.make(in: directory, name: "key-0") : try await SharedKey.shared.material()
        let front = try TLSFront(targetPort: targetPort, directory: directory, key: key)
        try await front.start()
        return front
    }

    private init(targetPort: Int, directory: TemporaryDirectory, key: KeyMaterial) throws {
        self.directory = directory
        self.targetPort = targetPort
        state = Mutex(State(port: try freeLoopbackPort(), key: key))
    }

    deinit {
        killGroup()
        state.withLock { state in
            if let held = state.held { close(held) }
        }
        directory.remove()
    }

    /// The port the front listens on.
    public var port: Int { state.withLock { $0.port } }

    /// `https://127.0.0.1:<port>`.
    public var url: String { "https://127.0.0.1:\(port)" }

    /// `127.0.0.1:<port>`, the key the gateway stores the pin under.
    public var hostPort: String { "127.0.0.1:\(port)" }

    /// The SPKI SHA-256 (base64) of the key served now, computed by `openssl` independently of the code under test.
    public var pin: String { state.withLock { $0.key.pin } }

    /// Stops the front (its forked children too, so no kept-alive connection survives) and starts it again
    /// on the same port, with a fresh key when `newKey` is true.
    public func restart(newKey: Bool = true) async throws {
        await stop()
        if newKey {
            let name = state.withLock { state in
                state.generation += 1
                return "key-\(state.generation)"
            }
            let key = try await KeyMaterial.make(in: directory, name: name)
            state.withLock { $0.key = key }
        }
        try await start()
    }

    /// Stops listening and closes every open connection. The port stays reserved (connections are refused) until
    /// `restart` or the front's end.
    public func stop() async {
        guard let process = state.withLock({ $0.process }) else { return }
        killGroup()
        await process.waitForExit(timeout: .seconds(10))
        state.withLock { state in
            state.process = nil
            if state.held == nil { state.held = try? boundLoopbackSocket(port: state.port) }
        }
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

    private func start(timeout: Duration = .seconds(10)) async throws {
        var lastOutput = ""
        for _ in 0..<5 {
            // A stopped front's port is held until it listens again.
            state.withLock { state in
                if let held = state.held { close(held) }
                state.held = nil
            }
            let (port, key, firstStart) = state.withLock { ($0.port, $0.key, $0.starts == 0) }
            let listen = "OPENSSL-LISTEN:\(port),bind=127.0.0.1,reuseaddr,fork,verify=0,cert=\(key.certificate),key=\(key.key)"
            // setsid: socat leads its own process group, so `stop()` can end its forked children with it.
            let process = try ProcessRunner(
                executable: "/usr/bin/setsid", arguments: ["/usr/bin/socat", listen, "TCP:127.0.0.1:\(targetPort)"],
                outputDirectory: directory.path, name: "socat"
            )
            state.withLock { $0.process = process }
            if try await waitForListener(process, port: port, timeout: timeout) {
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
}

/// A self-signed P-256 certificate, its key, and the key's pin as `openssl` computes it.
struct KeyMaterial: Sendable {
    let key: String
    let certificate: String
    /// SPKI SHA-256, base64: the reference value, independent of the code under test.
    let pin: String

    static func make(in directory: TemporaryDirectory, name: String) async throws -> KeyMaterial {
        let key = directory.file("\(name).key.pem")
        let certificate = directory.file("\(name).cert.pem")
        try await run("/usr/bin/openssl", [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", key, "-out", certificate, "-days", "2", "-subj", "/CN=device.local",
        ], directory: directory, name: "\(name)-req")
        let pin = try await run("/bin/sh", ["-c",
            "openssl x509 -in '\(certificate)' -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64",
        ], directory: directory, name: "\(name)-pin").filter { !$0.isWhitespace }
        guard pin.count == 44 else { throw TestSupportError("openssl printed no key pin: '\(pin)'") }
        return KeyMaterial(key: key, certificate: certificate, pin: pin)
    }

    /// Runs a short tool to completion and returns its standard output.
    @discardableResult
    private static func run(_ executable: String, _ arguments: [String], directory: TemporaryDirectory, name: String) async throws -> String {
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

/// The key most fronts share, made on first use; its directory is removed when the test process exits.
private actor SharedKey {
    static let shared = SharedKey()
    /// Kept here: a `TemporaryDirectory` removes itself when released.
    private static let directory = Mutex<TemporaryDirectory?>(nil)
    private var making: Task<KeyMaterial, any Error>?

    func material() async throws -> KeyMaterial {
        if let making { return try await making.value }
        let task = Task<KeyMaterial, any Error> {
            let directory = try TemporaryDirectory(prefix: "lbs-tlsfront-shared")
            Self.directory.withLock { $0 = directory }
            // Statics are never released, so remove the directory from an exit hook.
            atexit { SharedKey.directory.withLock { $0?.remove() } }
            return try await KeyMaterial.make(in: directory, name: "shared")
        }
        making = task
        return try await task.value
    }
}
