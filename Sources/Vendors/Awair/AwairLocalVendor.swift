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

/// Awair monitors over their Local API (Element, 2nd Edition, Omni, Mint; turned on in the Awair app): plain
/// HTTP, no authentication, current data only. `/settings/config/data` says which device answers (its uuid
/// gives the device id `<id>_<uuid>`, its firmware the version); `/air-data/latest` is read every poll.
public final class AwairLocalVendor: Vendor {
    public let instanceID: String
    public let typeName = "awair_local"
    public let http: VendorHTTP
    private let options: AwairLocalOptions
    private let sink: VendorEventSink
    private let inventory = InventoryTracker()
    private let known = Mutex(Known())

    private struct Known {
        /// Per configured URL: the device's identity once read.
        var configs: [String: WireLocalConfig] = [:]
    }

    public init(instanceID: String, options: AwairLocalOptions, sink: VendorEventSink, context: VendorContext) throws(GatewayError) {
        self.instanceID = instanceID
        self.options = options
        self.sink = sink
        http = try VendorHTTP(vendorID: instanceID, settings: VendorHTTP.Settings(options.network, retry: .none), sink: sink, context: context)
    }

    public var refreshesAllDevices: Bool { true }

    public func run() async throws {
        try await http.runPolling(every: { [options] in options.network.pollInterval }) { try await self.poll() }
    }

    public func refresh(_ device: DeviceID) async throws { try await poll(use: .refresh) }

    public func execute(_ command: DeviceCommand) async throws -> CommandOutcome {
        throw GatewayError(.vendorRejected, message: "Awair readings are read-only: \(command.device) has nothing to set.")
    }

    /// Every monitor is asked; one that does not answer does not hide the others (its error is thrown last).
    public func poll(use: QuotaScheduler.Use = .poll) async throws(GatewayError) {
        var readings: [(AwairLocalOptions.Monitor, WireLocalConfig, WireLocalLatest)] = []
        var failure: GatewayError?
        for monitor in options.monitors {
            do throws(GatewayError) {
                let config = try await config(of: monitor, use: use)
                let latest = try await call(monitor.url, "/air-data/latest", WireLocalLatest.self, context: "latest reading", use: use)
                readings.append((monitor, config, latest))
            } catch {
                failure = error
            }
        }
        let devices = readings.map { monitor, config, latest in
            Device(
                vendorID: instanceID, vendorDeviceID: Slug.make(config.device_uuid), name: monitor.name ?? monitor.room.map { "Awair \($0)" } ?? config.device_uuid,
                type: .airQuality, manufacturer: "Awair", model: Self.model(config.device_uuid), room: monitor.room, swVersion: config.fw_version,
                serialNumber: config.wifi_mac, writableKeys: [], keys: AwairReadings.ordered(AwairReadings.local(latest).keys)
            )
        }
        // A monitor that did not answer keeps its place: the inventory is only replaced when every one answered.
        if failure == nil || !inventory.hasAnnounced { inventory.announce(devices, vendorID: instanceID, sink: sink) }
        for ((_, _, latest), device) in zip(readings, devices) {
            let at = latest.timestamp.flatMap { $0.isEmpty ? nil : ISOTime.parse($0) }
            sink.send(.state(device.id, AwairReadings.local(latest), observedAt: at ?? http.now()))
        }
        if let failure { throw failure }
    }

    /// `awair-element_5366` → `awair-element`.
    static func model(_ uuid: String) -> String? {
        guard let cut = uuid.lastIndex(of: "_") else { return nil }
        return String(uuid[..<cut])
    }

    private func config(of monitor: AwairLocalOptions.Monitor, use: QuotaScheduler.Use) async throws(GatewayError) -> WireLocalConfig {
        if let config = known.withLock({ $0.configs[monitor.url] }) { return config }
        let config = try await call(monitor.url, "/settings/config/data", WireLocalConfig.self, context: "device settings", use: use)
        known.withLock { $0.configs[monitor.url] = config }
        return config
    }

    private func call<T: Decodable>(_ url: String, _ path: String, _ type: T.Type, context: String, use: QuotaScheduler.Use) async throws(GatewayError) -> T {
        var request = HTTPClientRequest(url: NetworkOptions.root(url) + path, timeout: options.network.timeout)
        request.headers.set(name: "Accept", value: "application/json")
        do {
            return try await http.sendJSON(request, as: type, context: "Awair \(context)", use: use)
        } catch where error.code == .notFound {
            var final = error
            final.suggestion = "Turn on the Local API for this monitor in the Awair Home app (Awair+ → Awair APIs → Local API)."
            throw final
        }
    }
}
