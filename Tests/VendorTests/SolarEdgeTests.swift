import Foundation
import GatewayModel
import GatewayTesting
import Synchronization
import TestTraits
import Testing
import VendorKit
@testable import VendorSolarEdge
import VendorSimulators
import VendorTesting

/// `type: solaredge` (Monitoring API v2) against the simulator serving a real site's recorded responses.
@Suite(.integration) struct SolarEdgeTests {
    func start(
        siteID: String? = nil, key: String = "se-key", now: @escaping @Sendable () -> Date = { Date() }
    ) async throws -> (SolarEdgeSimulator, SolarEdgeVendor, EventLog, ManualClock) {
        let simulator = try SolarEdgeSimulator(configuration: .init(apiKey: "se-key", fixtures: Fixtures.path("solaredge", "")))
        try await simulator.start()
        let clock = ManualClock()
        let log = EventLog()
        let network = NetworkOptions(url: await simulator.baseURL, timeout: .seconds(5), pollInterval: .seconds(1800),
                                     quota: SolarEdgeVendorFactory.defaults.quota)
        let vendor = try SolarEdgeVendor(instanceID: "se", options: SolarEdgeOptions(network: network, apiKey: VendorSecret(key), siteID: siteID),
                                         sink: log.sink, context: VendorContext(clock: clock, now: now))
        return (simulator, vendor, log, clock)
    }

    @Test func theSitesProductionIsPublishedAsTheRecordedDayReportsIt() async throws {
        let (simulator, vendor, log, _) = try await start()
        defer { Task { await simulator.stop() } }
        try await vendor.poll()
        let device = try #require(log.inventories.last?.first)
        #expect(device.id.rawValue == "se_3066774" && device.name == "SolarEdge 3066774" && device.model == "5.68 kWp")
        // The recorded day: 44 quarter hours with values, 26,290 Wh in all (the same as overview.json's production total).
        let energy = try #require(try JSONSerialization.jsonObject(with: Fixtures.data("solaredge", "energy.json")) as? [String: Any])
        let values = try #require(energy["values"] as? [[String: Any]]).compactMap { $0["value"] as? Double }
        #expect(log.states[device.id]?["solar_energy"] == .number(values.reduce(0, +) / 1000))
        #expect(log.states[device.id]?["solar_power"] == .number((values.last ?? 0) * 4), "the newest quarter hour's average")
        let history = log.all.compactMap { if case .history(_, let readings) = $0 { readings } else { nil } }.flatMap { $0 }
        #expect(history.count == values.count && history.last?.value == 26.29)
        let first = try #require((energy["values"] as? [[String: Any]])?.first { $0["value"] is Double }?["timestamp"] as? String)
        #expect(history.first?.at == ISOTime.parse(first)?.addingTimeInterval(900), "each quarter hour at its end, from the file")
        #expect(simulator.requests["/v2/sites"] == 1)
        log.clear()
        try await vendor.poll()
        #expect(simulator.requests["/v2/sites"] == 1, "the site list is read once")
        #expect(!log.all.contains { if case .history = $0 { true } else { false } }, "no quarter hour twice")
        // The recorded site has no consumption meter and no battery: its overview's flows are all null, so the
        // device has solar keys only and the overview is not asked again today.
        #expect(device.keys == ["solar_power", "solar_energy"])
        #expect(simulator.requests["/v2/sites/3066774/overview"] == 1)
    }

    /// A site with a meter and a battery (the overview's flows filled in, as the v2 schema has them): today's
    /// counters, and from two overviews half an hour apart the average home, grid and battery power.
    @Test func aMeteredSiteGivesTodaysFlowsAndTheirAveragePower() async throws {
        let clock = Mutex(Date(timeIntervalSince1970: 1_790_000_000))
        let (simulator, vendor, log, _) = try await start(siteID: "3066774", now: { clock.withLock { $0 } })
        defer { Task { await simulator.stop() } }
        func overview(produced: Double, toGrid: Double, toStorage: Double, consumed: Double, fromGrid: Double, fromStorage: Double) -> String {
            #"{"siteId":3066774,"production":{"total":\#(produced),"unit":"WH","toSelfConsumption":\#(produced - toGrid - toStorage),"toStorage":\#(toStorage),"toGrid":\#(toGrid)},"consumption":{"total":\#(consumed),"unit":"WH","fromPv":\#(consumed - fromGrid - fromStorage),"fromStorage":\#(fromStorage),"fromGrid":\#(fromGrid)}}"#
        }
        simulator.setOverview(overview(produced: 10_000, toGrid: 2_000, toStorage: 3_000, consumed: 9_000, fromGrid: 3_500, fromStorage: 500))
        try await vendor.poll()
        let device = try #require(log.inventories.last?.first)
        #expect(device.keys == ["solar_power", "solar_energy", "home_power", "grid_power", "battery_power", "home_energy", "grid_import_energy",
                                "grid_export_energy", "battery_charge_energy", "battery_discharge_energy"])
        var state = try #require(log.states[device.id])
        #expect(state["home_energy"] == .number(9) && state["grid_import_energy"] == .number(3.5) && state["grid_export_energy"] == .number(2))
        #expect(state["battery_charge_energy"] == .number(3) && state["battery_discharge_energy"] == .number(0.5))
        #expect(state["home_power"] == nil, "one reading: no average yet")

        // Half an hour later: 600 Wh more used (1,200 W), 400 Wh more imported and 100 Wh more exported (+600 W),
        // 50 Wh more charged and 250 Wh more discharged (+400 W, discharging).
        clock.withLock { $0 += 1800 }
        simulator.setOverview(overview(produced: 10_150, toGrid: 2_100, toStorage: 3_050, consumed: 9_600, fromGrid: 3_900, fromStorage: 750))
        try await vendor.poll()
        state = try #require(log.states[device.id])
        #expect(state["home_power"] == .number(1200) && state["grid_power"] == .number(600) && state["battery_power"] == .number(400))

        // After midnight the counters start again: no average across the reset.
        clock.withLock { $0 += 1800 }
        log.clear()
        simulator.setOverview(overview(produced: 0, toGrid: 0, toStorage: 0, consumed: 200, fromGrid: 200, fromStorage: 0))
        try await vendor.poll()
        state = try #require(log.states[device.id])
        #expect(state["home_energy"] == .number(0.2) && state["home_power"] == nil)
        #expect(simulator.requests["/v2/sites/3066774/overview"] == 3)
        #expect(vendor.pollInterval >= .seconds(2592), "two calls a poll: 2,000 a month allow one every 43.2 min")
    }

    @Test func aWrongKeyIsAuthFailedHeldOffAndNeverShown() async throws {
        let (simulator, vendor, _, clock) = try await start(key: "v1-key-123")
        defer { Task { await simulator.stop() } }
        let error = await gatewayError { try await vendor.poll() }
        #expect(error?.code == .authFailed && error?.suggestion.contains("v2 key") == true)
        #expect(error?.message.contains("v1-key-123") == false)
        let asked = simulator.requests.values.reduce(0, +)
        _ = await gatewayError { try await vendor.poll() }
        #expect(simulator.requests.values.reduce(0, +) == asked, "held off, not asked again at once")
        #expect(vendor.http.health.state == .down)
        clock.advance(by: .seconds(16))
        _ = await gatewayError { try await vendor.poll() }
        #expect(simulator.requests.values.reduce(0, +) == asked + 1)
    }

    @Test func rateLimitsAndServerErrorsAreReportedAndTheQuotaStretchesThePolls() async throws {
        let (simulator, vendor, _, _) = try await start(siteID: "3066774")
        defer { Task { await simulator.stop() } }
        simulator.inject(.rateLimited(retryAfter: 60))
        let limited = await gatewayError { try await vendor.poll() }
        #expect(limited?.code == .rateLimited && limited?.retryAfter == .seconds(60))
        simulator.inject(.htmlError)
        #expect(await gatewayError { try await vendor.poll() }?.code == .vendorServerError)
        simulator.inject(.malformedJSON)
        #expect(await gatewayError { try await vendor.poll() }?.code == .malformedResponse)
        try await vendor.poll()
        #expect(simulator.requests["/v2/sites"] == nil, "site_id given: no site list")
        // 2,000 calls a month for one site: at least every 21.6 min whatever poll_interval asks.
        #expect(vendor.pollInterval >= .seconds(1296))
        #expect(vendor.http.health.quota["month"]?["limit"] == 2000)
    }

    @Test func theEntryNeedsAKeyAndDefaultsToTheV2Cloud() throws {
        var reader = ConfigReader()
        let entry = VendorSettings(type: "solaredge", id: "se", options: .mapping([(key: "api_key_file", value: .scalar("/nonexistent/key", line: 1))]))
        #expect(SolarEdgeVendorFactory.parse(entry, reader: &reader, environment: [:]) == nil)
        #expect(reader.problems.map(\.path) == ["vendors[0].api_key_file"])
        var fine = ConfigReader()
        let options = try #require(SolarEdgeVendorFactory.parse(
            VendorSettings(type: "solaredge", id: "se", options: .mapping([(key: "site_id", value: .scalar("3066774", line: 1))])),
            reader: &fine, environment: ["LBS_SE_API_KEY": "k"]
        ))
        #expect(options.network.url == "https://monitoringapi.solaredge.com/v2" && options.siteID == "3066774" && options.network.tls == .system)
        var bad = ConfigReader()
        _ = SolarEdgeVendorFactory.parse(VendorSettings(type: "solaredge", id: "se", options: .mapping([(key: "site_id", value: .scalar("abc", line: 1))])),
                                         reader: &bad, environment: ["LBS_SE_API_KEY": "k"])
        #expect(bad.problems.map(\.path) == ["vendors[0].site_id"])
    }
}
