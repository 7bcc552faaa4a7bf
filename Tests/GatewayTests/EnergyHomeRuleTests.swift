import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayModel
import Testing
import VendorKit

/// `<base>/energy/home` adds up every configured energy device; `energy_home` keeps two devices that measure
/// the same flow (a Powerwall's solar meter on the panels an Envoy also measures) from counting it twice.
@Suite struct EnergyHomeRuleTests {
    static let powerwall = Device(vendorID: "pw", vendorDeviceID: "site", name: "Powerwall", type: .energyMeter,
                                  keys: ["solar_power", "grid_power", "battery_power", "battery_level", "solar_energy", "grid_import_energy"])
    static let envoy = Device(vendorID: "envoy", vendorDeviceID: "122302045041", name: "Envoy", type: .energyMeter, keys: ["solar_power", "solar_energy"])

    func states() -> [DeviceID: DeviceState] {
        [
            Self.powerwall.id: DeviceState(values: ["solar_power": .number(3000), "grid_power": .number(-500), "battery_power": .number(-1000),
                                                    "battery_level": .number(80), "solar_energy": .number(100), "grid_import_energy": .number(50)]),
            Self.envoy.id: DeviceState(values: ["solar_power": .number(3000), "solar_energy": .number(100)]),
        ]
    }

    func view(_ allowed: [String: Set<String>]) throws -> [String: Any] {
        let json = try #require(HomeViews.energy(devices: [Self.powerwall.id: Self.powerwall, Self.envoy.id: Self.envoy], states: states(), allowed: allowed))
        return try #require(try JSONSerialization.jsonObject(with: Data(json.render().utf8)) as? [String: Any])
    }

    @Test func twoSolarSystemsAddUpUnlessOneIsToldToLeaveSolarOut() throws {
        let both = try view([:])
        #expect(both["solar_power"] as? Double == 6000 && both["solar_energy"] as? Double == 200)
        let once = try view(["pw": ["grid_power", "battery_power", "battery_level", "grid_import_energy"]])
        #expect(once["solar_power"] as? Double == 3000 && once["solar_energy"] as? Double == 100)
        #expect(once["grid_power"] as? Double == -500 && once["battery_level"] as? Double == 80)
        #expect(once["home_power"] as? Double == 1500, "derived from the flows counted once: 3000 − 500 − 1000")
        let without = try view(["envoy": []])
        #expect(without["devices"] as? [String] == ["pw_site"])
    }

    @Test func theKeyIsReadAsTrueFalseOrAListOfEnergyKeys() throws {
        func parse(_ value: String) -> Result<GatewayConfig, ConfigLoader.Failure> {
            ConfigLoader.parse(yaml: "mqtt: {url: mqtt://localhost}\nvendors:\n  - {type: demo, id: demo, energy_home: \(value)}\n")
        }
        #expect(try parse("false").get().vendors[0].energyHome == [])
        #expect(try parse("true").get().vendors[0].energyHome == nil)
        #expect(try parse("[grid_power, battery_level]").get().vendors[0].energyHome == ["grid_power", "battery_level"])
        guard case .failure(let failure) = parse("[grid_power, temperature]") else {
            Issue.record("a key outside energy/home was accepted")
            return
        }
        #expect(failure.problems.map(\.path) == ["vendors[0].energy_home[1]"])
    }
}
