import FlyingFox
import FlyingSocks
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Errors starting or driving the simulator.
public struct SimulatorError: Error, Sendable, CustomStringConvertible {
    /// A short stable code, e.g. `sim.listen_failed`.
    public let code: String
    /// What went wrong.
    public let message: String

    public var description: String { "\(code): \(message)" }
}

/// A controllable clock for token expiry, so tests need not sleep.
public final class SimulatorClock: Sendable {
    private let current: Mutex<Date>

    /// Starts at `start`.
    public init(start: Date = Date(timeIntervalSince1970: 1_790_000_000)) {
        current = Mutex(start)
    }

    /// The current simulated time.
    public var now: Date { current.withLock { $0 } }

    /// Moves time forward.
    public func advance(by seconds: Double) {
        current.withLock { $0 = $0.addingTimeInterval(seconds) }
    }
}

/// An HTTP server on loopback that serves the consciousness backend's contract, with fault injection and counters.
public final class ConsciousnessSimulator: Sendable {
    /// Start-up settings.
    public struct Configuration: Sendable {
        /// The IPv4 address to bind.
        public var host: String
        /// The port to bind; 0 picks a free one (then kept across `stop()`/`start()`).
        public var port: UInt16
        /// The accepted login name.
        public var username: String
        /// The accepted password.
        public var password: String
        /// Token lifetime in seconds, reported as `expires_in`.
        public var expiresIn: Int
        /// The time source for token expiry and timestamps.
        public var now: @Sendable () -> Date

        /// Creates a configuration; defaults match the FastAPI server (`admin`, 3600 s tokens).
        public init(
            host: String = "127.0.0.1",
            port: UInt16 = 0,
            username: String = "admin",
            password: String,
            expiresIn: Int = 3600,
            now: @escaping @Sendable () -> Date = { Date() }
        ) {
            self.host = host
            self.port = port
            self.username = username
            self.password = password
            self.expiresIn = expiresIn
            self.now = now
        }
    }

    private let core: SimulatorCore
    private let lifecycle: SimulatorLifecycle

    /// Creates a stopped simulator; call `start()`.
    public init(configuration: Configuration) {
        lifecycle = SimulatorLifecycle(host: configuration.host, port: configuration.port)
        core = SimulatorCore(configuration: configuration, lifecycle: lifecycle)
    }

    deinit {
        // The running server holds the core; stopping it releases everything.
        let lifecycle = lifecycle
        Task { await lifecycle.stop() }
    }

    /// Binds and starts serving; returns the port (the same port on every restart).
    @discardableResult
    public func start() async throws(SimulatorError) -> UInt16 {
        try await lifecycle.start(handler: SimulatorHandler(core: core))
    }

    /// Stops listening (the `down` fault); connections are closed and `start()` may be called again.
    public func stop() async {
        await lifecycle.stop()
    }

    /// Whether the server is currently listening.
    public var isRunning: Bool {
        get async { await lifecycle.isRunning }
    }

    /// The bound port (0 before the first `start()`).
    public var port: UInt16 {
        get async { await lifecycle.port }
    }

    /// `http://host:port`.
    public var baseURL: String {
        get async { "http://\(core.configuration.host):\(await lifecycle.port)" }
    }

    /// `http://host:port/api/v1`.
    public var apiBaseURL: String {
        get async { "\(await baseURL)/api/v1" }
    }

    /// Makes the next `times` matching requests misbehave (`nil`: until `clearFaults()`).
    public func inject(_ fault: SimulatorFault, times: Int? = 1, matching: FaultMatch = .api) {
        core.inject(FaultRule(fault: fault, remaining: times, match: matching))
    }

    /// A burst of `count` 5xx answers.
    public func injectServerErrors(count: Int, matching: FaultMatch = .api) {
        inject(.serverError, times: count, matching: matching)
    }

    /// `count` 429 answers with `Retry-After`.
    public func injectRateLimit(count: Int, retryAfterSeconds: Int, matching: FaultMatch = .api) {
        inject(.rateLimit(retryAfterSeconds: retryAfterSeconds), times: count, matching: matching)
    }

    /// Removes every pending fault.
    public func clearFaults() {
        core.clearFaults()
    }

    /// Stops listening for `duration`, then starts again on the same port.
    public func goDown(for duration: Duration) async {
        await core.goDown(for: duration)
    }

    /// Invalidates every issued token (the next call with an old token gets 401 Invalid token).
    public func expireAllTokens() {
        core.expireAllTokens()
    }

    /// A snapshot of the counters.
    public var counters: SimulatorCounters {
        core.counters
    }

    /// Zeroes the counters.
    public func resetCounters() {
        core.resetCounters()
    }

    /// Adds a device as the backend would list it (hostile ids included: the id is used as given).
    public func addDevice(id: String, name: String? = nil, type: String = "smart_light", properties: [(String, SimJSON)] = [("power", .bool(true))]) {
        core.addDevice(.object([
            ("id", .string(id)), ("name", .string(name ?? "Device \(id)")), ("type", .string(type)), ("status", .string("online")),
            ("location", .string("hall")), ("properties", .object(properties)),
        ]))
    }

    /// The current device objects as JSON text (for assertions).
    public func devicesJSON() -> String {
        core.devicesJSON()
    }
}

/// Start/stop of the FlyingFox server, serialized.
actor SimulatorLifecycle {
    private let host: String
    private(set) var port: UInt16
    private var server: HTTPServer?
    private var runTask: Task<String?, Never>?

    init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    var isRunning: Bool { server != nil }

    func start(handler: SimulatorHandler) async throws(SimulatorError) -> UInt16 {
        if server != nil { return port }
        guard port == 0 else { return try await listen(handler: handler) }
        // Port 0 picks from 20000–32767, below the kernel's ephemeral range: a client retrying a
        // stopped simulator on an ephemeral port can connect to itself (TCP self-connect on
        // loopback) and then hold the very port the simulator needs to restart on.
        var lastError: SimulatorError?
        for _ in 0..<20 {
            port = UInt16.random(in: 20_000...32_767)
            do {
                return try await listen(handler: handler, wait: 1)
            } catch {
                lastError = error
            }
        }
        port = 0
        throw lastError ?? SimulatorError(code: "sim.listen_failed", message: "no free port")
    }

    private func listen(handler: SimulatorHandler, wait: Double = 5) async throws(SimulatorError) -> UInt16 {
        let address: sockaddr_in
        do {
            address = try .inet(ip4: host, port: port)
        } catch {
            throw SimulatorError(code: "sim.bad_address", message: "cannot bind to \(host): \(error)")
        }
        // A long handler timeout so the `slow` fault can outlast any client timeout.
        let server = HTTPServer(config: .init(address: address, timeout: 600, logger: .disabled), handler: handler)
        let task = Task { () -> String? in
            do {
                try await server.run()
                return nil
            } catch {
                return "\(error)"
            }
        }
        do {
            try await server.waitUntilListening(timeout: wait)
        } catch {
            task.cancel()
            let reason = await task.value ?? "\(error)"
            throw SimulatorError(code: "sim.listen_failed", message: "could not listen on \(host):\(port): \(reason)")
        }
        if case .ip4(_, let boundPort)? = await server.listeningAddress {
            port = boundPort
        }
        self.server = server
        runTask = task
        return port
    }

    func stop() async {
        guard let server else { return }
        self.server = nil
        await server.stop(timeout: 0)
        runTask?.cancel()
        _ = await runTask?.result
        runTask = nil
    }
}

/// Routes every request into the core.
struct SimulatorHandler: HTTPHandler {
    let core: SimulatorCore

    func handleRequest(_ request: FlyingFox.HTTPRequest) async throws -> FlyingFox.HTTPResponse {
        await core.handle(request)
    }
}
