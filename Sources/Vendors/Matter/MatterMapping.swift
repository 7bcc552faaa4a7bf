#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif
import GatewayModel

/// Where one published key lives on a node: its endpoint, and the key it is there (`state_2` is `state` on 2).
struct MatterRoute: Sendable, Hashable {
    var endpoint: Int
    var key: String
}

/// What one node becomes: one device for the node, and one per bridged endpoint of a bridge.
struct MatterDevicePlan: Sendable {
    var device: Device
    var state: [String: StateValue]
    var online: Bool
    /// Published key → endpoint and plain key, for commands.
    var routes: [String: MatterRoute]
    /// Endpoints whose Generic Switch events belong to this device.
    var switchEndpoints: Set<Int>
}

/// Matter attributes (`endpoint/cluster/attribute`) → the gateway's devices and keys. Pure: tested on the
/// recorded node dumps. Unknown clusters are ignored; null and undecodable values are left out.
enum MatterMapping {
    // Device types (Matter Device Library), decimal as the Descriptor cluster reports them.
    static let rootNode = 0x0016, powerSource = 0x0011, otaRequestor = 0x0012, otaProvider = 0x0014
    static let aggregator = 0x000E, bridgedNode = 0x0013, electricalSensor = 0x0510
    static let contactSensor = 0x0015, waterLeakDetector = 0x0043
    /// Device types that say nothing about what the device is.
    static let utilityTypes: Set<Int> = [rootNode, powerSource, otaRequestor, otaProvider, aggregator, bridgedNode, electricalSensor, 0x050D, 0x0011]
    static let evse = 0x050C, waterHeater = 0x050F
    /// Appliances (Matter Device Library): refrigerator, temperature controlled cabinet, laundry washer, robotic
    /// vacuum, dishwasher, cook surface, cooktop, microwave, extractor hood, oven, laundry dryer, heat pump, solar
    /// power, battery storage. Their temperatures are their own, not the room's.
    static let applianceTypes: Set<Int> = [0x0070, 0x0071, 0x0073, 0x0074, 0x0075, 0x0077, 0x0078, 0x0079, 0x007A, 0x007B, 0x007C, 0x0309, 0x0017, 0x0018]
    /// On/off-only types: a LevelControl cluster on them is not a dimmer (Home Assistant ignores it too).
    static let onOffOnlyTypes: Set<Int> = [0x0100, 0x010A, 0x0103]

    static func deviceType(for types: [Int]) -> DeviceType {
        for type in types where !utilityTypes.contains(type) {
            switch type {
            case 0x0100, 0x0101, 0x010C, 0x010D: return .light
            case 0x010A, 0x010B: return .plug
            case 0x0103, 0x0104, 0x0105: return .switch
            case 0x000A: return .lock
            case 0x0202: return .cover
            case 0x0301, 0x0072: return .thermostat
            case evse: return .evCharger
            case waterHeater: return .waterHeater
            case let type where applianceTypes.contains(type): return .appliance
            case 0x002B: return .fan
            case 0x0107: return .motionSensor
            case 0x002C: return .airQuality
            case 0x000F: return .button
            case 0x0302, 0x0305, 0x0307, 0x0106, contactSensor, waterLeakDetector, 0x0076, 0x0041, 0x0044: return .sensor
            default: continue
            }
        }
        return .sensor
    }

    /// The endpoints present in the node's attributes, ascending.
    static func endpoints(of node: MatterNode) -> [Int] {
        Set(node.attributes.keys.compactMap { path in path.split(separator: "/").first.flatMap { Int($0) } }).sorted()
    }

    /// Device types of an endpoint (Descriptor 29/0: `[{"0": type, "1": revision}]`).
    static func deviceTypes(_ node: MatterNode, _ endpoint: Int) -> [Int] {
        (node.value(endpoint, 29, 0)?.array ?? []).compactMap { $0[field: 0]?.integer.map(Int.init) }
    }

    static func partsList(_ node: MatterNode, _ endpoint: Int) -> [Int] {
        (node.value(endpoint, 29, 3)?.array ?? []).compactMap { $0.integer.map(Int.init) }
    }

    static func hasCluster(_ node: MatterNode, _ endpoint: Int, _ cluster: Int) -> Bool {
        let prefix = "\(endpoint)/\(cluster)/"
        return node.attributes.keys.contains { $0.hasPrefix(prefix) }
    }

    // MARK: Devices

    static func plans(for node: MatterNode, vendorID: String) -> [MatterDevicePlan] {
        let all = endpoints(of: node)
        // A bridge's bridged endpoints (device type 0x0013) and the endpoints in their PartsList are devices of their own.
        var bridged: [(endpoint: Int, members: [Int])] = []
        var taken: Set<Int> = []
        for endpoint in all where deviceTypes(node, endpoint).contains(bridgedNode) {
            let members = ([endpoint] + partsList(node, endpoint)).filter { all.contains($0) && !taken.contains($0) }
            taken.formUnion(members)
            bridged.append((endpoint, Array(Set(members)).sorted()))
        }
        let nodeID = String(node.node_id)
        let nodeMembers = all.filter { !taken.contains($0) }
        var plans = [plan(node, vendorDeviceID: nodeID, endpoints: nodeMembers, info: nodeInfo(node), online: node.available, vendorID: vendorID, via: nil)]
        let bridgeID = plans[0].device.id
        for (endpoint, members) in bridged {
            let info = bridgedInfo(node, endpoint, bridgeName: plans[0].device.name)
            let reachable = node.value(endpoint, 57, 17)?.bool ?? true
            plans.append(plan(node, vendorDeviceID: "\(nodeID)_\(endpoint)", endpoints: members, info: info, online: node.available && reachable,
                              vendorID: vendorID, via: bridgeID))
        }
        return plans
    }

    struct Info {
        var name: String
        var manufacturer: String?
        var model: String?
        var serial: String?
        var firmware: String?
        var room: String?
    }

    static func text(_ value: MatterValue?) -> String? {
        guard let text = value?.string?.trimmingWhitespace(), !text.isEmpty else { return nil }
        return text
    }

    /// Basic Information (cluster 40 on endpoint 0): the node's label, else its product name.
    static func nodeInfo(_ node: MatterNode) -> Info {
        Info(name: text(node.value(0, 40, 5)) ?? text(node.value(0, 40, 3)) ?? "Matter node \(node.node_id)",
             manufacturer: text(node.value(0, 40, 1)), model: text(node.value(0, 40, 3)), serial: text(node.value(0, 40, 15)),
             firmware: text(node.value(0, 40, 10)), room: room(node, 0))
    }

    /// Bridged Device Basic Information (cluster 57 on the bridged endpoint).
    static func bridgedInfo(_ node: MatterNode, _ endpoint: Int, bridgeName: String) -> Info {
        Info(name: text(node.value(endpoint, 57, 5)) ?? text(node.value(endpoint, 57, 3)) ?? "\(bridgeName) \(endpoint)",
             manufacturer: text(node.value(endpoint, 57, 1)), model: text(node.value(endpoint, 57, 3)), serial: text(node.value(endpoint, 57, 15)),
             firmware: text(node.value(endpoint, 57, 10)), room: room(node, endpoint))
    }

    /// A `room` label in the endpoint's User Label (65) or Fixed Label (64) list: `[{"0": label, "1": value}]`.
    static func room(_ node: MatterNode, _ endpoint: Int) -> String? {
        for cluster in [65, 64] {
            for entry in node.value(endpoint, cluster, 0)?.array ?? [] where entry[field: 0]?.string?.lowercased() == "room" {
                if let value = text(entry[field: 1]) { return value }
            }
        }
        return nil
    }

    static func plan(_ node: MatterNode, vendorDeviceID: String, endpoints: [Int], info: Info, online: Bool, vendorID: String,
                     via: DeviceID?) -> MatterDevicePlan {
        var state: [String: StateValue] = [:]
        var keys: [String] = []
        var routes: [String: MatterRoute] = [:]
        var writable: Set<String> = []
        var limits: [String: KeyLimits] = [:]
        var switches: Set<Int> = []
        var types: [Int] = []
        for endpoint in endpoints {
            let endpointTypes = deviceTypes(node, endpoint)
            types += endpointTypes
            if hasCluster(node, endpoint, 59) { switches.insert(endpoint) }
            for reading in readings(node, endpoint, types: endpointTypes) {
                // The lowest endpoint with a key has it plain; the others get `_<endpoint>`. On one endpoint the first
                // cluster giving a key wins (a thermostat's own temperature over a temperature sensor's).
                if routes.values.contains(MatterRoute(endpoint: endpoint, key: reading.key)) { continue }
                let name = routes[reading.key] == nil ? reading.key : "\(reading.key)_\(endpoint)"
                guard routes[name] == nil else { continue }
                routes[name] = MatterRoute(endpoint: endpoint, key: reading.key)
                keys.append(name)
                if let value = reading.value { state[name] = value }
                if reading.writable { writable.insert(name) }
                if let limit = reading.limits { limits[name] = limit }
            }
        }
        let device = Device(
            vendorID: vendorID, vendorDeviceID: vendorDeviceID, name: info.name, type: deviceType(for: types), manufacturer: info.manufacturer,
            model: info.model, room: info.room, swVersion: info.firmware, serialNumber: info.serial, writableKeys: writable, keys: keys,
            eventTypes: switches.isEmpty ? nil : switchEvents.sorted { $0.key < $1.key }.map(\.value), viaDevice: via,
            limits: limits.isEmpty ? nil : limits
        )
        return MatterDevicePlan(device: device, state: state, online: online, routes: routes, switchEndpoints: switches)
    }

    // MARK: Attributes → keys

    struct Reading {
        var key: String
        /// nil: the device has the key but its value is unknown (null) for now.
        var value: StateValue?
        var writable = false
        /// The node's own range or words for the key, where it narrows the registry's.
        var limits: KeyLimits?
    }

    /// The keys one endpoint reports, in display order, with their current values.
    static func readings(_ node: MatterNode, _ endpoint: Int, types: [Int]) -> [Reading] {
        var out: [Reading] = []
        func has(_ cluster: Int) -> Bool { hasCluster(node, endpoint, cluster) }
        func value(_ cluster: Int, _ attribute: Int) -> MatterValue? { node.value(endpoint, cluster, attribute) }
        func present(_ cluster: Int, _ attribute: Int) -> Bool { node.attributes["\(endpoint)/\(cluster)/\(attribute)"] != nil }
        if has(6) {
            out.append(Reading(key: "state", value: value(6, 0)?.bool.map { .string($0 ? "ON" : "OFF") }, writable: true))
        }
        if has(153) {
            // Energy EVSE: `state` is whether charging is enabled (SupplyState ChargingEnabled or Enabled), as on other
            // chargers; `charging_state` the session (State); `supply_state` SupplyState in words.
            let supply = value(153, 1)?.integer
            out.append(Reading(key: "state", value: supply.map { .string(chargingEnabled($0) ? "ON" : "OFF") }, writable: true))
            out.append(Reading(key: "charging_state", value: value(153, 0)?.integer.flatMap(evseState).map(StateValue.string)))
            out.append(Reading(key: "supply_state", value: supply.flatMap(supplyState).map(StateValue.string)))
            if present(153, 7) {
                // The current the EVSE offers the car (MaximumChargeCurrent, mA), set through EnableCharging. Its range is
                // the EVSE's own: MinimumChargeCurrent … the lower of CircuitCapacity and UserMaximumChargeCurrent.
                let amps = value(153, 7)?.number.map { StateValue.number(round3($0 / 1000)) }
                let low = value(153, 6)?.number.map { $0 / 1000 }
                let high = [value(153, 5)?.number, value(153, 9)?.number].compactMap { $0 }.filter { $0 > 0 }.min().map { $0 / 1000 }
                out.append(Reading(key: "charging_current", value: amps, writable: true, limits: KeyLimits(min: low, max: high)))
            }
        }
        if has(8), has(6), types.allSatisfy({ !onOffOnlyTypes.contains($0) }) {
            out.append(Reading(key: "brightness", value: value(8, 0)?.number.map { .number((min(max($0, 0), 254) / 254 * 100).rounded()) }, writable: true))
        }
        if has(768), colorTemperatureCapable(node, endpoint) {
            let kelvin = value(768, 7)?.number.flatMap { $0 > 0 ? StateValue.finite((1_000_000 / $0).rounded()) : nil }
            out.append(Reading(key: "color_temp_kelvin", value: kelvin, writable: true))
        }
        if has(768), let capabilities = value(768, 16394)?.integer, capabilities & 0b1001 != 0 {
            // Hue/saturation (bit 0) and x/y (bit 3): hue 0–254 → 0–360°, saturation 0–254 → %, x/y in 1/65536.
            var parts: [String: StateValue] = [:]
            if capabilities & 0b1 != 0 {
                if let hue = value(768, 0)?.number { parts["hue"] = .number((min(max(hue, 0), 254) / 254 * 360).rounded()) }
                if let saturation = value(768, 1)?.number { parts["saturation"] = .number((min(max(saturation, 0), 254) / 254 * 100).rounded()) }
            }
            if capabilities & 0b1000 != 0 {
                if let x = value(768, 3)?.number { parts["x"] = .number((x / 65536 * 10000).rounded() / 10000) }
                if let y = value(768, 4)?.number { parts["y"] = .number((y / 65536 * 10000).rounded() / 10000) }
            }
            // Home Assistant's JSON light reads `h`/`s`; both spellings are published, as zigbee2mqtt does.
            if let hue = parts["hue"], let saturation = parts["saturation"] {
                parts["h"] = hue
                parts["s"] = saturation
            }
            out.append(Reading(key: "color", value: parts.isEmpty ? nil : .object(parts), writable: true))
            let modes: [Int64: String] = [0: "hs", 1: "xy", 2: "color_temp"]
            out.append(Reading(key: "color_mode", value: value(768, 8)?.integer.flatMap { modes[$0] }.map(StateValue.string)))
        }
        if has(257) {
            out.append(Reading(key: "lock", value: value(257, 0)?.integer.flatMap(lockState), writable: true))
        }
        if has(258) {
            let position = value(258, 14)?.number.map { 100 - (min(max($0, 0), 10000) / 100).rounded() }
            out.append(Reading(key: "cover", value: coverState(position: position, status: value(258, 10)?.integer), writable: true))
            out.append(Reading(key: "position", value: position.map(StateValue.number), writable: true))
        }
        if has(513) {
            out.append(Reading(key: "temperature", value: hundredths(value(513, 0))))
            let mode = value(513, 28)?.integer
            let cooling = (mode == 3 || mode == 6) && value(513, 17) != nil
            out.append(Reading(key: "target_temperature", value: hundredths(cooling ? value(513, 17) : value(513, 18) ?? value(513, 17)), writable: true))
            out.append(Reading(key: "hvac_mode", value: mode.flatMap(hvacMode).map(StateValue.string), writable: true))
        }
        if has(514) {
            let mode = value(514, 0)?.integer.flatMap(fanMode)
            out.append(Reading(key: "fan_mode", value: mode.map(StateValue.string), writable: true,
                               limits: value(514, 1)?.integer.flatMap(fanModes(sequence:)).map { KeyLimits(options: $0 + (mode == "smart" ? ["smart"] : [])) }))
            let percent = value(514, 3)?.number ?? value(514, 2)?.number
            out.append(Reading(key: "fan_speed", value: percent.flatMap { $0 <= 100 ? .number($0) : nil }, writable: true))
        }
        if has(1026) { out.append(Reading(key: "temperature", value: hundredths(value(1026, 0)))) }
        if has(1029) { out.append(Reading(key: "humidity", value: hundredths(value(1029, 0)))) }
        if has(1030) { out.append(Reading(key: "motion", value: value(1030, 0)?.integer.map { .bool($0 & 1 == 1) })) }
        if has(1024) { out.append(Reading(key: "illuminance", value: value(1024, 0)?.number.flatMap { .finite(lux($0)) })) }
        if has(69) {
            let detected = value(69, 0)?.bool
            if types.contains(contactSensor) {
                out.append(Reading(key: "contact", value: detected.map(StateValue.bool)))
            } else if types.contains(waterLeakDetector) {
                out.append(Reading(key: "water_leak", value: detected.map(StateValue.bool)))
            }
        }
        if has(92) {
            if value(92, 1) != nil { out.append(Reading(key: "smoke", value: value(92, 1)?.integer.map { .bool($0 > 0) })) }
            if value(92, 2) != nil { out.append(Reading(key: "carbon_monoxide", value: value(92, 2)?.integer.map { .bool($0 > 0) })) }
        }
        if has(1036) { out.append(Reading(key: "co", value: concentration(value(1036, 0), unit: value(1036, 8)?.integer, as: .ppm))) }
        if has(1037) { out.append(Reading(key: "co2", value: concentration(value(1037, 0), unit: value(1037, 8)?.integer, as: .ppm))) }
        if has(1066) { out.append(Reading(key: "pm25", value: concentration(value(1066, 0), unit: value(1066, 8)?.integer, as: .microgramsPerCubicMetre))) }
        if has(1069) { out.append(Reading(key: "pm10", value: concentration(value(1069, 0), unit: value(1069, 8)?.integer, as: .microgramsPerCubicMetre))) }
        if has(1070) {
            // TVOC: µg/m³ as `voc`, parts (ppm, ppb) as `voc_ppb`.
            let unit = value(1070, 8)?.integer ?? 1
            if unit == 3 || unit == 4 {
                out.append(Reading(key: "voc", value: concentration(value(1070, 0), unit: unit, as: .microgramsPerCubicMetre)))
            } else {
                out.append(Reading(key: "voc_ppb", value: concentration(value(1070, 0), unit: unit, as: .ppb)))
            }
        }
        if has(91) { out.append(Reading(key: "air_quality", value: value(91, 0)?.integer.flatMap(airQuality).map(StateValue.string))) }
        if has(144) {
            out.append(Reading(key: "power", value: scaled(value(144, 8), by: 0.001)))
            if value(144, 4) != nil { out.append(Reading(key: "voltage", value: scaled(value(144, 4), by: 0.001))) }
            if value(144, 5) != nil { out.append(Reading(key: "current", value: scaled(value(144, 5), by: 0.001))) }
        }
        if has(145) {
            let milliwattHours = value(145, 1)?[field: 0]?.number
            out.append(Reading(key: "energy", value: milliwattHours.map { .number(round3($0 / 1_000_000)) }))
        }
        if has(2820) {
            // The older ElectricalMeasurement cluster: value × multiplier / divisor.
            func measured(_ attribute: Int, _ multiplier: Int, _ divisor: Int) -> StateValue? {
                guard let raw = value(2820, attribute)?.number else { return nil }
                let times = value(2820, multiplier)?.number ?? 1
                let over = value(2820, divisor)?.number ?? 1
                guard over != 0 else { return nil }
                return .finite(round3(raw * times / over))
            }
            if !has(144) {
                out.append(Reading(key: "power", value: measured(1291, 1540, 1541)))
                if value(2820, 1285) != nil { out.append(Reading(key: "voltage", value: measured(1285, 1536, 1537))) }
                if value(2820, 1288) != nil { out.append(Reading(key: "current", value: measured(1288, 1538, 1539))) }
            }
        }
        if has(eveCluster), !has(144), !has(2820) {
            // Eve's own cluster (Eve Energy): Home Assistant reads power from it too; the standard clusters win. Only
            // where the node has the attribute: Eve's thermostats and sensors carry the cluster without it.
            if present(eveCluster, 0x130A_000A) {
                out.append(Reading(key: "power", value: value(eveCluster, 0x130A_000A)?.number.map { .number(round3($0)) }))
            }
            if value(eveCluster, 0x130A_0008) != nil { out.append(Reading(key: "voltage", value: value(eveCluster, 0x130A_0008)?.number.map { .number(round3($0)) })) }
            if value(eveCluster, 0x130A_0009) != nil { out.append(Reading(key: "current", value: value(eveCluster, 0x130A_0009)?.number.map { .number(round3($0)) })) }
            if value(eveCluster, 0x130A_000B) != nil { out.append(Reading(key: "energy", value: value(eveCluster, 0x130A_000B)?.number.map { .number(round3($0)) })) }
        }
        if has(47), let remaining = value(47, 12)?.number {
            out.append(Reading(key: "battery", value: .number((min(max(remaining, 0), 200) / 2).rounded())))
        }
        return out
    }

    /// Eve's manufacturer cluster 0x130AFC01: voltage (V), current (A), power (W) and energy (kWh) as floats.
    static let eveCluster = 0x130A_FC01

    static func colorTemperatureCapable(_ node: MatterNode, _ endpoint: Int) -> Bool {
        // ColorCapabilities (768/16394) bit 4 is colour temperature; without it, the attribute's presence decides.
        if let capabilities = node.value(endpoint, 768, 16394)?.integer { return capabilities & 0x10 != 0 }
        return node.attributes["\(endpoint)/768/7"] != nil
    }

    static func hundredths(_ value: MatterValue?) -> StateValue? { value?.number.map { .number(round3($0 / 100)) } }

    static func scaled(_ value: MatterValue?, by factor: Double) -> StateValue? { value?.number.map { .number(round3($0 * factor)) } }

    static func round3(_ value: Double) -> Double { value.rounded(places: 3) }

    /// Illuminance MeasuredValue is 10,000 × log10(lx) + 1; 0 means too dark to measure.
    static func lux(_ measured: Double) -> Double {
        measured <= 0 ? 0 : pow(10, (measured - 1) / 10000).rounded()
    }

    static func lockState(_ raw: Int64) -> StateValue? {
        switch raw {
        case 0: .string("JAMMED")
        case 1: .string("LOCKED")
        case 2, 3: .string("UNLOCKED")
        default: nil
        }
    }

    /// Ours: position 100 = open. Moving (OperationalStatus bits 0–1: 1 opening, 2 closing) wins; at rest a cover
    /// at 0 is closed, anything else open (Home Assistant's way).
    static func coverState(position: Double?, status: Int64?) -> StateValue? {
        switch (status ?? 0) & 0b11 {
        case 1: return .string("OPENING")
        case 2: return .string("CLOSING")
        default: return position.map { .string($0 <= 0 ? "CLOSED" : "OPEN") }
        }
    }

    static let hvacModes: [Int64: String] = [0: "off", 1: "auto", 3: "cool", 4: "heat", 5: "heat", 6: "cool", 7: "fan_only", 8: "dry"]
    static func hvacMode(_ raw: Int64) -> String? { hvacModes[raw] }
    static let systemModes: [String: Int64] = ["off": 0, "auto": 1, "cool": 3, "heat": 4, "fan_only": 7, "dry": 8]

    static let fanModes = ["off", "low", "medium", "high", "on", "auto", "smart"]
    static func fanMode(_ raw: Int64) -> String? { raw >= 0 && raw < fanModes.count ? fanModes[Int(raw)] : nil }

    /// The modes a fan has (FanModeSequence 514/1: 0 Off/Low/Med/High, 1 Off/Low/High, 2 Off/Low/Med/High/Auto,
    /// 3 Off/Low/High/Auto, 4 Off/High/Auto, 5 Off/High); `on` (the device's choice of speed) is always accepted.
    static func fanModes(sequence: Int64) -> [String]? {
        switch sequence {
        case 0: ["off", "low", "medium", "high", "on"]
        case 1: ["off", "low", "high", "on"]
        case 2: ["off", "low", "medium", "high", "on", "auto"]
        case 3: ["off", "low", "high", "on", "auto"]
        case 4: ["off", "high", "on", "auto"]
        case 5: ["off", "high", "on"]
        default: nil
        }
    }

    /// Energy EVSE State (0x0099/0) and SupplyState (0x0099/1).
    static let evseStates = ["not_plugged_in", "plugged_in_no_demand", "plugged_in_demand", "charging", "discharging", "session_ending", "fault"]
    static func evseState(_ raw: Int64) -> String? { raw >= 0 && raw < evseStates.count ? evseStates[Int(raw)] : nil }
    static let supplyStates = ["disabled", "charging_enabled", "discharging_enabled", "disabled_error", "disabled_diagnostics", "enabled"]
    static func supplyState(_ raw: Int64) -> String? { raw >= 0 && raw < supplyStates.count ? supplyStates[Int(raw)] : nil }
    /// ChargingEnabled (1) or Enabled (5: charging and discharging).
    static func chargingEnabled(_ supply: Int64) -> Bool { supply == 1 || supply == 5 }

    static let airQualities = ["unknown", "good", "fair", "moderate", "poor", "very_poor", "extremely_poor"]
    static func airQuality(_ raw: Int64) -> String? { raw >= 0 && raw < airQualities.count ? airQualities[Int(raw)] : nil }

    enum ConcentrationUnit { case ppm, ppb, microgramsPerCubicMetre }

    /// A concentration cluster's MeasuredValue in its MeasurementUnit (8): 0 ppm, 1 ppb, 2 ppt, 3 mg/m³, 4 µg/m³,
    /// 5 ng/m³; converted to ours, or left out when it cannot be (parts into a mass or the other way).
    static func concentration(_ value: MatterValue?, unit: Int64?, as wanted: ConcentrationUnit) -> StateValue? {
        guard let raw = value?.number else { return nil }
        let converted: Double? = switch (wanted, unit ?? (wanted == .microgramsPerCubicMetre ? 4 : wanted == .ppm ? 0 : 1)) {
        case (.ppm, 0): raw
        case (.ppm, 1): raw / 1000
        case (.ppm, 2): raw / 1_000_000
        case (.ppb, 0): raw * 1000
        case (.ppb, 1): raw
        case (.ppb, 2): raw / 1000
        case (.microgramsPerCubicMetre, 3): raw * 1000
        case (.microgramsPerCubicMetre, 4): raw
        case (.microgramsPerCubicMetre, 5): raw / 1000
        default: nil
        }
        return converted.flatMap { .finite(round3($0)) }
    }

    // MARK: Generic Switch events (cluster 59)

    static let switchEvents: [Int: String] = [
        0: "switch_latched", 1: "initial_press", 2: "long_press", 3: "short_release", 4: "long_release",
        5: "multi_press_ongoing", 6: "multi_press_complete",
    ]
}
