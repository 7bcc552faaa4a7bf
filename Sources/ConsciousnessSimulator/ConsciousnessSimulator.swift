import FlyingFox
import SimulatorKit
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
    private let lifecycle: SimServer

    /// Creates a stopped simulator; call `start()`.
    public init(configuration: Configuration) {
        lifecycle = SimServer(host: configuration.host, port: configuration.port)
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
        try await lifecycle.start(handler: core.handler)
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
