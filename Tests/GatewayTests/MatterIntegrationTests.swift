import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayTesting
import MQTT
import TestTraits
import Testing
import VendorSimulators

/// `type: matter` end to end: a real broker, the gateway's services and the Matter server simulator serving the
/// recorded node dumps. `mosquitto_pub` → Matter command → the node's attribute report → MQTT state.
@Suite(.integration, .timeLimit(.minutes(2))) struct MatterIntegrationTests {
    func start() async throws -> (MatterSimulator, GatewayHarness) {
        let folder = Fixtures.path("matter", "nodes")
        let dumps = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".json") }.sorted()
            .map { try Data(contentsOf: URL(fileURLWithPath: folder + "/" + $0)) }
        let simulator = try MatterSimulator(nodes: dumps)
        try await simulator.start()
        let directory = try TemporaryDirectory()
        let vendors = """
              - {type: matter, id: matter, url: "\(await simulator.url)"}
            """
        let gateway = try await GatewayHarness.start(directory: directory, vendors: vendors, storage: true)
        return (simulator, gateway)
    }

    @Test func aLockIsUnlockedFromMQTTAndItsStateComesFromTheNode() async throws {
        let (simulator, gateway) = try await start()
        defer { Task { await gateway.stop(); await simulator.stop() } }
        let client = try await gateway.observer("lbs/device/#", "lbs/bridge/vendors/matter", "homeassistant/device/#", "replies/#")
        let lock = try await client.waitForMessage(topic: "lbs/device/matter_20", timeout: .seconds(15))
        #expect(lock.json?["lock"] as? String == "LOCKED" && lock.json?["battery"] as? Double == 40)
        let discovery = try await client.waitForMessage(topic: "homeassistant/device/lbs_matter_20/config", timeout: .seconds(10)) { ($0.json?["components"] as? [String: Any])?["stale"] != nil }
        let components = try #require(discovery.json?["components"] as? [String: [String: Any]])
        #expect(components["lock"]?["platform"] as? String == "lock")
        let bridged = try await client.waitForMessage(topic: "homeassistant/device/lbs_matter_1_42/config", timeout: .seconds(10))
        #expect((bridged.json?["device"] as? [String: Any])?["via_device"] as? String == "lbs_matter_1")
        let contact = try await client.waitForMessage(topic: "homeassistant/device/lbs_matter_9/config", timeout: .seconds(10)) { ($0.json?["components"] as? [String: Any])?["stale"] != nil }
        let contactComponents = try #require(contact.json?["components"] as? [String: [String: Any]])
        #expect(contactComponents["contact"]?["device_class"] as? String == "door")

        try await client.publish("lbs/device/matter_20/set/lock", "UNLOCK", qos: .atLeastOnce, responseTopic: "replies/unlock")
        let reply = try await client.waitForMessage(topic: "replies/unlock", timeout: .seconds(10))
        #expect(reply.json?["status"] as? String == "ok", "\(reply.text)")
        let unlocked = try await client.waitForMessage(topic: "lbs/device/matter_20", timeout: .seconds(10)) { $0.json?["lock"] as? String == "UNLOCKED" }
        #expect(unlocked.json?["battery"] as? Double == 40)
        #expect(simulator.commands.contains("device_command 20/1/257 UnlockDoor"))
        // Home Assistant's JSON light sends colour as h/s; the node's report comes back as the `color` object.
        let colorLight = try await client.waitForMessage(topic: "homeassistant/device/lbs_matter_10/config", timeout: .seconds(10)) { ($0.json?["components"] as? [String: Any])?["stale"] != nil }
        let light = try #require((colorLight.json?["components"] as? [String: [String: Any]])?["light"])
        #expect(light["supported_color_modes"] as? [String] == ["color_temp", "hs"])
        try await client.publish("lbs/device/matter_10/set", #"{"state":"ON","color":{"h":120,"s":100}}"#, qos: .atLeastOnce, responseTopic: "replies/color")
        // Hue and saturation are two attribute reports: the state follows each; the second completes it.
        let colored = try await client.waitForMessage(topic: "lbs/device/matter_10", timeout: .seconds(10)) {
            ($0.json?["color"] as? [String: Any])?["hue"] as? Double == 120 && ($0.json?["color"] as? [String: Any])?["saturation"] as? Double == 100
        }
        #expect((colored.json?["color"] as? [String: Any])?["s"] as? Double == 100 && colored.json?["color_mode"] as? String == "hs", "\(colored.text)")
        try await client.publish("lbs/device/matter_10/set", #"{"color":{"hue":400,"saturation":10}}"#, qos: .atLeastOnce, responseTopic: "replies/badcolor")
        let refused = try await client.waitForMessage(topic: "replies/badcolor", timeout: .seconds(10))
        #expect(refused.text.contains("invalid_value") || refused.text.contains("invalid_payload"), "\(refused.text)")
        // The bridged plug behind the FRITZ!Box is unreachable: its availability says so.
        _ = try await client.waitForMessage(topic: "lbs/device/matter_1_42/availability", timeout: .seconds(10)) { $0.json?["state"] as? String == "offline" }
        #expect(client.messages(on: "lbs/device/matter_1_42/availability").last?.json?["state"] as? String == "offline")
        #expect(client.messages(on: "lbs/device/matter_20/availability").last?.json?["state"] as? String == "online")
    }

    /// The recorded EVSE and water heater end to end: the charger is a device with its state on MQTT and is
    /// switched off from MQTT (Energy EVSE's Disable; its SupplyState comes back); the water heater's 50 °C tank
    /// raises no room temperature alert (no alert topic at all: environment limits are for environment sensors),
    /// while the weather sensor next to it keeps its rules.
    @Test func anEVSEIsSwitchedFromMQTTAndAWaterHeaterRaisesNoRoomAlert() async throws {
        let (simulator, gateway) = try await start()
        defer { Task { await gateway.stop(); await simulator.stop() } }
        let client = try await gateway.observer("lbs/device/#", "lbs/alert/#", "replies/#")
        let charger = try await client.waitForMessage(topic: "lbs/device/matter_23", timeout: .seconds(15))
        #expect(charger.json?["state"] as? String == "ON" && charger.json?["charging_state"] as? String == "charging", "\(charger.text)")
        let heater = try await client.waitForMessage(topic: "lbs/device/matter_57", timeout: .seconds(10))
        #expect(heater.json?["temperature"] as? Double == 50, "\(heater.text)")
        _ = try await client.waitForMessage(topic: "lbs/alert/temperature_high_matter_29", timeout: .seconds(10))

        try await client.publish("lbs/device/matter_23/set", #"{"state":"OFF"}"#, qos: .atLeastOnce, responseTopic: "replies/evse")
        let reply = try await client.waitForMessage(topic: "replies/evse", timeout: .seconds(10))
        #expect(reply.json?["status"] as? String == "ok", "\(reply.text)")
        let off = try await client.waitForMessage(topic: "lbs/device/matter_23", timeout: .seconds(10)) { $0.json?["state"] as? String == "OFF" }
        #expect(off.json?["supply_state"] as? String == "disabled")
        #expect(simulator.commands.contains("device_command 23/1/153 Disable"))
        // Everything the gateway published before the reply has arrived: the heater has no alert topic.
        #expect(client.messages(on: "lbs/alert/temperature_high_matter_57").isEmpty)
        #expect(client.messages(on: "lbs/alert/temperature_low_matter_57").isEmpty)
    }
}
