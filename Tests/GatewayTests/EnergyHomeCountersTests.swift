import Foundation
@testable import FeatureHomeViews
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayTesting
import MQTT
import TestTraits
import Testing
import VendorSimulators

/// `energy/home`'s counters accumulate each source's increments: a restart with a vendor still down never lowers
/// them, the vendor's return never makes them jump, and a daily counter starting again at midnight takes nothing
/// away. (Summing levels once made Home Assistant book 40,776 kWh of grid import in five minutes.)
@Suite(.integration, .serialized, .timeLimit(.minutes(3))) struct EnergyHomeCountersTests {
    @Test func increasesAddResetsAndFirstReadingsDoNot() {
        var counters = EnergyAccumulator()
        #expect(counters.observe(source: "envoy", key: "solar_energy", value: 20_000) == 0, "a first reading is a baseline")
        #expect(counters.totals["solar_energy"] == 0)
        #expect(counters.observe(source: "envoy", key: "solar_energy", value: 20_001.5) == 1.5)
        // A daily counter: 12.4 kWh by evening, 0 at midnight, then counting again.
        counters.observe(source: "solaredge", key: "solar_energy", value: 12.0)
        counters.observe(source: "solaredge", key: "solar_energy", value: 12.4)
        #expect(counters.observe(source: "solaredge", key: "solar_energy", value: 0) == 0)
        #expect(counters.observe(source: "solaredge", key: "solar_energy", value: 0.3) == 0.3)
        #expect(abs((counters.totals["solar_energy"] ?? 0) - 2.2) < 1e-9)
        // A small wobble down and back is not counted twice; a replaced meter (a big drop) is a new baseline.
        counters.observe(source: "meter", key: "water_volume", value: 224.95)
        #expect(counters.observe(source: "meter", key: "water_volume", value: 224.90) == 0)
        #expect(counters.observe(source: "meter", key: "water_volume", value: 224.97) < 0.021)
        #expect(counters.observe(source: "meter", key: "water_volume", value: 3.0) == 0)
        #expect(counters.observe(source: "meter", key: "water_volume", value: 3.5) == 0.5)
        // NaN and negative readings are not readings.
        #expect(counters.observe(source: "meter", key: "water_volume", value: .nan) == 0)
        #expect(counters.observe(source: "meter", key: "water_volume", value: -4) == 0)
    }

    @Test func aRestoreContinuesFromTheLargerTotalAndAForgottenSourceStartsAgain() {
        var counters = EnergyAccumulator()
        counters.restore(["grid_import_energy": 100])
        counters.restore(["grid_import_energy": 90, "water_volume": 5])
        #expect(counters.totals == ["grid_import_energy": 100, "water_volume": 5])
        counters.observe(source: "pw", key: "grid_import_energy", value: 20_000)
        counters.observe(source: "pw", key: "grid_import_energy", value: 20_002)
        #expect(counters.totals["grid_import_energy"] == 102)
        counters.forget(source: "pw")
        #expect(counters.observe(source: "pw", key: "grid_import_energy", value: 30_000) == 0)
        #expect(counters.totals["grid_import_energy"] == 102)
        // A restore after increments keeps them on top of the larger start.
        counters.restore(["grid_import_energy": 150])
        #expect(counters.totals["grid_import_energy"] == 152)
    }

    static func imported(_ message: MQTTMessage) -> Double? { message.json?["grid_import_energy"] as? Double }
    /// The sum of every counter in the message (the demo's flows change with its time of day: one of them grows).
    static func allCounters(_ message: MQTTMessage) -> Double? {
        guard let json = message.json else { return nil }
        let values = HomeViews.counterKeys.compactMap { json[$0] as? Double }
        return values.isEmpty ? nil : values.reduce(0, +)
    }
    static func sources(_ message: MQTTMessage) -> [String] { message.json?["devices"] as? [String] ?? [] }

    /// Without `storage:`: the demo and a Powerwall feed the home; the gateway restarts while the Powerwall is
    /// down, then the Powerwall comes back.
    @Test func aRestartWithAVendorDownNeverLowersTheCountersAndItsReturnAddsNoJump() async throws {
        let rig = try await PowerwallRig.started()
        let powerwall = rig.simulator
        let directory = rig.directory
        let broker = try await MosquittoBroker.started()
        let vendors = """
              - {type: demo, id: demo, poll_interval: 1}
              - \(rig.vendorLine(pollInterval: 1))
            """
        let client = try await TestMQTTClient.connect(to: broker.url)
        try await client.subscribe("lbs/energy/home")

        let first = try await GatewayHarness.start(broker: broker, directory: directory, vendors: vendors)
        _ = try await client.waitForMessage(topic: "lbs/energy/home", timeout: .seconds(20)) {
            Self.sources($0).contains("pw_site") && Self.sources($0).contains("demo_energy") && Self.imported($0) != nil
        }
        // A few more totals, so they have grown from both sources.
        let grown = client.messages(on: "lbs/energy/home").count + 3
        try await waitUntil("a few more home totals", timeout: .seconds(20)) { client.messages(on: "lbs/energy/home").count >= grown }
        await first.stop()
        await powerwall.stop()
        let before = try #require(client.messages(on: "lbs/energy/home").compactMap(Self.imported).last)
        let mark = client.messages(on: "lbs/energy/home").count

        let second = try await GatewayHarness.start(broker: broker, directory: directory, vendors: vendors)
        defer { Task { await second.stop() } }
        try await waitUntil("energy/home after the restart, from the demo alone", timeout: .seconds(20)) {
            client.messages(on: "lbs/energy/home").dropFirst(mark).contains { Self.sources($0) == ["demo_energy"] && Self.imported($0) != nil }
        }
        let afterRestart = client.messages(on: "lbs/energy/home").dropFirst(mark).compactMap(Self.imported)
        #expect(afterRestart.allSatisfy { $0 >= before }, "the home's grid import went below \(before): \(afterRestart.prefix(5))")

        // The Powerwall answers again (20,000 kWh on its own meter): the home total grows by increments only.
        let back = try await rig.restarted()
        defer { Task { await back.stop() } }
        try await waitUntil("the Powerwall back in energy/home", timeout: .seconds(20)) {
            client.messages(on: "lbs/energy/home").dropFirst(mark).contains { Self.sources($0).contains("pw_site") }
        }
        let latest = try #require(client.messages(on: "lbs/energy/home").compactMap(Self.imported).last)
        #expect(latest - before < 5, "the Powerwall's return made the home jump from \(before) to \(latest)")
        #expect(latest >= before)
        await client.shutdown()
    }

    /// With `storage:` the totals continue from the cache even on a broker that holds nothing; and an older cache
    /// never takes them below what the broker holds.
    @Test func theCacheCarriesTheTotalsAndNeverLowersTheBrokers() async throws {
        let directory = try TemporaryDirectory()
        let vendors = "  - {type: demo, id: demo, poll_interval: 1}"
        func lastImported(_ client: TestMQTTClient, after mark: Int = 0) -> Double? {
            client.messages(on: "lbs/energy/home").dropFirst(mark).compactMap(Self.allCounters).last
        }
        func run(_ broker: MosquittoBroker, storage: Bool, cache: TemporaryDirectory? = nil) async throws -> (first: Double, last: Double) {
            let client = try await TestMQTTClient.connect(to: broker.url)
            try await client.subscribe("lbs/energy/home")
            let gateway = try await GatewayHarness.start(broker: broker, directory: cache ?? directory, vendors: vendors, storage: storage)
            let first = try await client.waitForMessage(topic: "lbs/energy/home", timeout: .seconds(15)) { Self.allCounters($0) != nil && !$0.payload.isEmpty }
            // A few readings, so the total grows.
            try await waitUntil("the total grows", timeout: .seconds(15)) { (lastImported(client) ?? 0) > (Self.allCounters(first) ?? 0) }
            await gateway.stop()
            let last = try #require(lastImported(client))
            await client.shutdown()
            return (try #require(Self.allCounters(first)), last)
        }
        // Run 1 with the cache on broker A.
        let brokerA = try await MosquittoBroker.started()
        let one = try await run(brokerA, storage: true)
        await brokerA.stop()
        let savedCache = try TemporaryDirectory()
        try FileManager.default.copyItem(atPath: directory.file("gateway.sqlite"), toPath: savedCache.file("gateway.sqlite"))

        // Run 2: the same cache, a new broker with nothing retained: the totals continue where run 1 stopped.
        let brokerB = try await MosquittoBroker.started()
        let two = try await run(brokerB, storage: true)
        #expect(two.first >= one.last && two.first - one.last < 1, "run 2 started at \(two.first), run 1 ended at \(one.last)")

        // Run 3 without the cache moves the broker's total on; run 4 with run 1's older cache starts from the broker's.
        let three = try await run(brokerB, storage: false)
        #expect(three.first >= two.last)
        let four = try await run(brokerB, storage: true, cache: savedCache)
        #expect(four.first >= three.last, "an older cache took the total from \(three.last) down to \(four.first)")
        await brokerB.stop()
    }
}
