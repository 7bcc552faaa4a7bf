import Foundation
@testable import FeatureHomeAssistant
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayModel
import GatewayTesting
import MQTT
import TestTraits
import Testing

@Suite(.integration) struct DiscoveryTests {
    let topics = Topics(base: "lbs")

    func object(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    /// A connect builds every device's discovery on all cores: the same messages, in the same order, as one by one.
    @Test(arguments: [HomeAssistantSettings.Mode.device, .component])
    func discoveryBuiltInParallelIsTheSameAsOneByOne(mode: HomeAssistantSettings.Mode) {
        let discovery = HomeAssistantDiscovery(topics: topics, mode: mode, version: "1.0")
        let types: [(DeviceType, [String])] = [(.light, ["state", "brightness"]), (.sensor, ["temperature", "humidity"]),
                                               (.plug, ["state", "power", "energy"]), (.lock, ["lock"])]
        let devices: [(Device, DeviceState?)] = (0 ..< 203).map { index in
            let (type, keys) = types[index % types.count]
            let device = Device(vendorID: "demo", vendorDeviceID: "d\(index)", name: "Device \(index)", type: type, keys: keys)
            return (device, index % 3 == 0 ? nil : DeviceState(values: ["temperature": .number(Double(index))]))
        }
        let oneByOne = devices.map { discovery.messages(for: $0.0, reported: .state($0.1)) }
        for workers in [1, 2, 3, 7] {
            #expect(discovery.messagesInParallel(for: devices, minimumPerWorker: 8, maximumWorkers: workers) == oneByOne, "\(workers) workers")
        }
        #expect(discovery.messagesInParallel(for: []).isEmpty)
    }

    /// `homeassistant.node_id`: every discovery topic gets the gateway's own level (what a site's bridge and the
    /// central ACL let through), unique ids stay.
    @Test func aNodeIDPutsEveryDiscoveryTopicUnderItsOwnLevel() throws {
        let topics = Topics(base: "site/a", discoveryNodeID: "site_a")
        let light = Device(vendorID: "demo", vendorDeviceID: "light", name: "Demo Light", type: .light, keys: ["state", "brightness"])
        let device = HomeAssistantDiscovery(topics: topics, mode: .device, version: "1.0")
        #expect(device.messages(for: light).map(\.topic) == ["homeassistant/device/site_a/site_a_demo_light/config"])
        #expect(device.clearTopics(for: light) == ["homeassistant/device/site_a/site_a_demo_light/config"])
        #expect(device.bridgeMessages(vendorIDs: ["demo"]).map(\.topic) == ["homeassistant/device/site_a/site_a_bridge/config"])
        #expect(device.sceneTopic("evening") == "homeassistant/scene/site_a/site_a_scene_evening/config")
        #expect(device.homeViewMessages(.energy, keys: ["grid_power"]).map(\.topic) == ["homeassistant/device/site_a/site_a_energy_home/config"])
        let component = HomeAssistantDiscovery(topics: topics, mode: .component, version: "1.0")
        let componentTopics = component.messages(for: light).map(\.topic)
        #expect(componentTopics.contains("homeassistant/light/site_a/site_a_demo_light_light/config"), "\(componentTopics)")
        #expect(componentTopics.allSatisfy { $0.split(separator: "/").count == 5 && $0.split(separator: "/")[2] == "site_a" })
        #expect(try object(device.messages(for: light)[0].payload)["components"].map { "\($0)" }?.contains("site_a_demo_light_light") == true)
    }

    /// Retained discovery an earlier run published without the node level is cleared once `node_id` is set:
    /// it would stay beside the new one.
    @Test func settingANodeIDClearsTheOldLayoutsDiscovery() async throws {
        let first = try await GatewayHarness.start()
        let watcher = try await TestMQTTClient.connect(to: first.broker.url)
        try await watcher.subscribe("homeassistant/#")
        try await watcher.waitForMessage(topic: "homeassistant/device/lbs_demo_light/config", timeout: .seconds(10)) { !$0.payload.isEmpty }
        try await watcher.waitForMessage(topic: "homeassistant/device/lbs_bridge/config", timeout: .seconds(10)) { !$0.payload.isEmpty }
        await first.stop()
        // Another gateway's discovery with a similar prefix stays.
        try await watcher.publish("homeassistant/device/lbs_other/config", #"{"state_topic":"elsewhere/x"}"#, retain: true)
        let second = try await GatewayHarness.start(broker: first.broker, homeAssistant: "node_id: home")
        defer { Task { await second.stop() } }
        try await watcher.waitForMessage(topic: "homeassistant/device/home/lbs_demo_light/config", timeout: .seconds(10)) { !$0.payload.isEmpty }
        for old in ["homeassistant/device/lbs_demo_light/config", "homeassistant/device/lbs_bridge/config"] {
            try await watcher.waitForMessage(topic: old, timeout: .seconds(10)) { $0.payload.isEmpty }
        }
        let retained = try await TestMQTTClient.retainedSnapshot(url: first.broker.url, filter: "homeassistant/#")
        #expect(retained["homeassistant/device/lbs_demo_light/config"] == nil)
        #expect(retained["homeassistant/device/home/lbs_bridge/config"] != nil)
        #expect(retained["homeassistant/device/lbs_other/config"] != nil, "only the gateway's own discovery is cleared")
        await watcher.shutdown()
    }

    @Test func deviceDiscoveryHasOriginComponentsAndBothEntityIDs() throws {
        let discovery = HomeAssistantDiscovery(topics: topics, mode: .device, version: "1.0")
        let light = Device(vendorID: "demo", vendorDeviceID: "light", name: "Demo Light", type: .light, manufacturer: "M", room: "Living Room",
                           keys: ["state", "brightness", "color_temp_kelvin"])
        let messages = discovery.messages(for: light)
        #expect(messages.map(\.topic) == ["homeassistant/device/lbs_demo_light/config"])
        let payload = try object(messages[0].payload)
        #expect(payload["origin"] != nil)
        #expect(payload["availability_mode"] as? String == "all")
        let availability = try #require(payload["availability"] as? [[String: Any]])
        #expect(availability.compactMap { $0["topic"] as? String } == ["lbs/bridge/state", "lbs/device/demo_light/availability"])
        let device = try #require(payload["device"] as? [String: Any])
        #expect(device["suggested_area"] as? String == "Living Room")
        let components = try #require(payload["components"] as? [String: [String: Any]])
        let lightEntity = try #require(components["light"])
        #expect(lightEntity["platform"] as? String == "light")
        #expect(lightEntity["schema"] as? String == "json")
        #expect(lightEntity["brightness_scale"] as? Int == 100)
        #expect(lightEntity["color_temp_kelvin"] as? Bool == true)
        #expect(lightEntity["command_topic"] as? String == "lbs/device/demo_light/set")
        #expect(lightEntity["default_entity_id"] as? String == "light.demo_light")
        #expect(lightEntity["object_id"] as? String == "demo_light")
        // unique_id unchanged: existing Home Assistant entities stay attached.
        #expect(lightEntity["unique_id"] as? String == "lbs_demo_light_light")
    }

    func components(_ discovery: HomeAssistantDiscovery, _ device: Device) throws -> [String: [String: Any]] {
        try #require(try object(discovery.messages(for: device)[0].payload)["components"] as? [String: [String: Any]])
    }

    /// `light.demo_light_light` → `light.demo_light`; other entities keep `<device>_<key>`.
    @Test func theMainEntityTakesTheDeviceIDAloneOthersKeepTheKey() throws {
        let discovery = HomeAssistantDiscovery(topics: topics, mode: .device, version: "1.0")
        let cases: [(Device, String, String)] = [
            (Device(vendorID: "demo", vendorDeviceID: "light", name: "L", type: .light, keys: ["state", "brightness"]), "light", "light.demo_light"),
            (Device(vendorID: "demo", vendorDeviceID: "lock", name: "L", type: .lock, keys: ["lock", "battery"]), "lock", "lock.demo_lock"),
            (Device(vendorID: "demo", vendorDeviceID: "thermostat", name: "T", type: .thermostat,
                    keys: ["temperature", "target_temperature", "hvac_mode"]), "climate", "climate.demo_thermostat"),
            (Device(vendorID: "demo", vendorDeviceID: "plug", name: "P", type: .plug, keys: ["state", "power", "energy"]), "state", "switch.demo_plug"),
            (Device(vendorID: "c", vendorDeviceID: "garage", name: "G", type: .garageDoor, keys: ["cover", "position"]), "cover", "cover.c_garage"),
        ]
        for (device, key, entityID) in cases {
            let all = try components(discovery, device)
            let main = try #require(all[key], "\(device.id) has no \(key) component")
            #expect(main["default_entity_id"] as? String == entityID)
            #expect(main["object_id"] as? String == String(entityID.split(separator: ".")[1]))
            #expect(main["unique_id"] as? String == "lbs_\(device.id.rawValue)_\(key)")
            // No other entity of the device claims the bare id.
            let bare = all.values.filter { ($0["object_id"] as? String) == device.id.rawValue }
            #expect(bare.count == 1, "\(device.id): \(bare.count) entities with the bare id")
        }
        let plug = try components(discovery, cases[3].0)
        #expect(plug["power"]?["default_entity_id"] as? String == "sensor.demo_plug_power")
        #expect(plug["power"]?["object_id"] as? String == "demo_plug_power")
        #expect(plug["energy"]?["default_entity_id"] as? String == "sensor.demo_plug_energy")
        let lock = try components(discovery, cases[1].0)
        #expect(lock["battery"]?["default_entity_id"] as? String == "sensor.demo_lock_battery")
        // A sensor-only device has no main entity: every entity keeps <device>_<key>.
        let air = try components(discovery, Device(vendorID: "demo", vendorDeviceID: "air", name: "A", type: .airQuality, keys: ["temperature", "co2"]))
        #expect(air["temperature"]?["default_entity_id"] as? String == "sensor.demo_air_temperature")
    }

    /// 44.628 % and 21.268 °C are shown with a sensible number of decimals.
    @Test func everyNumericSensorHasADisplayPrecision() throws {
        let discovery = HomeAssistantDiscovery(topics: topics, mode: .device, version: "1.0")
        let numeric = StateKeys.all.filter { spec in
            if case .number = spec.kind { return !spec.writable } else { return false }
        }.map(\.name)
        let device = Device(vendorID: "demo", vendorDeviceID: "all", name: "All", type: .sensor, keys: numeric)
        let all = try components(discovery, device)
        for key in numeric {
            let entity = try #require(all[key], "no entity for \(key)")
            #expect(entity["platform"] as? String == "sensor")
            #expect(entity["suggested_display_precision"] is Int, "\(key) has no suggested_display_precision")
        }
        #expect(all["temperature"]?["suggested_display_precision"] as? Int == 1)
        #expect(all["humidity"]?["suggested_display_precision"] as? Int == 0)
        #expect(all["power"]?["suggested_display_precision"] as? Int == 0)
        #expect(all["co2"]?["suggested_display_precision"] as? Int == 0)
        #expect(all["solar_energy"]?["suggested_display_precision"] as? Int == 2)
        #expect(all["last_seen"]?["suggested_display_precision"] == nil)
    }

    /// The `stale` flag and `last_seen` reach Home Assistant: attributes of the main entity and a diagnostic sensor.
    @Test func staleAndLastSeenAreVisibleInHomeAssistant() throws {
        let discovery = HomeAssistantDiscovery(topics: topics, mode: .device, version: "1.0")
        let lock = Device(vendorID: "demo", vendorDeviceID: "lock", name: "L", type: .lock, keys: ["lock", "battery"])
        let all = try components(discovery, lock)
        let main = try #require(all["lock"])
        #expect(main["json_attributes_topic"] as? String == "lbs/device/demo_lock")
        let template = try #require(main["json_attributes_template"] as? String)
        #expect(template.contains("value_json.stale") && template.contains("value_json.last_seen"))
        let stale = try #require(all["stale"])
        #expect(stale["platform"] as? String == "binary_sensor")
        #expect(stale["entity_category"] as? String == "diagnostic")
        #expect(stale["device_class"] as? String == "problem")
        #expect((stale["value_template"] as? String)?.contains("value_json.stale") == true)
        #expect(stale["unique_id"] as? String == "lbs_demo_lock_stale")
    }

    @Test func deviceInfoCarriesSoftwareVersionAndSerialNumber() throws {
        let discovery = HomeAssistantDiscovery(topics: topics, mode: .device, version: "1.0")
        let device = Device(vendorID: "demo", vendorDeviceID: "plug", name: "P", type: .plug, swVersion: "2.1", serialNumber: "SN-42", keys: ["state"])
        let block = try #require(try object(discovery.messages(for: device)[0].payload)["device"] as? [String: Any])
        #expect(block["sw_version"] as? String == "2.1")
        #expect(block["serial_number"] as? String == "SN-42")
    }

    @Test func energyCountersAreTotalIncreasingKWhAndPowerIsMeasurement() throws {
        let discovery = HomeAssistantDiscovery(topics: topics, mode: .device, version: "1.0")
        let meter = Device(vendorID: "demo", vendorDeviceID: "energy", name: "E", type: .energyMeter,
                           keys: ["solar_power", "grid_import_energy", "battery_level", "water_volume", "gas_volume", "co2", "pm25", "voc"])
        let components = try #require(try object(discovery.messages(for: meter)[0].payload)["components"] as? [String: [String: Any]])
        let energy = try #require(components["grid_import_energy"])
        #expect(energy["device_class"] as? String == "energy")
        #expect(energy["state_class"] as? String == "total_increasing")
        #expect(energy["unit_of_measurement"] as? String == "kWh")
        #expect(components["solar_power"]?["state_class"] as? String == "measurement")
        #expect(components["solar_power"]?["unit_of_measurement"] as? String == "W")
        #expect(components["water_volume"]?["device_class"] as? String == "water")
        #expect(components["gas_volume"]?["unit_of_measurement"] as? String == "m³")
        #expect(components["co2"]?["device_class"] as? String == "carbon_dioxide")
        #expect(components["pm25"]?["unit_of_measurement"] as? String == "µg/m³")
        #expect(components["voc"]?["device_class"] as? String == "volatile_organic_compounds")
    }

    @Test func locksCoversAndClimateMapToTheirPlatforms() throws {
        let discovery = HomeAssistantDiscovery(topics: topics, mode: .device, version: "1.0")
        let lock = Device(vendorID: "demo", vendorDeviceID: "lock", name: "L", type: .lock, keys: ["lock"])
        let lockEntity = try #require((try object(discovery.messages(for: lock)[0].payload)["components"] as? [String: [String: Any]])?["lock"])
        #expect(lockEntity["payload_unlock"] as? String == "UNLOCK")
        #expect(lockEntity["state_jammed"] as? String == "JAMMED")
        #expect(lockEntity["command_topic"] as? String == "lbs/device/demo_lock/set/lock")

        let garage = Device(vendorID: "c", vendorDeviceID: "garage", name: "G", type: .garageDoor, keys: ["cover", "position"])
        let cover = try #require((try object(discovery.messages(for: garage)[0].payload)["components"] as? [String: [String: Any]])?["cover"])
        #expect(cover["device_class"] as? String == "garage")
        #expect(cover["set_position_topic"] as? String == "lbs/device/c_garage/set/position")

        let thermostat = Device(vendorID: "demo", vendorDeviceID: "t", name: "T", type: .thermostat, keys: ["temperature", "target_temperature", "hvac_mode"])
        let climate = try #require((try object(discovery.messages(for: thermostat)[0].payload)["components"] as? [String: [String: Any]])?["climate"])
        #expect(climate["temperature_command_topic"] as? String == "lbs/device/demo_t/set/target_temperature")
        #expect(climate["modes"] as? [String] == ["off", "heat", "cool", "auto"])
    }

    @Test func componentModePublishesOneTopicPerEntity() throws {
        let discovery = HomeAssistantDiscovery(topics: topics, mode: .component, version: "1.0")
        let plug = Device(vendorID: "demo", vendorDeviceID: "plug", name: "P", type: .plug, keys: ["state", "power", "energy"])
        let topics = discovery.messages(for: plug).map(\.topic)
        #expect(topics.contains("homeassistant/switch/lbs_demo_plug/state/config"))
        #expect(topics.contains("homeassistant/sensor/lbs_demo_plug/energy/config"))
        #expect(discovery.clearTopics(for: plug).sorted() == topics.sorted())
        let energy = try object(try #require(discovery.messages(for: plug).first { $0.topic.hasSuffix("/energy/config") }).payload)
        #expect(energy["device"] != nil && energy["origin"] != nil && energy["platform"] == nil)
    }

    @Test func componentModeAnnouncesTheGatewayAndHomeViewsEntityByEntity() throws {
        let discovery = HomeAssistantDiscovery(topics: topics, mode: .component, version: "1.0")
        let bridge = discovery.bridgeMessages(vendorIDs: ["demo", "house"])
        let bridgeTopics = Set(bridge.map(\.topic))
        for topic in ["homeassistant/binary_sensor/lbs_bridge/connection_state/config", "homeassistant/button/lbs_bridge/restart/config",
                      "homeassistant/select/lbs_bridge/log_level/config", "homeassistant/sensor/lbs_bridge/version/config",
                      "homeassistant/sensor/lbs_bridge/commands_executed/config", "homeassistant/sensor/lbs_bridge/vendor_house/config"] {
            #expect(bridgeTopics.contains(topic), "\(topic) missing")
        }
        for message in bridge {
            let config = try object(message.payload)
            #expect(config["device"] != nil && config["origin"] != nil && config["platform"] == nil)
        }
        let keys = ["grid_import_energy", "solar_power"]
        let views = discovery.homeViewMessages(.energy, keys: keys)
        #expect(views.map(\.topic).sorted() == discovery.homeViewClearTopics(.energy, keys: keys).sorted())
        let counter = try object(try #require(views.first { $0.topic == "homeassistant/sensor/lbs_energy_home/grid_import_energy/config" }).payload)
        #expect(counter["state_topic"] as? String == "lbs/energy/home")
        #expect(counter["state_class"] as? String == "total_increasing")
        #expect(counter["unique_id"] as? String == "lbs_energy_home_grid_import_energy")
    }
}

/// A home battery site as the Powerwall adapter describes it: settings become controls, the grid status a
/// "grid connected" binary sensor, and every counter lands in the Energy dashboard.
@Suite(.integration) struct EnergySiteDiscoveryTests {
    @Test func batterySettingsAreControlsAndEveryCounterFitsTheEnergyDashboard() throws {
        let discovery = HomeAssistantDiscovery(topics: Topics(base: "lbs"), mode: .device, version: "1.0")
        let keys = ["solar_power", "grid_power", "battery_power", "home_power", "battery_level", "solar_energy", "grid_import_energy",
                    "grid_export_energy", "battery_discharge_energy", "battery_charge_energy", "home_energy", "grid_status",
                    "backup_reserve", "operation_mode"]
        let site = Device(vendorID: "pw", vendorDeviceID: "site", name: "Home", type: .energyMeter, manufacturer: "Tesla",
                          writableKeys: ["backup_reserve", "operation_mode"], keys: keys)
        let payload = try #require(try JSONSerialization.jsonObject(with: Data(discovery.messages(for: site)[0].payload.utf8)) as? [String: Any])
        let components = try #require(payload["components"] as? [String: [String: Any]])

        let reserve = try #require(components["backup_reserve"])
        #expect(reserve["platform"] as? String == "number")
        #expect(reserve["command_topic"] as? String == "lbs/device/pw_site/set/backup_reserve")
        #expect(reserve["min"] as? Double == 0 && reserve["max"] as? Double == 100 && reserve["unit_of_measurement"] as? String == "%")
        let mode = try #require(components["operation_mode"])
        #expect(mode["platform"] as? String == "select")
        #expect(mode["options"] as? [String] == ["self_consumption", "autonomous", "backup"])
        #expect(mode["command_topic"] as? String == "lbs/device/pw_site/set/operation_mode")

        let connected = try #require(components["grid_connected"])
        #expect(connected["platform"] as? String == "binary_sensor" && connected["device_class"] as? String == "power")
        #expect((connected["value_template"] as? String)?.contains("== 'connected'") == true)
        let status = try #require(components["grid_status"])
        #expect(status["device_class"] as? String == "enum" && (status["options"] as? [String])?.contains("islanded") == true)

        for key in ["solar_energy", "grid_import_energy", "grid_export_energy", "battery_discharge_energy", "battery_charge_energy", "home_energy"] {
            let counter = try #require(components[key], "\(key)")
            #expect(counter["device_class"] as? String == "energy", "\(key)")
            #expect(counter["state_class"] as? String == "total_increasing", "\(key)")
            #expect(counter["unit_of_measurement"] as? String == "kWh", "\(key)")
        }
        // Where the vendor cannot change them, the same keys are plain sensors, never controls.
        let readOnly = Device(vendorID: "pw", vendorDeviceID: "site", name: "Home", type: .energyMeter, writableKeys: [], keys: keys)
        let plain = try #require(try JSONSerialization.jsonObject(with: Data(discovery.messages(for: readOnly)[0].payload.utf8)) as? [String: Any])
        let plainComponents = try #require(plain["components"] as? [String: [String: Any]])
        #expect(plainComponents["backup_reserve"]?["platform"] as? String == "sensor")
        #expect(plainComponents["backup_reserve"]?["command_topic"] == nil)
    }
}
