import ConsciousnessSimulator
import CurlHTTP
import Foundation
import GatewayModel
import GatewayTesting
import Logging
import Resilience
import Synchronization
import Testing
import VendorConsciousness
import VendorKit
import VendorTesting

/// A running simulator plus a vendor pointed at it, on an injected clock.
struct Rig {
    static let vendorID = "consciousness"

    let simulator: ConsciousnessSimulator
    let vendor: ConsciousnessVendor
    let clock: ManualClock
    let log: EventLog
    let password: String

    /// Starts a simulator on a free loopback port and a vendor with test-friendly defaults (no retries).
    static func start(
        expiresIn: Int = 3600, loginPassword: String? = nil, timeout: Duration = .seconds(5),
        quota: QuotaScheduler.Budgets? = nil, pollInterval: Duration = .seconds(30),
        breaker: CircuitBreaker.Settings = CircuitBreaker.Settings(window: .seconds(60), minimumCalls: 3, failureRatio: 0.5, openDuration: .seconds(30)),
        retry: RetryPolicy = .none, urlSuffix: String = "", temperatureUnit: ConsciousnessOptions.TemperatureUnit = .auto,
        logger: Logger = Logger(label: "lbs-gateway.vendor"), prepare: (ConsciousnessSimulator) -> Void = { _ in },
        password: String? = nil
    ) async throws -> Rig {
        let password = password ?? "pw-\(UUID().uuidString)"
        let simulator = ConsciousnessSimulator(configuration: .init(password: password, expiresIn: expiresIn))
        prepare(simulator)
        try await simulator.start()
        let clock = ManualClock()
        let log = EventLog()
        let options = ConsciousnessOptions(
            url: await simulator.baseURL + urlSuffix, username: "admin", password: VendorSecret(loginPassword ?? password),
            pollInterval: pollInterval, timeout: timeout, quota: quota, breaker: breaker, retry: retry, temperatureUnit: temperatureUnit
        )
        let vendor = try ConsciousnessVendor(instanceID: vendorID, options: options, sink: log.sink, clock: clock, logger: logger)
        return Rig(simulator: simulator, vendor: vendor, clock: clock, log: log, password: password)
    }

    func id(_ vendorDeviceID: String) -> DeviceID {
        DeviceID(vendorInstance: Self.vendorID, vendorDeviceID: vendorDeviceID)
    }

    func command(_ vendorDeviceID: String, _ changes: [String: StateValue], id: String = UUID().uuidString) -> DeviceCommand {
        DeviceCommand(
            id: id, device: self.id(vendorDeviceID), vendorID: Self.vendorID, vendorDeviceID: vendorDeviceID,
            changes: changes, issuedAt: Date(), expiresAt: Date().addingTimeInterval(300)
        )
    }

    func stop() async {
        vendor.http.client.shutdown()
        await simulator.stop()
    }
}

/// Runs `body` and returns the `GatewayError` it threw (nil if it succeeded).
func gatewayError(_ body: () async throws -> Void) async -> GatewayError? {
    do {
        try await body()
        return nil
    } catch let error as GatewayError {
        return error
    } catch {
        return GatewayError.internal("not a GatewayError: \(error)")
    }
}

/// Log lines a vendor wrote, for assertions (`Logger(label:factory:)`).
final class LogCapture: Sendable {
    private let lines = Mutex<[(Logger.Level, String)]>([])

    var logger: Logger {
        Logger(label: "test.vendor") { _ in CaptureHandler(capture: self) }
    }

    var all: [(level: Logger.Level, message: String)] { lines.withLock { $0.map { (level: $0.0, message: $0.1) } } }

    fileprivate func append(_ level: Logger.Level, _ message: String) {
        lines.withLock { $0.append((level, message)) }
    }
}

private struct CaptureHandler: LogHandler {
    let capture: LogCapture
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        capture.append(event.level, "\(event.message)")
    }
}
