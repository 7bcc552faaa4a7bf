import Foundation
@testable import FeatureHomeAssistant
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayModel
import GatewayTesting
import MQTT
import TestTraits
import Testing
import VendorSimulators

/// What Home Assistant shows must be able to be right — names that do not repeat the device's,
/// one entity per fact.
@Suite(.integration) struct HomeAssistantNamingTests {
    let discovery: HomeAssistantDiscovery = {
        var discovery = HomeAssistantDiscovery(topics: Topics(base: "lbs"), mode: .device, version: "1.0")
        discovery.alerts = AlertSettings()
        return discovery
    }()

    func components(_ messages: [HomeAssistantDiscovery.Message]) throws -> [String: [String: Any]] {
        let first = try #require(messages.first)
        let payload = try #require(try JSONSerialization.jsonObject(with: Data(first.payload.utf8)) as? [String: Any])
        return try #require(payload["components"] as? [String: [String: Any]])
    }

    /// Home Assistant composes "<device> <entity>": "Home energy Home energy" and "Home Home power" before.
    @Test func entityNamesDoNotRepeatTheDeviceName() throws {
        let vue = Device(vendorID: "vue", vendorDeviceID: "1234", name: "Home", type: .energyMeter, keys: ["home_power", "power"])
        let vueEntities = try components(discovery.messages(for: vue))
        #expect(vueEntities["home_power"]?["name"] as? String == "Power")
        #expect(vueEntities["power"]?["name"] as? String == "Power", "a name that does not start with the device's stays")
        let energy = try components(discovery.homeViewMessages(.energy, keys: ["home_energy", "home_power", "solar_energy"]))
        #expect(energy["home_energy"]?["name"] is NSNull, "the device's own name, once: \(String(describing: energy["home_energy"]?["name"]))")
        #expect(energy["home_power"]?["name"] as? String == "Home power")
        #expect(energy["solar_energy"]?["name"] as? String == "Solar energy")
        // A device named like its only reading: the reading takes the device's name.
        let meter = Device(vendorID: "m", vendorDeviceID: "p", name: "power", type: .sensor, keys: ["power"])
        #expect(try components(discovery.messages(for: meter))["power"]?["name"] is NSNull)
        // ... unless its main entity has that name already.
        let plug = Device(vendorID: "m", vendorDeviceID: "plug", name: "Power", type: .plug, keys: ["state", "power"])
        let plugEntities = try components(discovery.messages(for: plug))
        #expect(plugEntities["state"]?["name"] is NSNull)
        #expect(plugEntities["power"]?["name"] as? String == "Power")
    }

    /// A Flume sensor reported its leak twice: `leak` (Flume's flag) and the `water_leak` alert (the flag or a
    /// long flow). One leak entity: the alert's.
    @Test func aFlumeLeakIsOneEntity() throws {
        let flume = Device(vendorID: "flume", vendorDeviceID: "6248", name: "Flume Sensor", type: .waterMeter,
                           keys: ["water_flow", "water_volume", "battery", "leak"])
        let entities = try components(discovery.messages(for: flume))
        let moisture = entities.filter { $0.value["device_class"] as? String == "moisture" }
        #expect(moisture.keys.sorted() == ["alert_water_leak"], "\(moisture.keys.sorted())")
        // Without alerts the vendor's own flag is the leak entity.
        let plain = HomeAssistantDiscovery(topics: Topics(base: "lbs"), mode: .device, version: "1.0")
        let withoutAlerts = try components(plain.messages(for: flume)).filter { $0.value["device_class"] as? String == "moisture" }
        #expect(withoutAlerts.keys.sorted() == ["leak"])
    }
}

/// A vendor removed from the config leaves no ghost in Home Assistant: its health sensor is removed the way Home
/// Assistant 2025 removes one component of a device (the component sent as `{"p":"sensor"}` once), and its
/// retained `bridge/vendors/<id>` is cleared. Real broker, three runs.
@Suite(.integration, .timeLimit(.minutes(2))) struct RemovedVendorTests {
    static let bridgeTopic = "homeassistant/device/lbs_bridge/config"

    func components(_ message: MQTTMessage?) throws -> [String: [String: Any]] {
        try #require(Self.components(message))
    }

    /// Without recording an issue: for polling.
    static func components(_ message: MQTTMessage?) -> [String: [String: Any]]? {
        message?.json?["components"] as? [String: [String: Any]]
    }

    @Test func aRemovedVendorsHealthSensorIsRemovedOnceAndItsHealthCleared() async throws {
        let broker = try await MosquittoBroker.started()
        let both = """
          - {type: demo, id: demo, poll_interval: 3600}
          - {type: demo, id: extra, poll_interval: 3600}
          - {type: demo, id: third, poll_interval: 3600}
        """
        let first = try await GatewayHarness.start(broker: broker, vendors: both)
        try await waitUntil("both vendors' health retained", timeout: .seconds(10)) {
            let retained = (try? await TestMQTTClient.retainedSnapshot(url: broker.url, filter: "#")) ?? [:]
            return retained["lbs/bridge/vendors/extra"] != nil
                && Self.components(retained[Self.bridgeTopic])?["vendor_third"]?["state_topic"] as? String == "lbs/bridge/vendors/third"
        }
        await first.stop()

        // Restarted with the first vendor only. `third` is known only from the gateway device's retained discovery.
        let watcher = try await TestMQTTClient.connect(to: broker.url)
        try await watcher.publish("lbs/bridge/vendors/third", "", qos: .atLeastOnce, retain: true)
        try await watcher.subscribe(Self.bridgeTopic)
        try await watcher.subscribe("lbs/bridge/vendors/+")
        let second = try await GatewayHarness.start(broker: broker, vendors: "  - {type: demo, id: demo, poll_interval: 3600}")
        let removal = try await watcher.waitForMessage(topic: Self.bridgeTopic, timeout: .seconds(10)) { message in
            !message.retain && ["vendor_extra", "vendor_third"].allSatisfy { key in
                Self.components(message)?[key].map { NSDictionary(dictionary: $0) == ["p": "sensor"] } == true
            }
        }
        let kept = try components(removal)
        #expect(kept["vendor_demo"]?["state_topic"] as? String == "lbs/bridge/vendors/demo")
        #expect(kept["vendor_extra"]?.count == 1, "the removed component is its platform alone: \(removal.text)")
        try await watcher.waitForMessage(topic: "lbs/bridge/vendors/extra", timeout: .seconds(10)) { $0.payload.isEmpty }
        var retained = try await TestMQTTClient.retainedSnapshot(url: broker.url, filter: "#")
        #expect(retained["lbs/bridge/vendors/extra"] == nil)
        #expect(retained["lbs/bridge/vendors/demo"] != nil)
        #expect(try components(retained[Self.bridgeTopic])["vendor_extra"]?.count == 1, "the broker keeps the removal for Home Assistant's next start")
        await second.stop()

        // A later start finds nothing left of the vendor and stops sending the removal.
        let seen = watcher.messages(on: Self.bridgeTopic).count
        let third = try await GatewayHarness.start(broker: broker, vendors: "  - {type: demo, id: demo, poll_interval: 3600}")
        defer { Task { await third.stop() } }
        // After the retained sweep (3 s) nothing more is sent.
        try await quietPeriod( .seconds(4))
        let later = watcher.messages(on: Self.bridgeTopic).dropFirst(seen).filter { !$0.retain }
        #expect(!later.isEmpty)
        for message in later { #expect(try components(message).keys.filter { $0.hasPrefix("vendor_") } == ["vendor_demo"], "\(message.text)") }
        retained = try await TestMQTTClient.retainedSnapshot(url: broker.url, filter: "#")
        #expect(try components(retained[Self.bridgeTopic]).keys.filter { $0.hasPrefix("vendor_") } == ["vendor_demo"])
        await watcher.shutdown()
    }
}

/// Rooms without readings are no devices: Home Assistant warned "No device components to cleanup" for every
/// empty discovery message the gateway sent for rooms it never announced (28 per start). Real broker.
@Suite(.integration, .timeLimit(.minutes(2))) struct EmptyRoomTests {
    @Test func aRoomWithoutReadingsGetsNoDiscoveryMessageAtAll() async throws {
        let broker = try await MosquittoBroker.started()
        let watcher = try await TestMQTTClient.connect(to: broker.url)
        try await watcher.subscribe("homeassistant/device/+/config")
        // The demo's Entrance (a lock), Kitchen (a plug) and Garage (the energy system) have no room readings.
        let gateway = try await GatewayHarness.start(broker: broker)
        defer { Task { await gateway.stop() } }
        try await watcher.waitForMessage(topic: "homeassistant/device/lbs_environment_living_room/config", timeout: .seconds(10)) { !$0.payload.isEmpty }
        // Past the retained sweep (3 s) and a few coalescing windows.
        try await quietPeriod( .seconds(4))
        let views = watcher.received.filter { $0.topic.contains("/lbs_environment_") || $0.topic.contains("/lbs_energy_home/") }
        let empty = views.filter(\.payload.isEmpty).map(\.topic)
        #expect(empty.isEmpty, "empty discovery for rooms never announced: \(empty)")
        #expect(!views.contains { $0.topic.contains("entrance") || $0.topic.contains("kitchen") || $0.topic.contains("garage") })
        await watcher.shutdown()
    }
}

/// Entities only for what a device reports, and a value for every state topic discovery points to. Real broker,
/// the Matter simulator serving the recorded nodes.
@Suite(.integration, .timeLimit(.minutes(2))) struct ReportedKeysDiscoveryTests {
    static func components(_ message: MQTTMessage?) -> [String: [String: Any]]? {
        message?.json?["components"] as? [String: [String: Any]]
    }

    @Test func onlyReportedKeysBecomeEntitiesAndAKeyThatAppearsLaterIsAnnounced() async throws {
        let (simulator, gateway) = try await MatterIntegrationTests().start()
        defer { Task { await gateway.stop(); await simulator.stop() } }
        let client = try await gateway.observer("lbs/device/#", "homeassistant/device/#")
        // An Eve thermostat carries Eve's cluster but no power attribute: no `sensor.matter_12_power`.
        let thermostat = try await client.waitForMessage(topic: "homeassistant/device/lbs_matter_12/config", timeout: .seconds(15)) {
            Self.components($0)?["climate"] != nil
        }
        let thermostatEntities = try #require(Self.components(thermostat))
        #expect(thermostatEntities["power"] == nil, "\(thermostatEntities.keys.sorted())")
        #expect(thermostatEntities["climate"] != nil)
        // The EV charger's ActivePower is null: no power entity until the node reports one.
        let charger = try await client.waitForMessage(topic: "homeassistant/device/lbs_matter_23/config", timeout: .seconds(10)) {
            Self.components($0)?["charging_state"] != nil
        }
        #expect(Self.components(charger)?["power"] == nil, "\(Self.components(charger)?.keys.sorted() ?? [])")
        _ = try await client.waitForMessage(topic: "lbs/device/matter_23", timeout: .seconds(10))

        // Every device whose discovery has a `stale` entity has a published state topic (the FRITZ!Box's own node
        // maps no key; its state still carries `last_seen`).
        _ = try await client.waitForMessage(topic: "homeassistant/device/lbs_matter_1/config", timeout: .seconds(10)) { Self.components($0)?["stale"] != nil }
        let state = try await client.waitForMessage(topic: "lbs/device/matter_1", timeout: .seconds(10))
        #expect(state.json?["last_seen"] != nil, "\(state.text)")
        try await quietPeriod( .seconds(1))
        let discoveries = client.received.filter { $0.topic.hasPrefix("homeassistant/device/lbs_matter_") && !$0.payload.isEmpty }
        for message in discoveries where Self.components(message)?["stale"] != nil {
            let stateTopic = try #require(message.json?["state_topic"] as? String)
            #expect(!client.messages(on: stateTopic).isEmpty, "\(message.topic) points at \(stateTopic), which has no message")
        }

        // The charger reports its power: discovery announces it, before the state that carries it.
        let seen = client.received.count
        simulator.report(node: 23, path: "1/144/8", json: "7400000")
        let powered = try await client.waitForMessage(topic: "lbs/device/matter_23", timeout: .seconds(10)) { $0.json?["power"] as? Double == 7400 }
        let later = Array(client.received.dropFirst(seen))
        let announced = try #require(later.firstIndex { $0.topic == "homeassistant/device/lbs_matter_23/config" && Self.components($0)?["power"] != nil },
                                     "no discovery with power after the node reported it")
        let stateIndex = try #require(later.firstIndex { $0.topic == "lbs/device/matter_23" && $0.json?["power"] != nil })
        #expect(announced < stateIndex, "discovery first, then the state with the new key")
        #expect(Self.components(later[announced])?["power"]?["device_class"] as? String == "power")
        _ = powered
    }
}

/// Ranges come from the device: an EV charger's current is what the charger takes (Matter: MinimumChargeCurrent
/// … the lower of CircuitCapacity and UserMaximumChargeCurrent; Emporia: 6 … its maximum), in Home Assistant and
/// on `/set`. Real broker.
@Suite(.integration, .timeLimit(.minutes(2))) struct DeviceRangeTests {
    static func components(_ message: MQTTMessage?) -> [String: [String: Any]]? {
        message?.json?["components"] as? [String: [String: Any]]
    }

    @Test func aMatterEVSEsCurrentHasTheChargersRangeInHomeAssistantAndOnSet() async throws {
        let (simulator, gateway) = try await MatterIntegrationTests().start()
        defer { Task { await gateway.stop(); await simulator.stop() } }
        let client = try await gateway.observer("lbs/device/matter_23", "homeassistant/device/lbs_matter_23/config", "replies/#")
        let discovery = try await client.waitForMessage(topic: "homeassistant/device/lbs_matter_23/config", timeout: .seconds(15)) {
            Self.components($0)?["charging_current"] != nil
        }
        let current = try #require(Self.components(discovery)?["charging_current"])
        #expect(current["platform"] as? String == "number")
        #expect(current["min"] as? Double == 2 && current["max"] as? Double == 32, "the recorded EVSE: 2 A … 32 A, \(current)")
        #expect(current["unit_of_measurement"] as? String == "A")
        let state = try await client.waitForMessage(topic: "lbs/device/matter_23", timeout: .seconds(10)) { $0.json?["charging_current"] != nil }
        #expect(state.json?["charging_current"] as? Double == 30)

        // Above the charger's range: refused by the gateway, nothing reaches the node.
        try await client.publish("lbs/device/matter_23/set/charging_current", "40", qos: .atLeastOnce, responseTopic: "replies/high")
        let refused = try await client.waitForMessage(topic: "replies/high", timeout: .seconds(10))
        #expect(refused.text.contains("out_of_range") && refused.text.contains("32"), "\(refused.text)")
        #expect(!simulator.commands.contains { $0.contains("EnableCharging") })
        try await client.publish("lbs/device/matter_23/set/charging_current", "16", qos: .atLeastOnce, responseTopic: "replies/set")
        let reply = try await client.waitForMessage(topic: "replies/set", timeout: .seconds(10))
        #expect(reply.json?["status"] as? String == "ok", "\(reply.text)")
        _ = try await client.waitForMessage(topic: "lbs/device/matter_23", timeout: .seconds(10)) { $0.json?["charging_current"] as? Double == 16 }
        #expect(simulator.commands.contains("device_command 23/1/153 EnableCharging"))
    }

    @Test func anEmporiaChargersCurrentHasTheChargersRange() async throws {
        let simulator = EmporiaSimulator(refreshToken: "emporia-refresh-token-xyz", username: "home@example.com", password: "emporia-password")
        try await simulator.start()
        defer { Task { await simulator.stop() } }
        let base = await simulator.baseURL
        let directory = try TemporaryDirectory()
        try "emporia-refresh-token-xyz\n".write(toFile: directory.file("emporia-token"), atomically: true, encoding: .utf8)
        let vendors = "  - {type: emporia, id: vue, url: \"\(base)\", auth_url: \"\(base)/\", refresh_token_file: emporia-token}"
        let gateway = try await GatewayHarness.start(directory: directory, vendors: vendors)
        defer { Task { await gateway.stop() } }
        let client = try await gateway.observer("homeassistant/device/lbs_vue_4567/config", "replies/#")
        let discovery = try await client.waitForMessage(topic: "homeassistant/device/lbs_vue_4567/config", timeout: .seconds(15)) {
            Self.components($0)?["charging_current"] != nil
        }
        let current = try #require(Self.components(discovery)?["charging_current"])
        #expect(current["min"] as? Double == 6 && current["max"] as? Double == 40, "\(current)")
        try await client.publish("lbs/device/vue_4567/set/charging_current", "48", qos: .atLeastOnce, responseTopic: "replies/high")
        let refused = try await client.waitForMessage(topic: "replies/high", timeout: .seconds(10))
        #expect(refused.text.contains("out_of_range"), "\(refused.text)")
    }
}

/// A key the vendor refuses for this device and firmware is read-only: current Powerwall firmware answers 403 to
/// a change of its operation; after the first refusal Home Assistant shows sensors, `/set` refuses before the
/// gateway is asked again, and with `storage:` a restart remembers it. Real broker, the Powerwall simulator.
@Suite(.integration, .timeLimit(.minutes(2))) struct RefusedKeyTests {
    static func components(_ message: MQTTMessage?) -> [String: [String: Any]]? {
        message?.json?["components"] as? [String: [String: Any]]
    }

    @Test func aPowerwallSettingRefusedWith403BecomesASensorAndStaysOneAfterARestart() async throws {
        let simulator = try PowerwallSimulator(configuration: .init(password: "TESLA", fixtures: Fixtures.path("powerwall", ""), customerMayWriteOperation: false))
        try await simulator.start()
        defer { Task { await simulator.stop() } }
        let broker = try await MosquittoBroker.started()
        let directory = try TemporaryDirectory()
        try "TESLA\n".write(toFile: directory.file("pw-password"), atomically: true, encoding: .utf8)
        let vendors = "  - {type: powerwall, id: pw, url: \"\(await simulator.baseURL)\", password_file: pw-password, poll_interval: 1}"
        let topic = "homeassistant/device/lbs_pw_site/config"
        let first = try await GatewayHarness.start(broker: broker, directory: directory, vendors: vendors, storage: true)
        let client = try await first.observer("lbs/device/pw_site", topic, "replies/#")
        let before = try await client.waitForMessage(topic: topic, timeout: .seconds(15)) { Self.components($0)?["backup_reserve"] != nil }
        #expect(Self.components(before)?["backup_reserve"]?["platform"] as? String == "number")
        #expect(Self.components(before)?["operation_mode"]?["platform"] as? String == "select")

        try await client.publish("lbs/device/pw_site/set/operation_mode", "backup", qos: .atLeastOnce, responseTopic: "replies/mode")
        let refused = try await client.waitForMessage(topic: "replies/mode", timeout: .seconds(10))
        #expect(refused.text.contains("vendor_rejected"), "\(refused.text)")
        let after = try await client.waitForMessage(topic: topic, timeout: .seconds(10)) {
            Self.components($0)?["backup_reserve"]?["platform"] as? String == "sensor"
        }
        for key in ["backup_reserve", "operation_mode"] {
            let entity = try #require(Self.components(after)?[key], "\(key) is still shown")
            #expect(entity["platform"] as? String == "sensor" && entity["command_topic"] == nil, "\(key): \(entity)")
        }
        // Refused by the gateway now, without asking the Powerwall again.
        try await client.publish("lbs/device/pw_site/set/backup_reserve", "20", qos: .atLeastOnce, responseTopic: "replies/reserve")
        let readOnly = try await client.waitForMessage(topic: "replies/reserve", timeout: .seconds(10))
        #expect(readOnly.text.contains("read_only_key"), "\(readOnly.text)")
        await first.stop()
        await client.shutdown()

        // Restarted with the same cache: the settings are never announced as controls again (same firmware).
        let watcher = try await TestMQTTClient.connect(to: broker.url)
        try await watcher.subscribe(topic)
        let second = try await GatewayHarness.start(broker: broker, directory: directory, vendors: vendors, storage: true)
        defer { Task { await second.stop() } }
        _ = try await watcher.waitForMessage(topic: topic, timeout: .seconds(15)) { !$0.retain && Self.components($0)?["grid_connected"] != nil }
        try await quietPeriod( .seconds(2))
        let announced = watcher.messages(on: topic).filter { !$0.retain }
        #expect(!announced.isEmpty)
        for message in announced {
            #expect(Self.components(message)?["backup_reserve"]?["platform"] as? String != "number", "\(message.text)")
            #expect(Self.components(message)?["operation_mode"]?["platform"] as? String != "select")
        }
        await watcher.shutdown()
    }
}

/// A Home Assistant service call has no answer of its own: a refused command showed only on `bridge/event`.
/// Every device that takes commands has a "Command error" `event` entity fed by `<base>/device/<id>/command_error`.
@Suite(.integration, .timeLimit(.minutes(2))) struct CommandErrorEntityTests {
    static func components(_ message: MQTTMessage?) -> [String: [String: Any]]? {
        message?.json?["components"] as? [String: [String: Any]]
    }

    @Test func aRefusedServiceCallShowsOnTheDevicesCommandErrorEntity() async throws {
        let gateway = try await GatewayHarness.start()
        defer { Task { await gateway.stop() } }
        let client = try await gateway.observer("homeassistant/device/+/config", "lbs/device/+/command_error")
        let light = try await client.waitForMessage(topic: "homeassistant/device/lbs_demo_light/config", timeout: .seconds(10)) {
            Self.components($0)?["light"] != nil
        }
        let entity = try #require(Self.components(light)?["command_error"])
        #expect(entity["platform"] as? String == "event")
        #expect(entity["state_topic"] as? String == "lbs/device/demo_light/command_error")
        #expect(entity["event_types"] as? [String] == ["command_refused", "command_failed"])
        // A device that takes no commands has none.
        let air = try await client.waitForMessage(topic: "homeassistant/device/lbs_demo_air/config", timeout: .seconds(10)) {
            Self.components($0)?["co2"] != nil
        }
        #expect(Self.components(air)?["command_error"] == nil)

        // What Home Assistant's number/light would send, without a response topic.
        try await client.publish("lbs/device/demo_light/set/brightness", "400")
        let event = try await client.waitForMessage(topic: "lbs/device/demo_light/command_error", timeout: .seconds(10))
        #expect(!event.retain)
        #expect(event.json?["event_type"] as? String == "command_refused", "\(event.text)")
        #expect(event.json?["code"] as? String == "out_of_range")
        #expect((event.json?["message"] as? String)?.contains("brightness") == true && event.json?["suggestion"] != nil)
    }

    @Test func errorCodesSplitIntoRefusedAndFailed() {
        for code in ["out_of_range", "read_only_key", "vendor_rejected", "invalid_payload", "queue_full"] {
            #expect(HomeAssistantDiscovery.commandErrorType(code) == "command_refused", "\(code)")
        }
        for code in ["vendor_unreachable", "vendor_timeout", "expired", "breaker_open", "auth_failed", "internal"] {
            #expect(HomeAssistantDiscovery.commandErrorType(code) == "command_failed", "\(code)")
        }
    }
}

/// A Matter fan is a Home Assistant `fan` (on/off, percentage, its own modes as presets), and a speed change is
/// answered ok only once the node reports it: a fan that takes the write and never moves is an error. Real broker,
/// the Matter simulator with the recorded Silabs fan (FanModeSequence 2: Off/Low/Med/High/Auto).
@Suite(.integration, .timeLimit(.minutes(2))) struct MatterFanTests {
    static func components(_ message: MQTTMessage?) -> [String: [String: Any]]? {
        message?.json?["components"] as? [String: [String: Any]]
    }

    @Test func aFanIsAFanEntityWithPercentageAndItsOwnPresets() async throws {
        let (simulator, gateway) = try await MatterIntegrationTests().start()
        defer { Task { await gateway.stop(); await simulator.stop() } }
        let client = try await gateway.observer("lbs/device/matter_99", "homeassistant/device/lbs_matter_99/config", "replies/#")
        let discovery = try await client.waitForMessage(topic: "homeassistant/device/lbs_matter_99/config", timeout: .seconds(15)) {
            Self.components($0)?["fan"] != nil
        }
        let all = try #require(Self.components(discovery))
        let fan = try #require(all["fan"])
        #expect(fan["platform"] as? String == "fan" && fan["name"] is NSNull && fan["default_entity_id"] as? String == "fan.matter_99")
        #expect(fan["command_topic"] as? String == "lbs/device/matter_99/set/fan_mode")
        #expect(fan["payload_on"] as? String == "on" && fan["payload_off"] as? String == "off")
        #expect(fan["percentage_command_topic"] as? String == "lbs/device/matter_99/set/fan_speed")
        #expect(fan["preset_modes"] as? [String] == ["low", "medium", "high", "auto"], "\(fan)")
        #expect(fan["preset_mode_command_topic"] as? String == "lbs/device/matter_99/set/fan_mode")
        #expect(all["fan_speed"] == nil && all["fan_mode"] == nil, "no separate number and select: \(all.keys.sorted())")
    }

    @Test func aFanSpeedIsOkOnlyOnceTheNodeReportsIt() async throws {
        let (simulator, gateway) = try await MatterIntegrationTests().start()
        defer { Task { await gateway.stop(); await simulator.stop() } }
        let client = try await gateway.observer("lbs/device/matter_99", "replies/#")
        _ = try await client.waitForMessage(topic: "lbs/device/matter_99", timeout: .seconds(15)) { $0.json?["fan_speed"] as? Double == 30 }

        // Home Assistant's percentage: written to PercentSetting; ok once PercentCurrent reports it.
        try await client.publish("lbs/device/matter_99/set/fan_speed", "60", qos: .atLeastOnce, responseTopic: "replies/speed")
        let reply = try await client.waitForMessage(topic: "replies/speed", timeout: .seconds(10))
        #expect(reply.json?["status"] as? String == "ok", "\(reply.text)")
        #expect(simulator.commands.contains("write_attribute 99/1/514/2 60"))
        #expect(simulator.attribute(node: 99, path: "1/514/3") == "60")
        // A preset the fan does not have is refused before the node.
        try await client.publish("lbs/device/matter_99/set/fan_mode", "smart", qos: .atLeastOnce, responseTopic: "replies/smart")
        let smart = try await client.waitForMessage(topic: "replies/smart", timeout: .seconds(10))
        #expect(smart.text.contains("invalid_payload") || smart.text.contains("invalid_value"), "\(smart.text)")

        // The fan takes writes but does not move: the command is not ok.
        simulator.setFanStuck(node: 99)
        try await client.publish("lbs/device/matter_99/set/fan_speed", "90", qos: .atLeastOnce, responseTopic: "replies/stuck")
        let stuck = try await client.waitForMessage(topic: "replies/stuck", timeout: .seconds(15))
        #expect(stuck.json?["status"] as? String == "error", "\(stuck.text)")
        #expect(stuck.text.contains("still reports"), "\(stuck.text)")
        #expect(simulator.commands.contains("write_attribute 99/1/514/2 90"))
        #expect(client.messages(on: "lbs/device/matter_99").last?.json?["fan_speed"] as? Double == 60)
    }
}
