import Cache
import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayModel
import GatewayTesting
import Logging
import MQTT
import TestTraits
import Testing
import VendorDemo
import VendorKit

/// The gateway device, the home views as Home Assistant devices and `<base>/bridge/health`, through the
/// controller and through a real broker.
@Suite(.integration, .timeLimit(.minutes(2))) struct HomeAssistantBridgeTests {
    func parse(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    func components(_ published: RecordingTransport.Published?) throws -> [String: [String: Any]] {
        let payload = try #require(published?.payload)
        return try #require(try parse(payload)["components"] as? [String: [String: Any]])
    }

    @Test func theGatewayDeviceHasRestartLogLevelVersionCommandCountersAndVendorHealth() async throws {
        let h = await ControllerTests.Harness()
        let config = try #require(h.transport.last("homeassistant/device/lbs_bridge/config"))
        #expect(config.retain && config.qos == 1)
        let all = try components(config)
        let restart = try #require(all["restart"])
        #expect(restart["platform"] as? String == "button")
        #expect(restart["command_topic"] as? String == "lbs/bridge/request/restart")
        #expect(restart["device_class"] as? String == "restart")
        let level = try #require(all["log_level"])
        #expect(level["platform"] as? String == "select")
        #expect(level["command_topic"] as? String == "lbs/bridge/request/options")
        #expect((level["command_template"] as? String)?.contains(#""log_level""#) == true)
        #expect(level["state_topic"] as? String == "lbs/bridge/info")
        #expect((level["options"] as? [String])?.contains("debug") == true)
        #expect(all["version"]?["state_topic"] as? String == "lbs/bridge/info")
        #expect(all["version"]?["value_template"] as? String == "{{ value_json.version }}")
        for key in ["commands_executed", "commands_failed"] {
            #expect(all[key]?["state_topic"] as? String == "lbs/bridge/health", "\(key)")
            #expect(all[key]?["entity_category"] as? String == "diagnostic")
        }
        let vendor = try #require(all["vendor_demo"])
        #expect(vendor["state_topic"] as? String == "lbs/bridge/vendors/demo")
        #expect(vendor["json_attributes_topic"] as? String == "lbs/bridge/vendors/demo")
        #expect(vendor["options"] as? [String] == ["starting", "ok", "degraded", "down"], "every state bridge/vendors/<id> can carry")
        #expect(all["connection_state"]?["state_topic"] as? String == "lbs/bridge/state")
        // bridge/info carries what the log-level select shows.
        #expect(h.transport.json("lbs/bridge/info")?["log_level"] as? String == "info")
    }

    @Test func energyHomeAndEachRoomAreDevicesAndAVanishedRoomIsCleared() async throws {
        let h = await ControllerTests.Harness()
        let t = h.transport
        let energyTopic = "homeassistant/device/lbs_energy_home/config"
        let roomTopic = "homeassistant/device/lbs_environment_living_room/config"
        let energy = try components(await t.wait(for: energyTopic) { !$0.payload.isEmpty })
        let solarEnergy = try #require(energy["solar_energy"])
        #expect(solarEnergy["device_class"] as? String == "energy")
        #expect(solarEnergy["state_class"] as? String == "total_increasing")
        #expect(solarEnergy["unit_of_measurement"] as? String == "kWh")
        #expect(solarEnergy["default_entity_id"] as? String == "sensor.energy_home_solar_energy")
        #expect(energy["grid_import_energy"]?["state_class"] as? String == "total_increasing")
        #expect(energy["grid_power"]?["state_class"] as? String == "measurement")
        #expect(energy["grid_power"]?["device_class"] as? String == "power")
        #expect(energy["battery_level"]?["unit_of_measurement"] as? String == "%")
        let energyPayload = try parse(try #require(t.last(energyTopic)).payload)
        #expect(energyPayload["state_topic"] as? String == "lbs/energy/home")

        let room = try components(await t.wait(for: roomTopic) { !$0.payload.isEmpty })
        #expect(room["temperature"]?["device_class"] as? String == "temperature")
        #expect(room["temperature"]?["suggested_display_precision"] as? Int == 1)
        #expect(room["co2"]?["unit_of_measurement"] as? String == "ppm")
        let roomPayload = try parse(try #require(t.last(roomTopic)).payload)
        #expect(roomPayload["state_topic"] as? String == "lbs/environment/living_room")
        #expect((roomPayload["device"] as? [String: Any])?["suggested_area"] as? String == "Living Room")

        // Every Living Room device goes away: the room's Home Assistant device is cleared, no ghost.
        let remaining = h.vendor.devices.filter { $0.room != "Living Room" }
        await h.controller.handle(.inventory(vendorID: "demo", devices: remaining))
        let cleared = await t.wait(for: roomTopic) { $0.payload.isEmpty }
        #expect(cleared?.retain == true)
        #expect(t.last(energyTopic)?.payload.isEmpty == false)
    }

    @Test func bridgeHealthIsRetainedAndFollowsTheCommandCounters() async throws {
        let gateway = try await GatewayHarness.start()
        let watcher = try await gateway.observer("lbs/bridge/health", "lbs/device/demo_light")
        let first = try await watcher.waitForMessage(topic: "lbs/bridge/health", timeout: .seconds(10))
        let commands = try #require(first.json?["commands"] as? [String: Any])
        #expect(commands["executed"] as? Int == 0)
        try await watcher.waitForMessage(topic: "lbs/device/demo_light", timeout: .seconds(10))
        try await watcher.publish("lbs/device/demo_light/set", #"{"state":"ON"}"#)
        try await watcher.waitForMessage(topic: "lbs/bridge/health", timeout: .seconds(10)) { message in
            ((message.json?["commands"] as? [String: Any])?["executed"] as? Int ?? 0) >= 1
        }
        // Retained: a client connecting later gets the latest counters at once.
        let retained = try await TestMQTTClient.retainedSnapshot(url: gateway.broker.url, filter: "lbs/bridge/health")
        let stored = try #require(retained["lbs/bridge/health"]?.json?["commands"] as? [String: Any])
        #expect(stored["executed"] as? Int == 1)
        await watcher.shutdown()
        await gateway.stop()
    }
}

/// Demo side: with `storage:`, the demo's counters and battery level continue from the cache.
@Suite(.integration, .timeLimit(.minutes(2))) struct DemoRestoreIntegrationTests {
    static let keys = ["solar_energy", "grid_import_energy", "grid_export_energy", "battery_charge_energy", "battery_discharge_energy",
                       "home_energy", "battery_level"]

    @Test func aRestartedDemoContinuesItsCountersFromTheCache() async throws {
        let broker = try await MosquittoBroker.started()
        let directory = try TemporaryDirectory()
        let first = try await GatewayHarness.start(broker: broker, directory: directory, storage: true)
        let watcher = try await first.observer("lbs/device/demo_energy")
        let before = try await watcher.waitForMessage(topic: "lbs/device/demo_energy", timeout: .seconds(10)) { $0.json?["solar_energy"] != nil }
        await first.stop()
        await watcher.shutdown()
        // Counters of a house that ran for a while (far above what the demo starts from by itself),
        // written into the cache as the previous run would have left them.
        let database = directory.file("gateway.sqlite")
        let store = try CacheStore(path: database)
        var stored = try #require(try store.states().first { $0.deviceID == "demo_energy" })
        var values = try #require(try JSONSerialization.jsonObject(with: Data(stored.json.utf8)) as? [String: Any])
        for key in Self.keys where key != "battery_level" { values[key] = ((values[key] as? Double) ?? 0) + 1000 }
        values["battery_level"] = 42.5
        stored.json = String(decoding: try JSONSerialization.data(withJSONObject: values), as: UTF8.self)
        try store.saveStates([stored])
        try store.close()

        // Subscribed before the restart: the broker's retained copy from the first run arrives flagged retained and is skipped.
        let again = try await TestMQTTClient.connect(to: broker.url)
        try await again.subscribe("lbs/device/demo_energy")
        let second = try await GatewayHarness.start(broker: broker, directory: directory, storage: true)
        // The first fresh (not stale) state of the restarted demo.
        let after = try await again.waitForMessage(topic: "lbs/device/demo_energy", timeout: .seconds(10)) { message in
            !message.retain && message.json?["solar_energy"] != nil && message.json?["stale"] == nil
        }
        for key in Self.keys {
            let old = try #require(before.json?[key] as? Double), new = try #require(after.json?[key] as? Double)
            let cached = key == "battery_level" ? 42.5 : old + 1000
            #expect(abs(new - cached) < 0.000_001, "\(key): \(cached) in the cache, \(new) after the restart")
        }
        await again.shutdown()
        await second.stop()
    }
}

/// A room announced by an earlier run whose devices are gone at start-up (their vendor left the config)
/// is cleared from Home Assistant, not left as a ghost device.
@Suite(.integration, .timeLimit(.minutes(2))) struct HomeViewGhostTests {
    @Test func aRoomWhoseDevicesLeftWhileTheGatewayWasDownIsCleared() async throws {
        let broker = try await MosquittoBroker.started()
        let directory = try TemporaryDirectory()
        let topic = "homeassistant/device/lbs_environment_living_room/config"
        let first = try await GatewayHarness.start(broker: broker, directory: directory, storage: true)
        let watcher = try await first.observer(topic)
        try await watcher.waitForMessage(topic: topic, timeout: .seconds(10)) { !$0.payload.isEmpty }
        await first.stop()

        try "pw\n".write(toFile: directory.file("house-password"), atomically: true, encoding: .utf8)
        let vendors = "  - {type: consciousness, id: house, url: \"http://127.0.0.1:9\", username: u, password_file: house-password, poll_interval: 3600}"
        // Only a clear sent by the second run counts (the first run may clear the room before its first readings).
        let seenBefore = watcher.messages(on: topic).count
        let second = try await GatewayHarness.start(broker: broker, directory: directory, vendors: vendors, storage: true)
        try await waitUntil("the second run clears the room", timeout: .seconds(10)) {
            watcher.messages(on: topic).dropFirst(seenBefore).contains { $0.payload.isEmpty }
        }
        let retained = try await TestMQTTClient.retainedSnapshot(url: broker.url, filter: "homeassistant/device/#")
        #expect(retained[topic] == nil, "the room is still announced: \(watcher.messages(on: topic).map { ($0.retain, $0.payload.count) })")
        await watcher.shutdown()
        await second.stop()
    }
}
