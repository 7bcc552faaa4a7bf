import Foundation
import GatewayModel
import GatewayTesting
import TestTraits
import Testing
import VendorKit
@testable import VendorNeurio
import VendorSimulators
import VendorTesting

/// `type: neurio` against a simulated sensor serving a sample in Neurio's published `/current-sample` format.
@Suite(.integration) struct NeurioTests {
    func start() async throws -> (NeurioSimulator, NeurioVendor, EventLog, ManualClock) {
        let simulator = try NeurioSimulator(sampleFile: Fixtures.path("neurio", "current-sample.json"))
        try await simulator.start()
        let log = EventLog()
        let clock = ManualClock()
        let network = NetworkOptions(url: await simulator.baseURL, timeout: .seconds(2), pollInterval: .seconds(5))
        let vendor = try NeurioVendor(instanceID: "neurio", options: network, sink: log.sink, context: VendorContext(clock: clock))
        return (simulator, vendor, log, clock)
    }

    func channels() throws -> [String: [String: Any]] {
        let object = try JSONSerialization.jsonObject(with: Fixtures.data("neurio", "current-sample.json")) as? [String: Any]
        let list = try #require(object?["channels"] as? [[String: Any]])
        return Dictionary(uniqueKeysWithValues: list.compactMap { channel in (channel["type"] as? String).map { ($0, channel) } })
    }

    func number(_ value: Any?) throws -> Double {
        if let int = value as? Int { return Double(int) }
        return try #require(value as? Double)
    }

    @Test func theSampleGivesGridSolarAndHomeWithTheirCounters() async throws {
        let (simulator, vendor, log, _) = try await start()
        defer { Task { await simulator.stop() } }
        try await vendor.poll()
        let device = try #require(log.inventories.last?.first)
        #expect(device.id.rawValue == "neurio_0x0000c47f5101a2b3" && device.type == .energyMeter)
        let channels = try channels()
        func kWh(_ type: String, _ field: String) throws -> StateValue {
            .number((try number(channels[type]?[field]) / 3_600_000 * 1000).rounded() / 1000)
        }
        #expect(log.states[device.id] == [
            "grid_power": .number(try number(channels["NET"]?["p_W"])), "grid_import_energy": try kWh("NET", "eImp_Ws"),
            "grid_export_energy": try kWh("NET", "eExp_Ws"),
            "solar_power": .number(try number(channels["GENERATION"]?["p_W"])), "solar_energy": try kWh("GENERATION", "eImp_Ws"),
            "home_power": .number(try number(channels["CONSUMPTION"]?["p_W"])), "home_energy": try kWh("CONSUMPTION", "eImp_Ws"),
            "voltage_l1": .number(try number(channels["PHASE_A_CONSUMPTION"]?["v_V"])),
            "voltage_l2": .number(try number(channels["PHASE_B_CONSUMPTION"]?["v_V"])),
        ])
        // Exporting: the grid is negative and home = grid + solar, as the sample is consistent.
        #expect(log.states[device.id]?["grid_power"] == .number(-1608) && log.states[device.id]?["home_power"] == .number(2492))
        #expect(log.observedAt(device.id) == ISOTime.parse("2026-06-21T19:04:12Z"))
    }

    @Test func anUnsynchronizedClockAndBrokenAnswersAreHandled() async throws {
        let (simulator, vendor, log, clock) = try await start()
        defer { Task { await simulator.stop() } }
        simulator.inject(.notSynchronized)
        try await vendor.poll()
        let id = try #require(log.inventories.last?.first?.id)
        #expect(try #require(log.observedAt(id)).timeIntervalSinceNow > -60, "NOT_SYNCHRONIZED: as of now")
        simulator.inject(.malformedJSON)
        #expect(await gatewayError { try await vendor.poll() }?.code == .malformedResponse)
        simulator.inject(.serverError)
        #expect(await gatewayError { try await vendor.poll() }?.code == .vendorServerError)
        simulator.inject(.htmlError)
        #expect(await gatewayError { try await vendor.poll() }?.code == .vendorServerError)
        simulator.inject(.slow(seconds: 3))
        #expect(await gatewayError { try await vendor.poll() }?.code == .vendorTimeout)
        clock.advance(by: .seconds(300))
        try await vendor.poll()
        #expect(vendor.http.health.lastError == nil || vendor.http.health.state != .down)
    }

    @Test func theEntryNeedsTheSensorsURL() {
        var reader = ConfigReader()
        #expect(NeurioVendorFactory.parse(VendorSettings(type: "neurio", id: "neurio"), reader: &reader, environment: [:]) == nil)
        #expect(reader.problems.map(\.path) == ["vendors[0].url"])
        var fine = ConfigReader()
        let options = NeurioVendorFactory.parse(
            VendorSettings(type: "neurio", id: "neurio", options: .mapping([(key: "url", value: .scalar("http://192.168.1.50", line: 1))])),
            reader: &fine, environment: [:]
        )
        #expect(fine.problems.isEmpty && options?.pollInterval == .seconds(5) && options?.tls == .system)
    }
}
