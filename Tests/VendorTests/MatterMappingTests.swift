import Foundation
import GatewayModel
import GatewayTesting
import Testing
import VendorKit
@testable import VendorMatter

/// Every recorded node dump (Home Assistant's Matter fixtures) mapped to devices and keys, with the published
/// values checked against the attributes in the file.
@Suite struct MatterMappingTests {
    static func node(_ file: String) throws -> MatterNode {
        let dump = try JSONDecoder().decode(MatterValue.self, from: Data(contentsOf: URL(fileURLWithPath: Fixtures.path("matter", "nodes/\(file).json"))))
        return try #require(MatterNode(dump), "\(file) is a node")
    }

    static func plans(_ file: String) throws -> [MatterDevicePlan] { MatterMapping.plans(for: try node(file), vendorID: "matter") }

    static func only(_ file: String) throws -> MatterDevicePlan {
        let plans = try plans(file)
        #expect(plans.count == 1, "\(file): one device")
        return try #require(plans.first)
    }

    @Test func everyFixtureMapsWithoutError() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Fixtures.path("matter", "nodes")).filter { $0.hasSuffix(".json") }
        #expect(files.count == 16)
        for file in files {
            let plans = try Self.plans(String(file.dropLast(5)))
            #expect(!plans.isEmpty, "\(file)")
            for plan in plans {
                for key in plan.device.keys { #expect(StateKeys.spec(key) != nil, "\(file): \(key) is a registered key") }
                for (key, value) in plan.state {
                    #expect(plan.device.keys.contains(key), "\(file): \(key) is announced")
                    if case .number(let number) = value { #expect(number.isFinite, "\(file): \(key)") }
                }
            }
        }
    }

    @Test func lightsFromTheirLevelAndColourTemperature() throws {
        let ct = try Self.only("color_temperature_light")
        #expect(ct.device.id.rawValue == "matter_5" && ct.device.type == .light && ct.device.manufacturer == "Signify")
        // 8/0 = 128 → 50 %; 768/7 = 284 mireds → 3521 K.
        #expect(ct.state == ["state": .string("ON"), "brightness": .number(50), "color_temp_kelvin": .number(3521)])
        #expect(ct.device.isWritable("brightness") && ct.device.isWritable("color_temp_kelvin"))
        let dimmable = try Self.only("mock_dimmable_light")
        #expect(dimmable.state == ["state": .string("ON"), "brightness": .number(20)])
        // An on/off light with a LevelControl cluster is not a dimmer (Home Assistant agrees).
        let onOff = try Self.only("onoff_light_with_levelcontrol_present")
        #expect(onOff.state == ["state": .string("OFF")] && !onOff.device.keys.contains("brightness"))
        #expect(onOff.device.name == "D215S" || onOff.device.model == "D215S")
        let extended = try Self.only("extended_color_light")
        #expect(extended.state["color_temp_kelvin"] == .number(3521) && extended.state["brightness"] == .number(50))
        // 768/0 hue 36 of 254 → 51°, 768/1 saturation 51 → 20 %, x 26515 / 65536 → 0.4046, y 25657 → 0.3915; mode 0 = hs.
        #expect(extended.state["color"] == .object(["hue": .number(51), "saturation": .number(20), "h": .number(51), "s": .number(20),
                                                    "x": .number(0.4046), "y": .number(0.3915)]))
        #expect(extended.state["color_mode"] == .string("hs") && extended.device.isWritable("color"))
        #expect(!ct.device.keys.contains("color"), "a colour-temperature light has no colour")
    }

    @Test func aLockAShutterAThermostatAndAFan() throws {
        let lock = try Self.only("aqara_u200")
        #expect(lock.device.type == .lock && lock.state == ["lock": .string("LOCKED"), "battery": .number(40)])
        #expect(lock.device.name == "Aqara Smart Lock U200" && lock.device.serialNumber == "54EF441000D94666" && lock.device.swVersion == "077")
        #expect(lock.routes["lock"] == MatterRoute(endpoint: 1, key: "lock") && lock.routes["battery"]?.endpoint == 2)
        let shutter = try Self.only("eve_shutter")
        // 258/14 = 0: Matter's fully open is our 100.
        #expect(shutter.device.type == .cover && shutter.state == ["cover": .string("OPEN"), "position": .number(100)])
        let thermostat = try Self.only("eve_thermo_v5")
        #expect(thermostat.device.type == .thermostat)
        #expect(thermostat.state == ["temperature": .number(16.2), "target_temperature": .number(17.5), "hvac_mode": .string("heat"), "battery": .number(100)])
        let fan = try Self.only("silabs_fan")
        #expect(fan.device.type == .fan && fan.state == ["fan_mode": .string("low"), "fan_speed": .number(30)])
    }

    @Test func sensorsInTheirUnits() throws {
        let motion = try Self.only("aqara_motion_p2")
        // 2/1024/0 = 15683 → 10^((15683 − 1) / 10000) = 37 lx; 3/47/12 = 100 → 50 %.
        #expect(motion.device.type == .motionSensor && motion.state == ["motion": .bool(false), "illuminance": .number(37), "battery": .number(50)])
        let weather = try Self.only("eve_weather_sensor")
        #expect(weather.state == ["temperature": .number(16.03), "humidity": .number(80.66), "battery": .number(100)])
        let contact = try Self.only("eve_contact_sensor")
        #expect(contact.state == ["contact": .bool(false), "battery": .number(100)])
        let air = try Self.only("ikea_air_quality_monitor")
        #expect(air.device.type == .airQuality)
        #expect(air.state == ["state": .string("ON"), "temperature": .number(19.71), "humidity": .number(46.21), "co2": .number(394),
                              "pm25": .number(0), "air_quality": .string("good")])
        let plug = try Self.only("eve_energy_plug")
        #expect(plug.device.type == .plug)
        #expect(plug.state == ["state": .string("OFF"), "power": .number(0), "voltage": .number(238.8), "current": .number(0), "energy": .number(0.22)])
    }

    /// Home Assistant's recorded Silabs EVSE (Energy EVSE 0x0099 on endpoint 1, with Electrical Power and Energy
    /// Measurement 0x0090/0x0091 whose values are null in the recording): an EV charger whose `state` is whether
    /// charging is enabled (SupplyState 1), `charging_state` the EVSE's State (3 PluggedInCharging), `supply_state`
    /// SupplyState in words; `power` and `energy` announced without values until the node reports them.
    @Test func anEVSEIsAChargerWithItsSupplyChargingStateAndPower() throws {
        let plan = try Self.only("silabs_evse_charging")
        #expect(plan.device.type == .evCharger && plan.device.name == "evse" && plan.device.model == "evse" && plan.device.manufacturer == "Silabs")
        #expect(plan.device.keys == ["state", "charging_state", "supply_state", "charging_current", "power", "energy"])
        #expect(plan.device.writableKeys == ["state", "charging_current"])
        #expect(plan.state == ["state": .string("ON"), "charging_state": .string("charging"), "supply_state": .string("charging_enabled"),
                               "charging_current": .number(30)])
        // MaximumChargeCurrent 30 A, within the EVSE's own range: MinimumChargeCurrent 2 A … CircuitCapacity 32 A.
        #expect(plan.device.limits?["charging_current"] == KeyLimits(min: 2, max: 32))
        #expect(plan.device.spec("charging_current")?.kind == .number(min: 2, max: 32))
        #expect(plan.online)
        // Reported later: 0x0090 ActivePower in mW, 0x0091 CumulativeEnergyImported in mWh.
        var node = try Self.node("silabs_evse_charging")
        node.attributes["1/144/8"] = .int(7_360_000)
        node.attributes["1/145/1"] = .object(["0": .int(12_500_000)])
        node.attributes["1/153/0"] = .int(0)
        node.attributes["1/153/1"] = .int(0)
        let later = MatterMapping.plans(for: node, vendorID: "matter")[0]
        #expect(later.state == ["state": .string("OFF"), "charging_state": .string("not_plugged_in"), "supply_state": .string("disabled"),
                                "charging_current": .number(30), "power": .number(7360), "energy": .number(12.5)])
    }

    /// A node whose only application cluster is Energy EVSE is still a device (name, model, availability) with
    /// what maps from that cluster: nothing else is needed for a node to be published.
    @Test func aNodeWithOnlyTheEVSEClusterIsADevice() throws {
        let full = try Self.node("silabs_evse_charging")
        let attributes = full.attributes.filter { path, _ in
            path.hasPrefix("0/") || path.hasPrefix("1/29/") || path.hasPrefix("1/153/")
        }
        let node = MatterNode(node_id: full.node_id, available: true, attributes: attributes)
        let plans = MatterMapping.plans(for: node, vendorID: "matter")
        #expect(plans.count == 1)
        let plan = try #require(plans.first)
        #expect(plan.device.id.rawValue == "matter_23" && plan.device.name == "evse" && plan.device.model == "evse" && plan.online)
        #expect(plan.device.type == .evCharger)
        #expect(plan.device.keys == ["state", "charging_state", "supply_state", "charging_current"])
        for key in plan.device.keys { #expect(StateKeys.spec(key) != nil, "\(key) is a registered key") }
    }

    /// Enabling and disabling charging are Energy EVSE's EnableCharging and Disable, sent as Home Assistant sends them
    /// (a timed invoke of 3 s); EnableCharging without an end time (null) and with the EVSE's own current limits
    /// (MinimumChargeCurrent 0x0099/6, MaximumChargeCurrent 0x0099/7, in mA).
    @Test func chargingIsEnabledAndDisabledWithTheEVSECommands() throws {
        let plan = try Self.only("silabs_evse_charging")
        let node = try Self.node("silabs_evse_charging")
        #expect(try MatterCommands.calls(for: ["state": .string("OFF")], plan: plan, node: node)
            == [.command(endpoint: 1, cluster: 153, name: "Disable", payload: [:], timedMs: 3000)])
        let on = try MatterCommands.calls(for: ["state": .string("ON")], plan: plan, node: node)
        #expect(on.count == 1)
        guard case .command(let endpoint, let cluster, let name, let payload, let timed)? = on.first else {
            Issue.record("no command: \(on)")
            return
        }
        #expect(endpoint == 1 && cluster == 153 && name == "EnableCharging" && timed == 3000)
        #expect(payload["minimumChargeCurrent"] == .int(2000) && payload["maximumChargeCurrent"] == .int(30000))
        #expect(payload["chargingEnabledUntil"]?.value.render() == "null", "no end time")
        // TOGGLE follows SupplyState: charging is enabled in the recording, so it disables.
        #expect(try MatterCommands.calls(for: ["state": .string("TOGGLE")], plan: plan, node: node).first?.summary == "Disable on 1/153")
        #expect(throws: GatewayError.self) { try MatterCommands.calls(for: ["state": .string("MAYBE")], plan: plan, node: node) }
    }

    /// A request is written with whole integers: a node id past 2^53 reaches the server exactly, not rounded
    /// through a Double.
    @Test func requestsKeepSixtyFourBitNodeIDsWhole() {
        let args: MatterValue = .object([
            "node_id": .uint(UInt64.max), "endpoint_id": .int(-1), "value": .double(0.5), "name": .string("a\"b"),
            "payload": .object(["chargingEnabledUntil": .null, "on": .bool(true)]), "list": .array([.int(1), .int(2)]),
        ])
        #expect(args.render() == #"{"endpoint_id":-1,"list":[1,2],"name":"a\"b","node_id":18446744073709551615,"payload":{"chargingEnabledUntil":null,"on":true},"value":0.5}"#)
    }

    /// Appliances are typed by their Matter device type, not left as sensors: Home Assistant's recorded Silabs water
    /// heater (0x050F, with a Thermostat cluster whose LocalTemperature is the tank's 50 °C) is a `water_heater`.
    @Test func aWaterHeaterIsAWaterHeaterNotASensor() throws {
        let plan = try Self.only("silabs_water_heater")
        #expect(plan.device.type.rawValue == "water_heater")
        #expect(plan.state["temperature"] == .number(50) && plan.state["power"] == .number(23))
        let appliance = { (type: Int) in
            MatterMapping.deviceType(for: [0x050D, type]).rawValue
        }
        #expect(appliance(0x050C) == "ev_charger")
        #expect(appliance(0x050F) == "water_heater")
        for type in [0x0070, 0x0071, 0x0073, 0x0074, 0x0075, 0x0077, 0x0078, 0x0079, 0x007A, 0x007B, 0x007C, 0x0309, 0x0017, 0x0018] {
            #expect(appliance(type) == "appliance", "device type \(type)")
        }
        #expect(MatterMapping.deviceType(for: [0x0302]) == .sensor && MatterMapping.deviceType(for: [0x0301]) == .thermostat)
    }

    @Test func aBridgesBridgedEndpointIsADeviceOfItsOwn() throws {
        let plans = try Self.plans("fritz_bridge")
        #expect(plans.map(\.device.id.rawValue) == ["matter_1", "matter_1_42"])
        let bridged = plans[1]
        #expect(bridged.device.name == "my_device" && bridged.device.viaDevice?.rawValue == "matter_1")
        // Endpoints 40 (on/off plug) and 41 (temperature) are in 42's PartsList.
        #expect(bridged.state == ["state": .string("OFF"), "temperature": .number(0)])
        #expect(bridged.routes["state"]?.endpoint == 40 && bridged.routes["temperature"]?.endpoint == 41)
        #expect(!bridged.online, "Reachable (57/17) is false")
        #expect(plans[0].online && plans[0].device.manufacturer == "AVM")
    }

    @Test func aSecondEndpointWithTheSameClusterGetsItsNumber() throws {
        var node = MatterNode(node_id: 7, available: true, attributes: [
            "0/40/3": .string("Double plug"),
            "1/29/0": .array([.object(["0": .int(0x010A), "1": .int(1)])]), "1/6/0": .bool(true),
            "2/29/0": .array([.object(["0": .int(0x010A), "1": .int(1)])]), "2/6/0": .bool(false),
            "3/29/0": .array([.object(["0": .int(0x0043), "1": .int(1)])]), "3/69/0": .bool(true),
            "4/29/0": .array([.object(["0": .int(0x0510), "1": .int(1)])]), "4/144/8": .int(12_345), "4/144/4": .int(230_100),
            "4/145/1": .object(["0": .int(1_500_000)]), "5/92/1": .int(0), "5/92/2": .int(2), "5/1036/0": .double(12.5),
            "6/2820/1291": .int(455), "6/2820/1540": .int(1), "6/2820/1541": .int(10),
        ])
        var plan = MatterMapping.plans(for: node, vendorID: "matter")[0]
        #expect(plan.device.keys.prefix(2) == ["state", "state_2"] && plan.routes["state_2"] == MatterRoute(endpoint: 2, key: "state"))
        #expect(plan.state["state"] == .string("ON") && plan.state["state_2"] == .string("OFF"))
        #expect(plan.state["water_leak"] == .bool(true) && plan.state["power"] == .number(12.345) && plan.state["voltage"] == .number(230.1))
        #expect(plan.state["energy"] == .number(1.5) && plan.state["smoke"] == .bool(false) && plan.state["carbon_monoxide"] == .bool(true))
        #expect(plan.state["co"] == .number(12.5) && plan.state["power_6"] == .number(45.5))
        #expect(StateKeys.spec("state_2")?.label == "State 2" && StateKeys.spec("state_2")?.writable == true)
        // A null value leaves the key out; the device keeps announcing it.
        node.attributes["1/6/0"] = .null
        plan = MatterMapping.plans(for: node, vendorID: "matter")[0]
        #expect(plan.state["state"] == nil && plan.device.keys.contains("state"))
    }

    @Test func negativeOrMissingIdsAreRefusedNotTrapped() {
        #expect(MatterNode(.object(["node_id": .int(-1), "attributes": .object([:])])) == nil)
        #expect(MatterNode(.object(["attributes": .object([:])])) == nil)
        #expect(MatterNode(.object(["node_id": .uint(UInt64.max), "available": .bool(true)]))?.node_id == UInt64.max)
        let vendor = MatterVendor(instanceID: "matter", options: MatterOptions(), sink: VendorEventSink { _ in }, context: VendorContext())
        #expect(vendor.handle(event: "node_removed", data: .int(-5)) == nil)
        #expect(vendor.handle(event: "attribute_updated", data: .array([.int(-1), .string("1/6/0"), .bool(true)])) == nil)
        #expect(vendor.handle(event: "node_event", data: .object(["node_id": .int(-2), "endpoint_id": .int(1), "cluster_id": .int(59), "event_id": .int(1)])) == nil)
    }

    @Test func commandsAreTheSpecificationsCommandsAndWrites() throws {
        let lock = try Self.only("aqara_u200")
        let lockNode = try Self.node("aqara_u200")
        #expect(try MatterCommands.calls(for: ["lock": .string("UNLOCK")], plan: lock, node: lockNode)
            == [.command(endpoint: 1, cluster: 257, name: "UnlockDoor", payload: [:], timedMs: 1000)])
        let light = try Self.only("color_temperature_light")
        let lightNode = try Self.node("color_temperature_light")
        #expect(try MatterCommands.calls(for: ["brightness": .number(100), "state": .string("ON"), "color_temp_kelvin": .number(2700)], plan: light, node: lightNode) == [
            .command(endpoint: 1, cluster: 6, name: "On", payload: [:], timedMs: nil),
            .command(endpoint: 1, cluster: 8, name: "MoveToLevelWithOnOff",
                     payload: ["level": .int(254), "transitionTime": .int(0), "optionsMask": .int(0), "optionsOverride": .int(0)], timedMs: nil),
            .command(endpoint: 1, cluster: 768, name: "MoveToColorTemperature",
                     payload: ["colorTemperatureMireds": .int(370), "transitionTime": .int(0), "optionsMask": .int(0), "optionsOverride": .int(0)], timedMs: nil),
        ])
        let extended = try Self.only("extended_color_light")
        #expect(try MatterCommands.calls(for: ["color": .object(["hue": .number(180), "saturation": .number(50)])], plan: extended,
                                         node: try Self.node("extended_color_light"))
            == [.command(endpoint: 1, cluster: 768, name: "MoveToHueAndSaturation",
                         payload: ["hue": .int(127), "saturation": .int(127), "transitionTime": .int(0), "optionsMask": .int(0), "optionsOverride": .int(0)],
                         timedMs: nil)])
        let shutter = try Self.only("eve_shutter")
        #expect(try MatterCommands.calls(for: ["position": .number(30)], plan: shutter, node: try Self.node("eve_shutter"))
            == [.command(endpoint: 1, cluster: 258, name: "GoToLiftPercentage", payload: ["liftPercent100thsValue": .int(7000)], timedMs: nil)])
        let thermostat = try Self.only("eve_thermo_v5")
        let thermoNode = try Self.node("eve_thermo_v5")
        #expect(try MatterCommands.calls(for: ["target_temperature": .number(21.5), "hvac_mode": .string("off")], plan: thermostat, node: thermoNode)
            == [.write(endpoint: 1, cluster: 513, attribute: 28, value: .int(0)), .write(endpoint: 1, cluster: 513, attribute: 18, value: .int(2150))])
        #expect(throws: GatewayError.self) { try MatterCommands.calls(for: ["lock": .string("OPEN")], plan: lock, node: lockNode) }
        // A PIN goes as the PINCode octets (base64); a lock that requires one is refused without it.
        #expect(try MatterCommands.calls(for: ["lock": .string("LOCK")], plan: lock, node: lockNode, pinCode: "1234")
            == [.command(endpoint: 1, cluster: 257, name: "LockDoor", payload: ["PINCode": .string("MTIzNA==")], timedMs: 1000)])
        var strict = lockNode
        strict.attributes["1/257/51"] = .bool(true)
        #expect(throws: GatewayError.self) { try MatterCommands.calls(for: ["lock": .string("LOCK")], plan: lock, node: strict) }
        #expect(throws: GatewayError.self) { try MatterCommands.calls(for: ["temperature": .number(3)], plan: thermostat, node: thermoNode) }
    }
}
