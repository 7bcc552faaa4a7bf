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

/// `http://<sensor>/current-sample` (Neurio's "Sensor Local Access"): per channel its type, power `p_W`,
/// voltage `v_V` and energy imported / exported in watt-seconds (`eImp_Ws`, `eExp_Ws`).
struct WireSample: Decodable, Sendable {
    struct Channel: Decodable, Sendable {
        var type: String?
        var ch: Int?
        var p_W: Double?
        var v_V: Double?
        var eImp_Ws: Double?
        var eExp_Ws: Double?
    }

    var sensorId: String?
    /// ISO 8601, or `NOT_SYNCHRONIZED` before the sensor has the time.
    var timestamp: String?
    var channels: [Channel]?
}

/// The sample → the gateway's keys:
/// - `NET` (the grid CTs): `grid_power` (+ import / − export), `grid_import_energy` (`eImp`), `grid_export_energy` (`eExp`);
/// - `GENERATION` (a PV channel): `solar_power`, `solar_energy` (`eImp`: the channel's power is + while the panels
///   produce, so what they produce is what it counts in);
/// - `CONSUMPTION`: `home_power`, `home_energy` (`eImp`); a sensor with only the per-phase consumption channels
///   gives their sums;
/// - per phase: `voltage_l1`, `voltage_l2` (`PHASE_A/B_CONSUMPTION`), else one `voltage`.
enum NeurioMapping {
    static func state(_ sample: WireSample) -> [String: StateValue] {
        var values: [String: StateValue] = [:]
        let channels = sample.channels ?? []
        func channel(_ type: String) -> WireSample.Channel? { channels.first { $0.type == type } }
        func set(_ key: String, _ value: Double?, kWh: Bool = false) {
            guard let value, value.isFinite else { return }
            values[key] = .number(kWh ? (value / 3_600_000 * 1000).rounded() / 1000 : value)
        }
        if let net = channel("NET") {
            set("grid_power", net.p_W)
            set("grid_import_energy", net.eImp_Ws, kWh: true)
            set("grid_export_energy", net.eExp_Ws, kWh: true)
        }
        if let solar = channel("GENERATION") {
            set("solar_power", solar.p_W)
            set("solar_energy", solar.eImp_Ws, kWh: true)
        }
        let phases = ["PHASE_A_CONSUMPTION", "PHASE_B_CONSUMPTION", "PHASE_C_CONSUMPTION"].compactMap(channel)
        if let home = channel("CONSUMPTION") {
            set("home_power", home.p_W)
            set("home_energy", home.eImp_Ws, kWh: true)
        } else if !phases.isEmpty {
            set("home_power", phases.compactMap(\.p_W).reduce(0, +))
            set("home_energy", phases.compactMap(\.eImp_Ws).reduce(0, +), kWh: true)
        }
        if phases.count > 1 {
            for (index, phase) in phases.enumerated() { set("voltage_l\(index + 1)", phase.v_V) }
        } else {
            set("voltage", (channel("NET") ?? channel("CONSUMPTION") ?? channels.first)?.v_V)
        }
        return values
    }

    static let order = ["solar_power", "grid_power", "home_power", "solar_energy", "grid_import_energy", "grid_export_energy", "home_energy",
                        "voltage", "voltage_l1", "voltage_l2", "voltage_l3"]
}

/// A Neurio / Generac PWRview sensor on the local network: one device `<id>_<sensor id>`, read from
/// `/current-sample` (plain HTTP, no authentication) every poll.
public final class NeurioVendor: Vendor {
    public let instanceID: String
    public let typeName = "neurio"
    public let http: VendorHTTP
    private let options: NetworkOptions
    private let sink: VendorEventSink
    private let inventory = InventoryTracker()

    public init(instanceID: String, options: NetworkOptions, sink: VendorEventSink, context: VendorContext) throws(GatewayError) {
        self.instanceID = instanceID
        self.options = options
        self.sink = sink
        http = try VendorHTTP(vendorID: instanceID, settings: VendorHTTP.Settings(options, retry: .none), sink: sink, context: context)
    }

    public var refreshesAllDevices: Bool { true }

    public func run() async throws {
        try await http.runPolling(every: { [options] in options.pollInterval }) { try await self.poll() }
    }

    public func refresh(_ device: DeviceID) async throws { try await poll(use: .refresh) }

    public func execute(_ command: DeviceCommand) async throws -> CommandOutcome {
        throw GatewayError(.vendorRejected, message: "A Neurio sensor only measures: \(command.device) has nothing to set.")
    }

    public func poll(use: QuotaScheduler.Use = .poll) async throws(GatewayError) {
        var request = HTTPClientRequest(url: options.base + "/current-sample", timeout: options.timeout)
        request.headers.set(name: "Accept", value: "application/json")
        let sample: WireSample
        do {
            sample = try await http.sendJSON(request, as: WireSample.self, context: "Neurio sample", use: use)
        } catch where error.code == .notFound {
            var final = error
            final.suggestion = "Check that url is the Neurio sensor itself (http://<sensor address>); it serves /current-sample."
            throw final
        }
        guard let sensor = sample.sensorId, !sensor.isEmpty else {
            throw http.classifier.unexpectedShape("it has no sensorId", context: "Neurio sample")
        }
        let values = NeurioMapping.state(sample)
        guard !values.isEmpty else {
            throw http.classifier.unexpectedShape("it has no channel the gateway knows (NET, GENERATION, CONSUMPTION)", context: "Neurio sample")
        }
        let present = Set(values.keys)
        let device = Device(vendorID: instanceID, vendorDeviceID: Slug.make(sensor), name: "Neurio \(sensor)", type: .energyMeter,
                            manufacturer: "Generac", model: "Neurio / PWRview sensor", serialNumber: sensor, writableKeys: [],
                            keys: NeurioMapping.order.filter(present.contains))
        inventory.announce([device], vendorID: instanceID, sink: sink)
        // Before the sensor has the time it says NOT_SYNCHRONIZED: the reading is as of now.
        let at = sample.timestamp.flatMap(ISOTime.parse) ?? http.now()
        sink.send(.state(device.id, values, observedAt: at))
    }
}

/// `type: neurio`: a Neurio / Generac PWRview sensor's local API.
public enum NeurioVendorFactory: VendorFactory {
    public static let typeName = "neurio"

    /// The sensor samples every second; every 5 s is plenty for a home view and gentle on its small web server.
    static let defaults = NetworkOptions.Defaults(urlExample: "http://192.168.1.50", pollInterval: 5, timeout: 5)
    public static let network: NetworkOptions.Defaults? = defaults

    public static func parse(_ settings: VendorSettings, reader: inout ConfigReader, environment: [String: String]) -> NetworkOptions? {
        reader.rejectUnknownKeys(in: settings.options, at: settings.path, allowed: NetworkOptions.keys)
        return NetworkOptions.parse(settings, defaults: defaults, reader: &reader)
    }

    public static func make(_ settings: VendorSettings, options: NetworkOptions, sink: VendorEventSink, context: VendorContext) throws -> any Vendor {
        try NeurioVendor(instanceID: settings.id, options: options, sink: sink, context: context)
    }
}
