import Foundation
@testable import FeatureHomeKitBridge
@testable import GatewayCore
import GatewayModel
import HAP
import Testing

/// Gateway devices → HomeKit accessories: services by type and keys, fixed instance ids, values both ways.
@Suite struct HomeKitBridgeModelTests {
    static func device(_ type: DeviceType, _ keys: [String], id: String = "x", writable: Set<String>? = nil) -> Device {
        Device(vendorID: "demo", vendorDeviceID: id, name: "Test \(id)", type: type, manufacturer: "Acme", model: "M1", swVersion: "v2.3.4-beta",
               writableKeys: writable, keys: keys)
    }

    static func types(_ accessory: BridgedAccessory) -> [String] { accessory.services.map(\.type.short) }

    @Test func lightsLocksAndThermostatsGetTheirServices() throws {
        let light = try #require(BridgeModel.accessory(aid: 2, device: Self.device(.light, ["state", "brightness", "color_temp_kelvin", "color"]), version: "0.2.0"))
        #expect(Self.types(light) == ["3E", "43"])
        let bulb = light.services[1]
        #expect(bulb.characteristics.map(\.type.short) == ["25", "8", "CE", "13", "2F"])
        #expect(bulb.characteristics.allSatisfy { $0.perms == ["pr", "pw", "ev"] })
        #expect(light.characteristic(BridgeModel.iid(.information, 6))?.source == .constant(.string("2.3.4")), "firmware as x.y.z")

        let lock = try #require(BridgeModel.accessory(aid: 3, device: Self.device(.lock, ["lock", "battery"]), version: "0.2.0"))
        #expect(Self.types(lock) == ["3E", "45", "96"])
        let thermostat = try #require(BridgeModel.accessory(aid: 4, device: Self.device(.thermostat, ["temperature", "target_temperature", "hvac_mode", "humidity"]), version: "0.2.0"))
        #expect(Self.types(thermostat) == ["3E", "4A"])
        #expect(thermostat.services[1].characteristics.map(\.type.short) == ["F", "33", "11", "35", "36", "10"])
        let air = try #require(BridgeModel.accessory(aid: 5, device: Self.device(.airQuality, ["temperature", "humidity", "co2", "pm25", "voc"]), version: "0.2.0"))
        #expect(Self.types(air) == ["3E", "8A", "82", "97", "8D"])
        #expect(air.services[1].primary && !air.services[2].primary)
        // Nothing HomeKit can show: no accessory.
        #expect(BridgeModel.accessory(aid: 6, device: Self.device(.appliance, ["operation_mode"]), version: "0.2.0") == nil)
    }

    /// Instance ids depend on the service type and characteristic only: a key gained later moves nothing.
    @Test func instanceIDsAreFixed() throws {
        let before = try #require(BridgeModel.accessory(aid: 2, device: Self.device(.light, ["state"]), version: "0.2.0"))
        let after = try #require(BridgeModel.accessory(aid: 2, device: Self.device(.light, ["state", "brightness", "battery"]), version: "0.2.0"))
        let on = try #require(before.services[1].characteristics.first)
        #expect(after.characteristic(on.iid)?.type == on.type)
        var seen = Set<Int>()
        for service in after.services {
            #expect(seen.insert(service.iid).inserted)
            for item in service.characteristics { #expect(seen.insert(item.iid).inserted, "iid \(item.iid) unique within the accessory") }
        }
    }

    @Test func valuesBothWays() throws {
        let light = try #require(BridgeModel.accessory(aid: 2, device: Self.device(.light, ["state", "brightness", "color_temp_kelvin", "color"]), version: "0.2.0"))
        let items = light.services[1].characteristics
        let state = DeviceState(values: ["state": .string("ON"), "brightness": .number(42), "color_temp_kelvin": .number(2700),
                                         "color": .object(["hue": .number(30), "saturation": .number(80)])])
        #expect(items.map { BridgeModel.value($0, state: state) } == [.bool(true), .number(42), .number(370), .number(30), .number(80)])
        // Writes become `/set` keys and values.
        func command(_ index: Int, _ value: JSONValue) -> (String, JSONValue)? {
            if case .success(let result) = BridgeModel.command(items[index], value: value, state: state) { return result }
            return nil
        }
        #expect(command(0, .bool(false))?.0 == "state" && command(0, .bool(false))?.1 == .string("OFF"))
        #expect(command(0, .number(1))?.1 == .string("ON"))
        #expect(command(2, .number(250))?.1 == .number(4000))
        #expect(command(3, .number(120))?.1 == .object(["hue": .number(120), "saturation": .number(80)]), "the other half from the current colour")
        if case .failure(let refusal) = BridgeModel.command(items[1], value: .number(101), state: state) { #expect(refusal.status == HAPStatus.invalidValue) } else {
            Issue.record("an out-of-range brightness was taken")
        }
        let readOnly = BridgeModel.accessory(aid: 3, device: Self.device(.light, ["state"], writable: []), version: "0.2.0")?.services[1].characteristics[0]
        if case .failure(let refusal)? = readOnly.map({ BridgeModel.command($0, value: .bool(true), state: nil) }) { #expect(refusal.status == HAPStatus.readOnly) } else {
            Issue.record("a read-only On was written")
        }

        let lock = try #require(BridgeModel.accessory(aid: 4, device: Self.device(.lock, ["lock"]), version: "0.2.0")).services[1].characteristics
        #expect(BridgeModel.value(lock[0], state: DeviceState(values: ["lock": .string("JAMMED")])) == .number(2))
        #expect(BridgeModel.value(lock[1], state: DeviceState(values: ["lock": .string("UNLOCKING")])) == .number(0))
        if case .success(let result) = BridgeModel.command(lock[1], value: .number(1), state: nil) { #expect(result?.1 == .string("LOCK")) }

        let contact = try #require(BridgeModel.accessory(aid: 5, device: Self.device(.sensor, ["contact", "battery_low"]), version: "0.2.0"))
        #expect(BridgeModel.value(contact.services[1].characteristics[0], state: DeviceState(values: ["contact": .bool(true)])) == .number(0), "closed is 0")
    }

    @Test func setupCodesAndPayload() {
        #expect(HomeKitBridgeSettings.isForbidden("111-11-111") && HomeKitBridgeSettings.isForbidden("123-45-678") && HomeKitBridgeSettings.isForbidden("876-54-321"))
        #expect(!HomeKitBridgeSettings.isForbidden("482-19-573"))
        let uri = HomeKitBridgeSettings.setupURI(code: "482-19-573")
        // The payload HAP-python computes for category 2 and this code (its xhm_uri).
        #expect(uri.hasPrefix("X-HM://00249N2K5") && uri.count == 7 + 9 + 4, "\(uri)")
        #expect(uri.hasSuffix(HomeKitBridgeSettings.setupID(for: "482-19-573")))
        let record = BridgeAdvertiser.record(configNumber: 3, paired: false, deviceID: "AA:BB:CC:DD:EE:FF", setupID: "ABCD", model: "LBS Gateway")
        #expect(record.contains("sf=1") && record.contains("ci=2") && record.contains("c#=3") && record.contains { $0.hasPrefix("sh=") })
    }
}
