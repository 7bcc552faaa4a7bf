import CurlHTTP
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import Logging
import Resilience
import Synchronization
import VendorKit

/// Awair monitors through the Awair Home developer API: one device `<id>_<deviceId>` per monitor, in the room
/// its name (or its `roomType`) says, with the latest reading (`air-data/latest`) every poll. The account's
/// daily quota is read from `/users/self` and replaces the declared one, so polling keeps under it.
public final class AwairCloudVendor: Vendor {
    public let instanceID: String
    public let typeName = "awair"
    public let http: VendorHTTP
    private let options: AwairCloudOptions
    private let sink: VendorEventSink
    private let inventory = InventoryTracker()
    private let known = Mutex(Known())

    private struct Known {
        var monitors: [WireDevices.Entry]?
        /// When the device list and quota were last read (they are read again every 6 h).
        var listedAt: Date?
    }

    public init(instanceID: String, options: AwairCloudOptions, sink: VendorEventSink, context: VendorContext) throws(GatewayError) {
        self.instanceID = instanceID
        self.options = options
        self.sink = sink
        http = try VendorHTTP(vendorID: instanceID, settings: VendorHTTP.Settings(options.network, retry: .none), sink: sink, context: context)
        http.redactor.set("token", options.token)
    }

    public var refreshesAllDevices: Bool { true }

    var base: String { options.network.base }

    /// The requested interval, stretched so one `latest` call per monitor fits the daily quota.
    var pollInterval: Duration {
        guard let quota = http.quota else { return options.network.pollInterval }
        let monitors = max(1, known.withLock { $0.monitors?.count } ?? 1)
        return quota.pollInterval(requested: options.network.pollInterval, cost: monitors) ?? .seconds(3600)
    }

    public func run() async throws {
        try await http.runPolling(every: { self.pollInterval }) { try await self.poll() }
    }

    public func refresh(_ device: DeviceID) async throws { try await poll(use: .refresh) }

    public func execute(_ command: DeviceCommand) async throws -> CommandOutcome {
        throw GatewayError(.vendorRejected, message: "Awair readings are read-only: \(command.device) has nothing to set.")
    }

    public func poll(use: QuotaScheduler.Use = .poll) async throws(GatewayError) {
        let monitors = try await monitors(use: use)
        var readings: [(WireDevices.Entry, [String: StateValue], Date?)] = []
        for monitor in monitors {
            let path = "/users/self/devices/\(FormEncoding.escape(monitor.deviceType))/\(monitor.deviceId)/air-data/latest?fahrenheit=false"
            let latest = try await call(path, WireCloudLatest.self, context: "latest reading", use: use)
            if let failure = latest.errors?.compactMap(\.message).first {
                throw failure.lowercased().contains("too many requests")
                    ? GatewayError(.rateLimited, message: "Awair: \(failure)", suggestion: "The account's daily quota is used up; the gateway waits for it to reset.")
                    : GatewayError(.malformedResponse, message: "Awair answered with an error: \(failure)")
            }
            guard let reading = latest.data?.first else { continue }
            readings.append((monitor, AwairReadings.cloud(reading), reading.timestamp.flatMap(ISOTime.parse)))
        }
        let devices = readings.map { monitor, values, _ in
            Device(
                vendorID: instanceID, vendorDeviceID: String(monitor.deviceId), name: monitor.name.flatMap { $0.isEmpty ? nil : $0 } ?? "Awair \(monitor.deviceId)",
                type: .airQuality, manufacturer: "Awair", model: monitor.deviceType, room: room(monitor), serialNumber: monitor.macAddress,
                writableKeys: [], keys: AwairReadings.ordered(values.keys)
            )
        }
        inventory.announce(devices, vendorID: instanceID, sink: sink)
        for ((_, values, at), device) in zip(readings, devices) {
            sink.send(.state(device.id, values, observedAt: at ?? http.now()))
        }
    }

    /// `rooms:` in the entry, else the monitor's name (people name a monitor after its room), else its room type.
    private func room(_ monitor: WireDevices.Entry) -> String? {
        if let given = options.rooms[String(monitor.deviceId)] { return given }
        if let name = monitor.name, !name.isEmpty { return name }
        return AwairReadings.roomName(monitor.roomType)
    }

    private func monitors(use: QuotaScheduler.Use) async throws(GatewayError) -> [WireDevices.Entry] {
        let now = http.now()
        if let (monitors, listedAt) = known.withLock({ known in known.monitors.map { ($0, known.listedAt ?? .distantPast) } }),
           now.timeIntervalSince(listedAt) < 6 * 3600 {
            return monitors
        }
        // The tier's quota first: polling must keep under what this account may spend a day.
        let user = try await call("/users/self", WireUser.self, context: "account", use: use)
        if let latest = user.quota("LATEST"), latest > 0, let scheduler = http.quota {
            var budgets = scheduler.settings.budgets
            budgets.perDay = latest
            if budgets != scheduler.settings.budgets {
                scheduler.update(budgets: budgets)
                http.publishHealth()
            }
        }
        let list = try await call("/users/self/devices", WireDevices.self, context: "device list", use: use).devices ?? []
        known.withLock { known in
            known.monitors = list
            known.listedAt = now
        }
        return list
    }

    private func call<T: Decodable>(_ path: String, _ type: T.Type, context: String, use: QuotaScheduler.Use) async throws(GatewayError) -> T {
        var request = HTTPClientRequest(url: base + path, timeout: options.network.timeout)
        request.headers.set(name: "Authorization", value: "Bearer \(options.token.reveal())")
        request.headers.set(name: "Accept", value: "application/json")
        do {
            return try await http.sendJSON(request, as: type, context: "Awair \(context)", use: use)
        } catch {
            // A refused token cannot get better by asking again at once: hold off (15 s doubling to 5 min).
            if error.code == .authFailed {
                var final = error
                final.requiresReauthentication = false
                final.suggestion = "Check token_file: an access token from the Awair developer console (https://developer.getawair.com)."
                http.holdOff(after: final)
                throw final
            }
            throw error
        }
    }
}
