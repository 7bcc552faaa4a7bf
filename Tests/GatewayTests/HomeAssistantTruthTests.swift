import Foundation
@testable import Gateway
import GatewayModel
import GatewayTesting
import MQTT
import Testing

/// Issue 22 §4: what Home Assistant shows must be able to be right — names that do not repeat the device's,
/// one entity per fact.
@Suite struct HomeAssistantNamingTests {
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
