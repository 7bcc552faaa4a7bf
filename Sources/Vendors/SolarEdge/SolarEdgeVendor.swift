import CurlHTTP
import Foundation
import GatewayModel
import Logging
import Resilience
import Synchronization
import VendorKit

/// SolarEdge sites through the Monitoring API v2: one device `<id>_<site id>` per site with `solar_power` (the
/// average of the newest quarter hour, W) and `solar_energy` (today's production, kWh; it starts again at the
/// site's midnight, which Home Assistant counts as a meter reset). Each quarter hour's running total goes to
/// the history at its own time. One request per site and poll: `/sites/{id}/energy` at QUARTER_HOUR.
public final class SolarEdgeVendor: Vendor {
    public let instanceID: String
    public let typeName = "solaredge"
    public let http: VendorHTTP
    private let options: SolarEdgeOptions
    private let sink: VendorEventSink
    private let known = Mutex(Known())

    private struct Known {
        var sites: [WireSite]?
        var devices: [Device]?
        /// Per site: the newest quarter hour already in the history.
        var historyUntil: [Int64: Date] = [:]
    }

    public init(instanceID: String, options: SolarEdgeOptions, sink: VendorEventSink, context: VendorContext) throws(GatewayError) {
        self.instanceID = instanceID
        self.options = options
        self.sink = sink
        let client = try VendorHTTP.newClient()
        http = VendorHTTP(
            vendorID: instanceID, client: client, settings: VendorHTTP.Settings(options.network, retry: .none), sink: sink,
            time: TimeSource(context.clock), now: context.now, pinStore: context.pinStore, logger: context.logger
        )
        http.redactor.set("api_key", options.apiKey.reveal())
    }

    public var refreshesAllDevices: Bool { true }

    var base: String { options.network.base }

    var pollInterval: Duration {
        guard let quota = http.quota else { return options.network.pollInterval }
        let sites = max(1, known.withLock { $0.sites?.count } ?? 1)
        return quota.pollInterval(requested: options.network.pollInterval, cost: sites) ?? .seconds(3600)
    }

    public func run() async throws {
        http.publishHealth()
        while !Task.isCancelled {
            try? await poll()
            try await http.time.sleep(for: pollInterval)
        }
    }

    public func refresh(_ device: DeviceID) async throws {
        try await poll(use: .refresh)
    }

    public func execute(_ command: DeviceCommand) async throws -> CommandOutcome {
        throw GatewayError(.vendorRejected, message: "SolarEdge monitoring data is read-only: \(command.device) has nothing to set.")
    }

    public func poll(use: QuotaScheduler.Use = .poll) async throws(GatewayError) {
        let sites = try await sites(use: use)
        let devices = sites.map { site in
            Device(
                vendorID: instanceID, vendorDeviceID: String(site.siteId), name: site.name.flatMap { $0 == "REDACTED" || $0.isEmpty ? nil : $0 } ?? "SolarEdge \(site.siteId)",
                type: .energyMeter, manufacturer: "SolarEdge", model: site.peakPower.map { "\(JSONText.number($0)) kWp" }, writableKeys: [],
                keys: ["solar_power", "solar_energy"]
            )
        }
        let changed = known.withLock { known -> Bool in
            guard known.devices != devices else { return false }
            known.devices = devices
            return true
        }
        if changed { sink.send(.inventory(vendorID: instanceID, devices: devices)) }
        for (site, device) in zip(sites, devices) {
            let energy = try await call("/sites/\(site.siteId)/energy?resolution=QUARTER_HOUR", WireEnergy.self, context: "energy", use: use)
            publish(energy, site: site.siteId, device: device.id)
        }
    }

    /// Today's quarter hours → running totals (history), the day's total and the newest quarter hour's power.
    private func publish(_ energy: WireEnergy, site: Int64, device: DeviceID) {
        let scale = (energy.unit?.uppercased() == "KWH") ? 1.0 : 0.001
        var total = 0.0
        var history: [TimedReading] = []
        var newest: (end: Date, value: Double)?
        let already = known.withLock { $0.historyUntil[site] } ?? .distantPast
        for slot in energy.values ?? [] {
            guard let value = slot.value, value.isFinite, let start = ISOTime.parse(slot.timestamp) else { continue }
            total += value * scale
            let end = start.addingTimeInterval(900)
            if end > already { history.append(TimedReading(key: "solar_energy", value: Self.rounded(total), at: end)) }
            newest = (end, value)
        }
        guard let newest else { return }
        known.withLock { $0.historyUntil[site] = newest.end }
        if !history.isEmpty { sink.send(.history(device, history)) }
        // A quarter hour's Wh × 4 is its average power in W.
        let watts = newest.value * (scale == 1 ? 1000 : 1) * 4
        sink.send(.state(device, ["solar_energy": .number(Self.rounded(total)), "solar_power": .number((watts * 10).rounded() / 10)], observedAt: newest.end))
    }

    static func rounded(_ value: Double) -> Double { (value * 1000).rounded() / 1000 }

    private func sites(use: QuotaScheduler.Use) async throws(GatewayError) -> [WireSite] {
        if let id = options.siteID.flatMap(Int64.init) { return [WireSite(siteId: id)] }
        if let sites = known.withLock({ $0.sites }) { return sites }
        let list = try await call("/sites", WireSites.self, context: "site list", use: use).sites?.site ?? []
        guard !list.isEmpty else {
            throw GatewayError(.notFound, message: "The SolarEdge API key sees no site.", suggestion: "Check that the key belongs to the account that owns the site, or set site_id.")
        }
        known.withLock { $0.sites = list }
        return list
    }

    private func call<T: Decodable>(_ path: String, _ type: T.Type, context: String, use: QuotaScheduler.Use) async throws(GatewayError) -> T {
        var request = HTTPClientRequest(url: base + path, timeout: options.network.timeout)
        request.headers.set(name: "X-API-Key", value: options.apiKey.reveal())
        request.headers.set(name: "Accept", value: "application/json")
        do {
            return try await http.sendJSON(request, as: type, context: "SolarEdge \(context)", use: use)
        } catch {
            // A refused key or a retired API cannot be fixed by asking again: hold off (15 s doubling to 5 min).
            if error.code == .authFailed || (error.code == .notFound && error.httpStatus == 410) {
                var final = error
                final.requiresReauthentication = false
                final.suggestion = error.code == .authFailed
                    ? "Check api_key_file: a Monitoring API v2 key from the SolarEdge ONE portal (v1 keys do not work with v2)."
                    : "SolarEdge retired this API; check that url points at https://monitoringapi.solaredge.com/v2."
                http.holdOff(after: final)
                throw final
            }
            throw error
        }
    }
}
