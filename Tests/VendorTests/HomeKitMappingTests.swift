import Foundation
import GatewayModel
import GatewayTesting
import HAP
import Testing
import VendorKit
@testable import VendorHomeKit

/// Every recorded `/accessories` dump (Home Assistant's homekit_controller fixtures) mapped to devices and keys by
/// the characteristic rules, with the published values checked against the recorded values.
@Suite struct HomeKitMappingTests {
    static func accessories(_ file: String) throws -> [HAPAccessory] {
        try AccessoryDatabase.parse(Array(try Data(contentsOf: URL(fileURLWithPath: Fixtures.path("homekit", "\(file).json")))))
    }

    static func plans(_ file: String) throws -> [HKDevicePlan] {
        HomeKitMapping.plans(vendorID: "hk", name: file, accessories: try accessories(file))
    }

    static func values(_ accessory: HAPAccessory) -> [Int: JSONValue] {
        var values: [Int: JSONValue] = [:]
        for service in accessory.services {
            for characteristic in service.characteristics { values[characteristic.iid] = characteristic.value }
        }
        return values
    }

    static func state(_ file: String) throws -> [String: [String: StateValue]] {
        let accessories = try accessories(file)
        var result: [String: [String: StateValue]] = [:]
        for plan in HomeKitMapping.plans(vendorID: "hk", name: file, accessories: accessories) {
            let accessory = try #require(accessories.first { $0.aid == plan.aid })
            result[plan.device.id.rawValue] = HomeKitMapping.state(plan, values: values(accessory))
        }
        return result
    }

    static let files = ["ecobee3", "eve_energy", "nanoleaf_strip_nl55", "netatmo_home_coach", "schlage_sense", "velux_gateway"]

    @Test func everyFixtureMapsToRegisteredKeysWithTheirValues() throws {
        for file in Self.files {
            let accessories = try Self.accessories(file)
            let plans = HomeKitMapping.plans(vendorID: "hk", name: file, accessories: accessories)
            #expect(plans.count == accessories.count, "\(file): one device per accessory")
            for plan in plans {
                let accessory = try #require(accessories.first { $0.aid == plan.aid })
                for key in plan.device.keys { #expect(StateKeys.spec(key) != nil, "\(file): \(key) is a registered key") }
                for (key, value) in HomeKitMapping.state(plan, values: Self.values(accessory)) {
                    #expect(plan.device.keys.contains(key), "\(file): \(key) is announced")
                    if case .number(let number) = value { #expect(number.isFinite, "\(file): \(key)") }
                }
                // Every characteristic a key reads is subscribed or polled.
                let fed = Set(plan.bindings.values.flatMap(\.reads)).filter { plan.characteristics[$0]?.readable == true }
                #expect(fed == Set(plan.notifying + plan.polled), "\(file) aid \(plan.aid)")
            }
        }
    }

    @Test func aThermostatBridgeWithRoomSensors() throws {
        let plans = try Self.plans("ecobee3")
        #expect(plans.map(\.device.id.rawValue) == ["hk_ecobee3", "hk_ecobee3_2", "hk_ecobee3_3", "hk_ecobee3_4"])
        let thermostat = plans[0].device
        #expect(thermostat.type == .thermostat)
        #expect(thermostat.manufacturer == "ecobee Inc.")
        #expect(thermostat.writableKeys == ["hvac_mode", "target_temperature"])
        #expect(thermostat.limits?["target_temperature"] == KeyLimits(min: 7.2, max: 33.3))
        let state = try Self.state("ecobee3")
        #expect(state["hk_ecobee3"] == ["temperature": .number(21.8), "target_temperature": .number(22.2), "humidity": .number(34),
                                        "hvac_mode": .string("heat"), "hvac_action": .string("heating"), "motion": .bool(false), "occupancy": .bool(true)])
        // A remote sensor: behind the thermostat, one battery flag although two of its services carry it.
        let kitchen = plans[1].device
        #expect(kitchen.name == "Kitchen")
        #expect(kitchen.viaDevice?.rawValue == "hk_ecobee3")
        #expect(kitchen.keys == ["temperature", "battery_low", "motion"])
        #expect(state["hk_ecobee3_2"] == ["temperature": .number(21.5), "battery_low": .bool(false), "motion": .bool(false)])
    }

    @Test func anEveEnergyIsAPlugWithEvesPowerCharacteristics() throws {
        let plan = try #require(try Self.plans("eve_energy").first)
        #expect(plan.device.type == .plug)
        #expect(Set(plan.device.keys) == ["state", "in_use", "power", "energy", "voltage", "current"])
        #expect(plan.device.writableKeys == ["state"])
        let state = try Self.state("eve_energy")["hk_eve_energy"]
        #expect(abs((state?["energy"]?.number ?? 0) - 0.29) < 1e-6)
        #expect(state?["state"] == .string("OFF"))
        // Eve's power readings announce events but send none: they are polled as well.
        let power = try #require(plan.bindings["power"]?.reads.first)
        #expect(plan.polled.contains(power))
    }

    @Test func aColourLightAndItsWrites() throws {
        let plan = try #require(try Self.plans("nanoleaf_strip_nl55").first)
        #expect(plan.device.type == .light)
        #expect(plan.device.limits?["color_temp_kelvin"] == KeyLimits(min: 2128, max: 6536))
        let state = try Self.state("nanoleaf_strip_nl55")["hk_nanoleaf_strip_nl55"]
        #expect(state?["color"] == .object(["hue": .number(30), "saturation": .number(89)]))
        #expect(state?["color_temp_kelvin"] == .number(2128))
        let writes = try HomeKitMapping.writes(for: ["state": .string("OFF"), "brightness": .number(40.4), "color_temp_kelvin": .number(4000)],
                                               plan: plan, values: [:])
        let byType = Dictionary(uniqueKeysWithValues: writes.compactMap { write in plan.characteristics[write.iid].map { ($0.type.short, write.value) } })
        #expect(byType["25"] == .bool(false))
        #expect(byType["8"] == .number(40))
        #expect(byType["CE"] == .number(250))
        #expect(throws: GatewayError.self) { try HomeKitMapping.writes(for: ["color": .string("red")], plan: plan, values: [:]) }
    }

    @Test func aLockAndACover() throws {
        let lock = try #require(try Self.plans("schlage_sense").first)
        #expect(lock.device.type == .lock)
        #expect(lock.device.writableKeys == ["lock"])
        // Lock Current State 3 (unknown) is not published as locked or unlocked.
        #expect(try Self.state("schlage_sense")["hk_schlage_sense"]?["lock"] == nil)
        let unlock = try HomeKitMapping.writes(for: ["lock": .string("UNLOCK")], plan: lock, values: [:])
        #expect(unlock.map(\.value) == [.number(0)])
        #expect(lock.characteristics[unlock[0].iid]?.type == HAPType(apple: "1E"))

        let window = try #require(try Self.plans("velux_gateway").first { $0.device.type == .cover })
        #expect(window.device.id.rawValue == "hk_velux_gateway_3")
        #expect(try Self.state("velux_gateway")["hk_velux_gateway_3"] == ["cover": .string("CLOSED"), "position": .number(0)])
        let open = try HomeKitMapping.writes(for: ["cover": .string("OPEN")], plan: window, values: [:])
        #expect(open.map(\.value) == [.number(100)])
        #expect(try Self.plans("velux_gateway").first?.device.type == .hub)
    }

    @Test func airQualityFromAHomeCoach() throws {
        let state = try Self.state("netatmo_home_coach")["hk_netatmo_home_coach"]
        #expect(state == ["air_quality": .string("good"), "co2": .number(804), "humidity": .number(59), "temperature": .number(22.9)])
    }

    /// The rules are by characteristic type, not by recorded device: an accessory built here from types alone maps.
    @Test func rulesNotFixtures() throws {
        func characteristic(_ iid: Int, _ type: String, _ perms: [String], _ format: String, _ value: JSONValue?) -> HAPCharacteristic {
            HAPCharacteristic(iid: iid, type: HAPType(apple: type), perms: Set(perms), format: format, value: value)
        }
        let accessory = HAPAccessory(aid: 1, services: [
            HAPService(iid: 1, type: HAPType(apple: "3E"), primary: false, hidden: false, characteristics: [characteristic(2, "23", ["pr"], "string", .string("Garage"))]),
            HAPService(iid: 10, type: HAPType(apple: "41"), primary: true, hidden: false, characteristics: [
                characteristic(11, "E", ["pr", "ev"], "uint8", .number(1)), characteristic(12, "32", ["pr", "pw", "ev", "tw"], "uint8", .number(1)),
            ]),
            HAPService(iid: 20, type: HAPType(apple: "80"), primary: false, hidden: false, characteristics: [characteristic(21, "6A", ["pr", "ev"], "uint8", .number(1))]),
            HAPService(iid: 30, type: HAPType(apple: "83"), primary: false, hidden: false, characteristics: [characteristic(31, "70", ["pr", "ev"], "uint8", .number(1))]),
            HAPService(iid: 40, type: HAPType(apple: "B7"), primary: false, hidden: false, characteristics: [
                characteristic(41, "B0", ["pr", "pw", "ev"], "uint8", .number(1)), characteristic(42, "29", ["pr", "pw", "ev"], "float", .number(45)),
            ]),
        ])
        let plan = HomeKitMapping.plan(vendorID: "hk", deviceName: "garage", accessory: accessory, via: nil, fallbackName: "garage")
        #expect(plan.device.type == .garageDoor)
        #expect(plan.device.name == "Garage")
        var values: [Int: JSONValue] = [:]
        for service in accessory.services { for item in service.characteristics { values[item.iid] = item.value } }
        #expect(HomeKitMapping.state(plan, values: values) == [
            "cover": .string("CLOSED"), "contact": .bool(false), "water_leak": .bool(true), "state": .string("ON"), "fan_speed": .number(45),
        ])
        #expect(plan.characteristics[12]?.needsTimedWrite == true)
        #expect(try HomeKitMapping.writes(for: ["cover": .string("OPEN")], plan: plan, values: values).map(\.value) == [.number(0)])
        #expect(throws: GatewayError.self) { try HomeKitMapping.writes(for: ["contact": .bool(true)], plan: plan, values: values) }
    }
}

/// What `avahi-browse --parsable --resolve` prints, read into one record per accessory.
@Suite struct AvahiBrowseParsingTests {
    static let output = #"""
    +;eth0;IPv6;Test\032HAP;_hap._tcp;local
    +;eth0;IPv4;Test\032HAP;_hap._tcp;local
    +;lo;IPv4;Test\032HAP;_hap._tcp;local
    =;eth0;IPv6;Test\032HAP;_hap._tcp;local;vm.local;fd00::2;51999;"pv=1.1" "ff=0" "s#=1" "sf=1" "ci=7" "md=Eve Energy" "id=AA:BB:CC:DD:EE:FF" "c#=2"
    =;eth0;IPv4;Test\032HAP;_hap._tcp;local;vm.local;192.0.2.2;51999;"pv=1.1" "ff=0" "s#=1" "sf=1" "ci=7" "md=Eve Energy" "id=AA:BB:CC:DD:EE:FF" "c#=2"
    =;lo;IPv4;Test\032HAP;_hap._tcp;local;vm.local;127.0.0.1;51999;"pv=1.1" "ff=0" "s#=1" "sf=1" "ci=7" "md=Eve Energy" "id=AA:BB:CC:DD:EE:FF" "c#=2"
    =;eth0;IPv4;ecobee3\032Thermostat\059\046;_hap._tcp;local;ecobee.local;192.0.2.7;1200;"md=ecobee3" "c#=41" "id=4a:3b:2c:1d:0e:ff" "sf=0" "ci=9" "note=a \"quoted\"; part"
    =;eth0;IPv4;broken;_hap._tcp;local;x.local;192.0.2.9;notaport;"id=11:22:33:44:55:66"
    =;eth0;IPv4;no-id;_hap._tcp;local;x.local;192.0.2.9;80;"md=x"
    """#

    @Test func oneRecordPerAccessoryWithItsBestAddress() {
        let records = AvahiBrowser.parse(Self.output)
        #expect(records.count == 2)
        let eve = records[0]
        #expect(eve.name == "Test HAP")
        #expect(eve.deviceID == "AA:BB:CC:DD:EE:FF")
        #expect(eve.address == "192.0.2.2" && eve.port == 51999, "IPv4 on the LAN before IPv6 and loopback")
        #expect(eve.model == "Eve Energy" && eve.category == 7 && eve.statusFlags == 1 && eve.configNumber == 2 && !eve.isPaired)
        let ecobee = records[1]
        #expect(ecobee.name == "ecobee3 Thermostat;.")
        #expect(ecobee.deviceID == "4A:3B:2C:1D:0E:FF" && ecobee.isPaired && ecobee.configNumber == 41)
        #expect(ecobee.json["category_name"] == .string("thermostat"))
    }

    @Test func loopbackWhenThatIsAllThereIs() {
        let records = AvahiBrowser.parse(#"=;lo;IPv4;Peer;_hap._tcp;local;vm.local;127.0.0.1;40000;"id=01:02:03:04:05:06" "sf=0""#)
        #expect(records.map(\.address) == ["127.0.0.1"])
    }
}
