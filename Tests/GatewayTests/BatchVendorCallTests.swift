import Cache
import ConsciousnessSimulator
import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayTesting
import MQTT
import TestTraits
import Testing

/// The `batch` bridge request sends one vendor's items in one vendor call (the backend's
/// `batch-control`) while every item is still stored in the outbox and ordered per device.
@Suite(.integration, .timeLimit(.minutes(2))) struct BatchVendorCallTests {
    @Test func oneBatchControlCallCarriesTheVendorsItems() async throws {
        let simulator = try await ResilienceIntegrationTests.simulator()
        let directory = try ResilienceIntegrationTests.directory()
        let gateway = try await GatewayHarness.start(
            directory: directory, vendors: await ResilienceIntegrationTests.vendorYAML(simulator, pollInterval: 30), storage: true)
        defer { Task { await gateway.stop(); await simulator.stop() } }
        let client = try await gateway.observer("lbs/#")
        let kitchen = "consciousness_lights-kitchen", speaker = "consciousness_speaker-living-room"
        try await client.waitForMessage(topic: "lbs/device/\(kitchen)", timeout: .seconds(10))
        try await client.waitForMessage(topic: "lbs/device/\(speaker)", timeout: .seconds(10))

        let request = """
        {"transaction":"bc1","commands":[
          {"device":"\(kitchen)","set":{"state":"OFF"}},
          {"device":"\(speaker)","set":{"state":"ON"}},
          {"device":"consciousness_lock-front-door","set":{"lock":"UNLOCK"}},
          {"device":"\(kitchen)","set":{"state":"ON"}},
          {"device":"demo_nothing","set":{"state":"ON"}}]}
        """
        try await client.publish("lbs/bridge/request/batch", request, qos: .atLeastOnce)
        let response = try await client.waitForMessage(topic: "lbs/bridge/response/batch", timeout: .seconds(10)) { $0.text.contains("bc1") }
        let results = try #require((response.json?["data"] as? [String: Any])?["results"] as? [[String: Any]])
        #expect(results.map { $0["status"] as? String } == ["ok", "ok", "error", "ok", "error"])
        #expect(((results[4]["error"] as? [String: Any])?["code"] as? String) == "unknown_device")
        // The backend cannot unlock: its lock is read-only (writableKeys), so the item is refused before the outbox.
        #expect(((results[2]["error"] as? [String: Any])?["code"] as? String) == "read_only_key")

        let counters = simulator.counters
        // The first item per device went out together; the kitchen's second command followed on its own.
        #expect(counters.requestsByRoute["POST /api/v1/devices/batch-control"] == 1)
        #expect(counters.requestsByRoute["PUT /api/v1/devices/lights-kitchen/control"] == 1)
        #expect(counters.controlCalls(deviceID: "lights-kitchen", action: "turn_off") == 1)
        #expect(counters.controlCalls(deviceID: "lights-kitchen", action: "turn_on") == 1)
        #expect(counters.controlCalls(deviceID: "speaker-living-room", action: "turn_on") == 1)
        try await client.waitForMessage(topic: "lbs/device/\(kitchen)") { $0.json?["state"] as? String == "ON" }

        // Every accepted item went through the outbox and is settled there.
        let store = try CacheStore(path: directory.file("gateway.sqlite"))
        defer { try? store.close() }
        // The outbox journal hands rows to the database in a shared commit ~50 ms behind the replies.
        try await waitUntil("the outbox settles") {
            let counts = try store.outboxCounts()
            return counts[.pending] == 0 && counts[.sending] == 0 && counts[.acked, default: 0] >= 3
        }
        let counts = try store.outboxCounts()
        #expect(counts[.acked] == 3)
        #expect(counts[.failed] == nil || counts[.failed] == 0)
        await client.shutdown()
    }

    @Test func batchItemsWaitForARecoveringVendorAndRunOnce() async throws {
        let simulator = try await ResilienceIntegrationTests.simulator()
        let directory = try ResilienceIntegrationTests.directory()
        let gateway = try await GatewayHarness.start(
            directory: directory, vendors: await ResilienceIntegrationTests.vendorYAML(simulator), storage: true)
        defer { Task { await gateway.stop(); await simulator.stop() } }
        let client = try await gateway.observer("lbs/#")
        let kitchen = "consciousness_lights-kitchen", speaker = "consciousness_speaker-living-room"
        try await client.waitForMessage(topic: "lbs/device/\(speaker)", timeout: .seconds(10))

        await simulator.stop()
        try await client.waitForMessage(topic: "lbs/bridge/vendors/consciousness", timeout: .seconds(15)) { $0.json?["state"] as? String == "down" }
        let request = """
        {"transaction":"bc2","commands":[{"device":"\(kitchen)","set":{"state":"OFF"}},{"device":"\(speaker)","set":{"state":"ON"}}]}
        """
        try await client.publish("lbs/bridge/request/batch", request, qos: .atLeastOnce)
        // Both wait in the outbox while the backend is away.
        let store = try CacheStore(path: directory.file("gateway.sqlite"))
        defer { try? store.close() }
        try await waitUntil("both items are stored") { (try store.pending().count) == 2 }
        #expect(client.messages(on: "lbs/bridge/response/batch").isEmpty)

        _ = try await simulator.start()
        let response = try await client.waitForMessage(topic: "lbs/bridge/response/batch", timeout: .seconds(20)) { $0.text.contains("bc2") }
        let results = try #require((response.json?["data"] as? [String: Any])?["results"] as? [[String: Any]])
        #expect(results.map { $0["status"] as? String } == ["ok", "ok"])
        let counters = simulator.counters
        #expect(counters.controlCalls(deviceID: "lights-kitchen", action: "turn_off") == 1)
        #expect(counters.controlCalls(deviceID: "speaker-living-room", action: "turn_on") == 1)
        await client.shutdown()
    }

    @Test func aDevicesQueueIsBoundedAndOverflowIsReported() async throws {
        let simulator = try await ResilienceIntegrationTests.simulator()
        let directory = try ResilienceIntegrationTests.directory()
        let gateway = try await GatewayHarness.start(directory: directory, vendors: await ResilienceIntegrationTests.vendorYAML(simulator))
        defer { Task { await gateway.stop(); await simulator.stop() } }
        let client = try await gateway.observer("lbs/bridge/event", "lbs/bridge/vendors/#", "lbs/device/+")
        let kitchen = "consciousness_lights-kitchen"
        try await client.waitForMessage(topic: "lbs/device/\(kitchen)", timeout: .seconds(10))
        await simulator.stop()
        try await client.waitForMessage(topic: "lbs/bridge/vendors/consciousness", timeout: .seconds(15)) { $0.json?["state"] as? String == "down" }

        // Single /set commands for one key supersede each other as they reach the front, which keeps a queue
        // short by itself; items of one batch request never do, so a batch fills the queue to its bound.
        let capacity = CommandSettings().maxQueuedPerDevice
        let items = (0..<(capacity + 10)).map { index in
            #"{"device":"\#(kitchen)","set":{"state":"\#(index.isMultiple(of: 2) ? "ON" : "OFF")"}}"#
        }
        try await client.subscribe("lbs/bridge/response/batch")
        try await client.publish("lbs/bridge/request/batch", #"{"transaction":"q1","commands":[\#(items.joined(separator: ","))]}"#, qos: .atLeastOnce)
        try await waitUntil("overflow is reported", timeout: .seconds(10)) {
            client.messages(on: "lbs/bridge/event").filter { $0.text.contains("queue_full") }.count >= 10
        }
        try await quietPeriod( .milliseconds(200))
        let refused = client.messages(on: "lbs/bridge/event").filter { $0.text.contains("queue_full") }.count
        #expect(refused == 10, "\(refused) commands refused")
        await client.shutdown()
    }
}
