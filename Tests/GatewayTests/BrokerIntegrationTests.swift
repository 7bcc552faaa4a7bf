import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayTesting
import MQTT
import TestTraits
import Testing

/// The gateway against a real mosquitto on a free loopback port: the topic contract end to end.
@Suite(.integration, .timeLimit(.minutes(2))) struct BrokerIntegrationTests {
    @Test func startPublishesRetainedOnlineStateDevicesAndDiscovery() async throws {
        let gateway = try await GatewayHarness.start()
        defer { Task { await gateway.stop() } }
        let watcher = try await gateway.observer("lbs/bridge/state")
        try await watcher.waitForMessage(topic: "lbs/bridge/state") { $0.text == #"{"state":"online"}"# }
        // The home views are coalesced (200 ms after the readings that feed them): wait for them, not for a fixed time.
        var retained = try await TestMQTTClient.retainedSnapshot(url: gateway.broker.url, filter: "#")
        try? await waitUntil("the home views carry the first readings", timeout: .seconds(5)) {
            retained = try await TestMQTTClient.retainedSnapshot(url: gateway.broker.url, filter: "#")
            return retained["lbs/environment/living_room"]?.json?["co2"] != nil && retained["lbs/energy/home"]?.json?["solar_power"] != nil
        }
        #expect(retained["lbs/bridge/state"]?.text == #"{"state":"online"}"#)
        #expect(retained["lbs/bridge/info"] != nil && retained["lbs/bridge/devices"] != nil)
        for id in ["demo_light", "demo_thermostat", "demo_lock", "demo_plug", "demo_energy", "demo_air"] {
            #expect(retained["lbs/device/\(id)"]?.json?["last_seen"] != nil, "state of \(id)")
            #expect(retained["lbs/device/\(id)/availability"]?.text == #"{"state":"online"}"#)
            let discovery = try #require(retained["homeassistant/device/lbs_\(id)/config"]?.json, "discovery of \(id)")
            #expect(discovery["components"] != nil && discovery["origin"] != nil)
        }
        #expect(retained["lbs/device/demo_lock"]?.json?["lock"] as? String == "LOCKED")
        #expect(retained["lbs/energy/home"]?.json?["solar_power"] != nil)
        #expect(retained["lbs/environment/living_room"]?.json?["co2"] != nil)
        #expect(retained["homeassistant/device/lbs_bridge/config"] != nil)
        await watcher.shutdown()
    }

    /// Latency is a benchmark number (`lbs-bench gateway`: /set → state p99), not a timed test.
    @Test func setChangesStateAndBareKeyTopicsWork() async throws {
        let gateway = try await GatewayHarness.start()
        defer { Task { await gateway.stop() } }
        let client = try await gateway.observer("lbs/device/demo_light", "lbs/device/demo_lock")
        try await client.waitForMessage(topic: "lbs/device/demo_light")
        try await client.publish("lbs/device/demo_light/set", #"{"state":"ON","brightness":40}"#, qos: .atMostOnce)
        let updated = try await client.waitForMessage(topic: "lbs/device/demo_light") { $0.json?["brightness"] as? Double == 40 }
        #expect(updated.json?["state"] as? String == "ON")

        try await client.publish("lbs/device/demo_light/set/brightness", "55", qos: .atMostOnce)
        try await client.waitForMessage(topic: "lbs/device/demo_light") { $0.json?["brightness"] as? Double == 55 }
        try await client.publish("lbs/device/demo_lock/set/lock", "UNLOCK", qos: .atMostOnce)
        try await client.waitForMessage(topic: "lbs/device/demo_lock") { $0.json?["lock"] as? String == "UNLOCKED" }
        try await client.publish("lbs/device/demo_light/set", "TOGGLE", qos: .atMostOnce)
        try await client.waitForMessage(topic: "lbs/device/demo_light") { $0.json?["state"] as? String == "OFF" }
        await client.shutdown()
    }

    @Test func aRetainedUnlockWaitingOnTheBrokerNeverRuns() async throws {
        let broker = try await MosquittoBroker.started()
        let attacker = try await TestMQTTClient.connect(to: broker.url)
        try await attacker.publish("lbs/device/demo_lock/set", "UNLOCK", qos: .atLeastOnce, retain: true)
        try await attacker.publish("lbs/device/demo_lock/set/lock", "UNLOCK", qos: .atLeastOnce, retain: true)
        try await attacker.subscribe("lbs/bridge/event")
        try await attacker.subscribe("lbs/device/demo_lock")
        let gateway = try await GatewayHarness.start(broker: broker)
        defer { Task { await gateway.stop() } }
        let event = try await attacker.waitForMessage(topic: "lbs/bridge/event") { $0.text.contains("retained_command") }
        #expect(event.json?["type"] as? String == "command_failed")
        try await attacker.waitForMessage(topic: "lbs/device/demo_lock")
        try await quietPeriod( .milliseconds(300))
        #expect(attacker.messages(on: "lbs/device/demo_lock").allSatisfy { $0.json?["lock"] as? String == "LOCKED" })
        #expect(attacker.messages(on: "lbs/bridge/event").filter { $0.text.contains("retained_command") }.count == 2)
        await attacker.shutdown()
    }

    @Test func everyKindOfBadPayloadGetsCommandFailedAndAnErrorResponse() async throws {
        let gateway = try await GatewayHarness.start()
        defer { Task { await gateway.stop() } }
        let client = try await gateway.observer("lbs/bridge/event", "replies/#")
        let cases: [(String, [UInt8], String)] = [
            ("lbs/device/demo_light/set", Array("{\"state\":".utf8), "invalid_json"),
            ("lbs/device/demo_light/set", [0xC3, 0x28, 0xFF], "invalid_utf8"),
            ("lbs/device/demo_light/set", Array("[1,2]".utf8), "invalid_payload"),
            ("lbs/device/demo_light/set", Array("{\"brightness\":\"high\"}".utf8), "invalid_payload"),
            ("lbs/device/ghost/set", Array("ON".utf8), "unknown_device"),
            ("lbs/device/demo_light/set", Array("{\"hue\":1}".utf8), "unknown_key"),
            ("lbs/device/demo_lock/set", Array("{\"battery\":5}".utf8), "read_only_key"),
            ("lbs/device/demo_light/set/brightness", Array("101".utf8), "out_of_range"),
            ("lbs/device/demo_light/set", Array(repeating: 0x20, count: 70_000), "payload_too_large"),
            ("lbs/bridge/request/nonsense", Array("{}".utf8), "unknown_request"),
        ]
        for (index, (topic, payload, code)) in cases.enumerated() {
            try await client.publish(topic, payload, qos: .atLeastOnce,
                                     responseTopic: "replies/\(index)", correlationData: [UInt8(index)])
            let event = try await client.waitForMessage(topic: "lbs/bridge/event") { $0.text.contains("\"\(code)\"") }
            #expect(event.json?["type"] as? String == "command_failed")
            let reply = try await client.waitForMessage(topic: "replies/\(index)")
            #expect(reply.text.contains(#""status":"error""#) && reply.text.contains(code), "reply for \(code): \(reply.text)")
            #expect(reply.correlationData == [UInt8(index)])
        }
        // The gateway is still fine after all of that.
        try await client.subscribe("lbs/device/demo_light")
        try await client.publish("lbs/device/demo_light/set", "ON", qos: .atMostOnce)
        try await client.waitForMessage(topic: "lbs/device/demo_light") { $0.json?["state"] as? String == "ON" }
        await client.shutdown()
    }

    @Test func v5ResponseTopicGetsOkWithCorrelationData() async throws {
        let gateway = try await GatewayHarness.start()
        defer { Task { await gateway.stop() } }
        let client = try await gateway.observer("replies/my")
        try await client.publish("lbs/device/demo_plug/set", #"{"state":"OFF"}"#, qos: .atLeastOnce,
                                 responseTopic: "replies/my", correlationData: Array("req-42".utf8))
        let reply = try await client.waitForMessage(topic: "replies/my")
        #expect(reply.json?["status"] as? String == "ok")
        #expect(reply.correlationData == Array("req-42".utf8))
        await client.shutdown()
    }

    @Test func bridgeRequestsAnswerWithTransaction() async throws {
        let gateway = try await GatewayHarness.start()
        defer { Task { await gateway.stop() } }
        let client = try await gateway.observer("lbs/bridge/response/#")
        try await client.publish("lbs/bridge/request/devices", #"{"transaction":"x9"}"#, qos: .atLeastOnce)
        let devices = try await client.waitForMessage(topic: "lbs/bridge/response/devices")
        #expect(devices.json?["transaction"] as? String == "x9")
        #expect((devices.json?["data"] as? [[String: Any]])?.count == 6)
        try await client.publish("lbs/bridge/request/device/refresh", "demo_air", qos: .atLeastOnce)
        let refresh = try await client.waitForMessage(topic: "lbs/bridge/response/device/refresh")
        #expect(refresh.json?["status"] as? String == "ok")
        await client.shutdown()
    }

    @Test func brokerRestartBringsEverythingBackWithin5Seconds() async throws {
        // No persistence: a restarted broker has lost every retained message.
        let gateway = try await GatewayHarness.start()
        defer { Task { await gateway.stop() } }
        let first = try await gateway.observer("lbs/bridge/state")
        try await first.waitForMessage(topic: "lbs/bridge/state") { $0.text.contains("online") }
        await first.shutdown()
        await gateway.broker.kill()
        try await hold(for: .milliseconds(700))
        try await gateway.broker.restart()
        let back = ContinuousClock.now
        var retained: [String: MQTTMessage] = [:]
        try await waitUntil("retained topics back", timeout: .seconds(5)) {
            retained = (try? await TestMQTTClient.retainedSnapshot(url: gateway.broker.url, filter: "#")) ?? [:]
            return retained["lbs/bridge/state"]?.text.contains("online") == true
                && retained["lbs/device/demo_light"] != nil && retained["homeassistant/device/lbs_demo_light/config"] != nil
                && retained["lbs/device/demo_air/availability"] != nil && retained["lbs/bridge/devices"] != nil
        }
        #expect(ContinuousClock.now - back < .seconds(5))
        // And it takes commands again.
        let client = try await gateway.observer("lbs/device/demo_plug")
        try await client.publish("lbs/device/demo_plug/set", "OFF", qos: .atMostOnce)
        try await client.waitForMessage(topic: "lbs/device/demo_plug") { $0.json?["state"] as? String == "OFF" }
        await client.shutdown()
    }

    @Test func homeAssistantBirthRepublishesAvailabilityAndStates() async throws {
        let gateway = try await GatewayHarness.start()
        defer { Task { await gateway.stop() } }
        let client = try await gateway.observer("lbs/bridge/state")
        try await client.waitForMessage(topic: "lbs/bridge/state")
        try await client.subscribe("lbs/device/demo_air")
        try await client.subscribe("lbs/device/demo_air/availability")
        let before = client.received.count
        try await client.publish("homeassistant/status", "online", qos: .atMostOnce)
        try await waitUntil("states re-published", timeout: .seconds(3)) {
            client.received.dropFirst(before).contains { $0.topic == "lbs/device/demo_air" && !$0.retain }
                && client.received.dropFirst(before).contains { $0.topic == "lbs/device/demo_air/availability" && !$0.retain }
        }
        await client.shutdown()
    }

    @Test func mqtt311IsSupported() async throws {
        let gateway = try await GatewayHarness.start(mqtt: "version: \"3.1.1\"")
        defer { Task { await gateway.stop() } }
        #expect(gateway.config.mqtt.version == .v311)
        // A QoS 0 /set sent before the gateway subscribed would be gone: wait until it announced itself online.
        await gateway.waitUntilOnline()
        let client = try await TestMQTTClient.connect(to: gateway.broker.url, protocolVersion: .v311)
        try await client.subscribe("lbs/device/demo_light")
        try await client.publish("lbs/device/demo_light/set", #"{"state":"ON"}"#, qos: .atMostOnce)
        try await client.waitForMessage(topic: "lbs/device/demo_light") { $0.json?["state"] as? String == "ON" }
        await client.shutdown()
    }

    @Test func cleanShutdownPublishesOffline() async throws {
        let gateway = try await GatewayHarness.start()
        let client = try await gateway.observer("lbs/bridge/state")
        try await client.waitForMessage(topic: "lbs/bridge/state") { $0.text.contains("online") }
        await gateway.stop()
        try await client.waitForMessage(topic: "lbs/bridge/state") { $0.text.contains("offline") }
        await client.shutdown()
    }
}
