import Foundation
@testable import Gateway
import GatewayModel
import Testing

@Suite struct DiscoveryTests {
    let topics = Topics(base: "lbs")

    func object(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
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
        #expect(lightEntity["default_entity_id"] as? String == "light.demo_light_light")
        #expect(lightEntity["object_id"] as? String == "demo_light_light")
        #expect(lightEntity["unique_id"] as? String == "lbs_demo_light_light")
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
}
