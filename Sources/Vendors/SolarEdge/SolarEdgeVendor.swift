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

/// SolarEdge sites through the Monitoring API v2: one device `<id>_<site id>` per site.
/// - `/sites/{id}/energy` at QUARTER_HOUR: `solar_power` (the newest quarter hour's average, W) and
///   `solar_energy` (today's production, kWh; it starts again at the site's midnight, which Home Assistant counts
///   as a meter reset); each quarter hour's running total goes to the history at its own time.
/// - `/sites/{id}/overview`, where the site has a consumption meter or a battery: today's `home_energy`,
///   `grid_import_energy`, `grid_export_energy`, `battery_charge_energy`, `battery_discharge_energy` (kWh), and
///   from two readings of the same day the average `home_power`, `grid_power` and `battery_power` between them
///   (v2 has no live power flow: `/powerFlow` answers 404). A site whose overview has no flows is asked again
///   once a day, so it costs one call a poll.
public final class SolarEdgeVendor: Vendor {
    public let instanceID: String
    public let typeName = "solaredge"
    public let http: VendorHTTP
    private let options: SolarEdgeOptions
    private let sink: VendorEventSink
    private let inventory = InventoryTracker()
    private let known = Mutex(Known())

    private struct Known {
        var sites: [WireSite]?
        /// Per site: the newest quarter hour already in the history.
        var historyUntil: [Int64: Date] = [:]
        /// Per site: the last overview's counters and when they were read, for the average power since.
        var flows: [Int64: (at: Date, counters: [String: Double])] = [:]
        /// Per site without flows in its overview: when to look again.
        var overviewAfter: [Int64: Date] = [:]
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
        http.redactor.set("api_key", options.apiKey)
    }

    public var refreshesAllDevices: Bool { true }

    var base: String { options.network.base }

    var pollInterval: Duration {
        guard let quota = http.quota else { return options.network.pollInterval }
        // One energy call a site, and one overview call a site that has flows.
        let cost = known.withLock { known in
            let sites = known.sites?.count ?? 1
            return max(1, sites + known.flows.count)
        }
        return quota.pollInterval(requested: options.network.pollInterval, cost: cost) ?? .seconds(3600)
    }

    public func run() async throws {
        try await http.runPolling(every: { self.pollInterval }) { try await self.poll() }
    }

    public func refresh(_ device: DeviceID) async throws {
        try await poll(use: .refresh)
    }

    public func execute(_ command: DeviceCommand) async throws -> CommandOutcome {
        throw GatewayError(.vendorRejected, message: "SolarEdge monitoring data is read-only: \(command.device) has nothing to set.")
    }

    public func poll(use: QuotaScheduler.Use = .poll) async throws(GatewayError) {
        let sites = try await sites(use: use)
        var readings: [(site: WireSite, solar: Solar?, flows: [String: StateValue])] = []
        for site in sites {
            let energy = try await call("/sites/\(site.siteId)/energy?resolution=QUARTER_HOUR", WireEnergy.self, context: "energy", use: use)
            let solar = self.solar(energy, site: site.siteId)
            let flows = try await flows(site: site.siteId, use: use)
            readings.append((site, solar, flows))
        }
        let devices = readings.map { reading in
            let site = reading.site
            let measured = known.withLock { $0.flows[site.siteId]?.counters.keys }.map(Set.init) ?? []
            return Device(
                vendorID: instanceID, vendorDeviceID: String(site.siteId), name: site.name.flatMap { $0 == "REDACTED" || $0.isEmpty ? nil : $0 } ?? "SolarEdge \(site.siteId)",
                type: .energyMeter, manufacturer: "SolarEdge", model: site.peakPower.map { "\(JSONText.number($0)) kWp" }, writableKeys: [],
                keys: Self.keys(measured: measured)
            )
        }
        inventory.announce(devices, vendorID: instanceID, sink: sink)
        for (reading, device) in zip(readings, devices) {
            if let solar = reading.solar {
                if !solar.history.isEmpty { sink.send(.history(device.id, solar.history)) }
                sink.send(.state(device.id, solar.state, observedAt: solar.at))
            }
            if !reading.flows.isEmpty { sink.send(.state(device.id, reading.flows, observedAt: http.now())) }
        }
    }

    /// The keys of a site: solar always; the counters its overview measures and the average powers they give.
    static func keys(measured: Set<String>) -> [String] {
        var keys = ["solar_power", "solar_energy"]
        if measured.contains("home_energy") { keys.append("home_power") }
        if measured.contains("grid_import_energy") || measured.contains("grid_export_energy") { keys.append("grid_power") }
        if measured.contains("battery_charge_energy") || measured.contains("battery_discharge_energy") { keys.append("battery_power") }
        keys += ["home_energy", "grid_import_energy", "grid_export_energy", "battery_charge_energy", "battery_discharge_energy"].filter(measured.contains)
        return keys
    }

    struct Solar {
        var state: [String: StateValue]
        var history: [TimedReading]
        var at: Date
    }

    /// Today's quarter hours → running totals (history), the day's total and the newest quarter hour's power.
    private func solar(_ energy: WireEnergy, site: Int64) -> Solar? {
        let scale = (energy.unit?.uppercased() == "KWH") ? 1.0 : 0.001
        var total = 0.0
        var history: [TimedReading] = []
        var newest: (end: Date, value: Double)?
        let already = known.withLock { $0.historyUntil[site] } ?? .distantPast
        for slot in energy.values ?? [] {
            // A slot that would make the day's total infinite is left out, like a slot without a value.
            guard let value = slot.value, value.isFinite, (total + value * scale).isFinite, let start = ISOTime.parse(slot.timestamp) else { continue }
            total += value * scale
            let end = start.addingTimeInterval(900)
            if end > already { history.append(TimedReading(key: "solar_energy", value: Self.rounded(total), at: end)) }
            newest = (end, value)
        }
        guard let newest else { return nil }
        known.withLock { $0.historyUntil[site] = newest.end }
        // A quarter hour's Wh × 4 is its average power in W.
        let watts = newest.value * (scale == 1 ? 1000 : 1) * 4
        var state: [String: StateValue] = ["solar_energy": .number(Self.rounded(total))]
        state["solar_power"] = .finite(watts.rounded(places: 1))
        return Solar(state: state, history: history, at: newest.end)
    }

    /// Today's flows from the overview, and the average powers since the previous overview of the same day.
    private func flows(site: Int64, use: QuotaScheduler.Use) async throws(GatewayError) -> [String: StateValue] {
        let now = http.now()
        if let after = known.withLock({ $0.overviewAfter[site] }), now < after { return [:] }
        let counters: [String: Double]
        do {
            counters = try await call("/sites/\(site)/overview", WireOverview.self, context: "overview", use: use).counters
        } catch where error.code == .notFound {
            counters = [:]
        }
        guard !counters.isEmpty else {
            // No meter and no battery: nothing but production, which the energy call gives. Look again tomorrow.
            known.withLock { known in
                known.overviewAfter[site] = now.addingTimeInterval(86_400)
                known.flows[site] = nil
            }
            return [:]
        }
        let previous = known.withLock { known in
            defer {
                known.flows[site] = (now, counters)
                known.overviewAfter[site] = nil
            }
            return known.flows[site]
        }
        var state: [String: StateValue] = counters.compactMapValues { .finite(Self.rounded($0)) }
        if let previous, let powers = Self.averagePowers(from: previous.counters, to: counters, hours: now.timeIntervalSince(previous.at) / 3600) {
            for (key, watts) in powers { state[key] = .finite(watts.rounded(places: 1)) }
        }
        return state
    }

    /// W between two readings of today's counters (kWh); nil across midnight (a counter went down) or when
    /// the readings are less than a minute apart.
    static func averagePowers(from old: [String: Double], to new: [String: Double], hours: Double) -> [String: Double]? {
        guard hours >= 1.0 / 60, new.allSatisfy({ key, value in (old[key] ?? 0) <= value }) else { return nil }
        func delta(_ key: String) -> Double? {
            guard let now = new[key], let before = old[key] else { return nil }
            return (now - before) * 1000 / hours
        }
        var powers: [String: Double] = [:]
        if let home = delta("home_energy") { powers["home_power"] = home }
        let imported = delta("grid_import_energy"), exported = delta("grid_export_energy")
        if imported != nil || exported != nil { powers["grid_power"] = (imported ?? 0) - (exported ?? 0) }
        let discharged = delta("battery_discharge_energy"), charged = delta("battery_charge_energy")
        if discharged != nil || charged != nil { powers["battery_power"] = (discharged ?? 0) - (charged ?? 0) }
        return powers
    }

    static func rounded(_ value: Double) -> Double { value.rounded(places: 3) }

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
