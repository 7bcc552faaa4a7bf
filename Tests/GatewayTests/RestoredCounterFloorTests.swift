import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayModel
import GatewayTesting
import MQTT
import TestTraits
import Testing
import VendorSimulators

/// A counter restored from an older cache never goes below what the broker holds: restoring a cache after runs
/// without one made `water_volume` 224.95 → 217.38, which Home Assistant books as a meter reset (the whole
/// reading counted again as use).
@Suite(.integration, .serialized, .timeLimit(.minutes(3))) struct RestoredCounterFloorTests {
    static let key = "grid_import_energy"

    /// Every `lbs/device/pw_site` message after `mark` with the counter.
    static func readings(_ client: TestMQTTClient, after mark: Int) -> [Double] {
        client.received.dropFirst(mark).filter { $0.topic == "lbs/device/pw_site" && !$0.payload.isEmpty }
            .compactMap { $0.json?[key] as? Double }
    }

    /// A first run that cached the site's meters and stopped, and the Powerwall down since: the rig, the broker,
    /// the vendor line, an observer of `lbs/device/pw_site` and the first run's last fresh state.
    static func cachedThenDown() async throws -> (PowerwallRig, MosquittoBroker, String, TestMQTTClient, MQTTMessage) {
        let rig = try await PowerwallRig.started()
        let broker = try await MosquittoBroker.started()
        let vendors = "  - " + rig.vendorLine(pollInterval: 2)
        let first = try await GatewayHarness.start(broker: broker, directory: rig.directory, vendors: vendors, storage: true)
        let client = try await first.observer("lbs/device/pw_site")
        let fresh = try await client.waitForMessage(topic: "lbs/device/pw_site", timeout: .seconds(15)) {
            $0.json?[key] is Double && $0.json?["stale"] == nil
        }
        await first.stop()
        await rig.simulator.stop()
        return (rig, broker, vendors, client, fresh)
    }

    /// The first run caches the site's meters; a later run without the cache (simulated: the broker's retained
    /// state is raised) saw the meter go on. The Powerwall is down at the restart, so all the gateway has is the
    /// older cache: it must publish the broker's higher reading, never its own lower one.
    @Test func aCounterFromAnOlderCacheIsFlooredAtTheBrokersRetainedValue() async throws {
        let (rig, broker, vendors, client, fresh) = try await Self.cachedThenDown()
        let cached = try #require(fresh.json?[Self.key] as? Double)
        var newer = try #require(fresh.json)
        let brokerValue = cached + 7.5
        newer[Self.key] = brokerValue
        let payload = try JSONSerialization.data(withJSONObject: newer, options: [.sortedKeys])
        try await client.publish("lbs/device/pw_site", Array(payload), qos: .atLeastOnce, retain: true)
        try await client.waitForMessage(topic: "lbs/device/pw_site", timeout: .seconds(5)) { ($0.json?[Self.key] as? Double) == brokerValue }

        let mark = client.received.count
        let second = try await GatewayHarness.start(broker: broker, directory: rig.directory, vendors: vendors, storage: true)
        defer { Task { await second.stop() } }
        // The restored state goes out once the broker's copy was read (the vendor is down: it stays stale).
        try await waitUntil("the restored state published", timeout: .seconds(10)) { !Self.readings(client, after: mark).isEmpty }
        try await quietPeriod( .seconds(1))
        let seen = Self.readings(client, after: mark)
        #expect(seen.allSatisfy { $0 >= brokerValue }, "published \(seen) after the broker held \(brokerValue) (cache: \(cached))")
        let retained = try await TestMQTTClient.retainedSnapshot(url: broker.url, filter: "lbs/device/pw_site")
        #expect(retained["lbs/device/pw_site"]?.json?[Self.key] as? Double == brokerValue)

        // The Powerwall is back and re-reads its meter a little below the broker's value: held, not published lower.
        let powerwall = try await rig.restarted()
        defer { Task { await powerwall.stop() } }
        let back = client.received.count
        var reread: MQTTMessage?
        try await waitUntil("a fresh reading", timeout: .seconds(15)) {
            reread = client.received.dropFirst(back).first { $0.topic == "lbs/device/pw_site" && $0.json?["stale"] == nil }
            return reread != nil
        }
        #expect(reread?.json?[Self.key] as? Double == brokerValue)
        #expect(Self.readings(client, after: mark).allSatisfy { $0 >= brokerValue })
        await client.shutdown()
    }

    /// When the broker holds a lower value than the cache (the broker's store is older), the cache's wins.
    @Test func aBrokerValueBelowTheCacheChangesNothing() async throws {
        let (rig, broker, vendors, client, fresh) = try await Self.cachedThenDown()
        let cached = try #require(fresh.json?[Self.key] as? Double)
        var older = try #require(fresh.json)
        older[Self.key] = cached - 3
        let payload = try JSONSerialization.data(withJSONObject: older, options: [.sortedKeys])
        try await client.publish("lbs/device/pw_site", Array(payload), qos: .atLeastOnce, retain: true)

        let mark = client.received.count
        let second = try await GatewayHarness.start(broker: broker, directory: rig.directory, vendors: vendors, storage: true)
        defer { Task { await second.stop() } }
        try await waitUntil("the restored state published", timeout: .seconds(10)) {
            Self.readings(client, after: mark).contains(cached)
        }
        #expect(Self.readings(client, after: mark).allSatisfy { $0 >= cached - 3 })
        await client.shutdown()
    }
}
