import Foundation
import GatewayModel
import GatewayTesting
import Testing
import VendorKit
@testable import VendorSolarEdge
import VendorSimulators
import VendorTesting

/// `type: solaredge` (Monitoring API v2) against the simulator serving a real site's recorded responses.
@Suite struct SolarEdgeTests {
    func start(siteID: String? = nil, key: String = "se-key") async throws -> (SolarEdgeSimulator, SolarEdgeVendor, EventLog, ManualClock) {
        let simulator = try SolarEdgeSimulator(configuration: .init(apiKey: "se-key", fixtures: Fixtures.path("solaredge", "")))
        try await simulator.start()
        let clock = ManualClock()
        let log = EventLog()
        let network = NetworkOptions(url: await simulator.baseURL, timeout: .seconds(5), pollInterval: .seconds(1800),
                                     quota: SolarEdgeVendorFactory.defaults.quota)
        let vendor = try SolarEdgeVendor(instanceID: "se", options: SolarEdgeOptions(network: network, apiKey: VendorSecret(key), siteID: siteID),
                                         sink: log.sink, context: VendorContext(clock: clock))
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
