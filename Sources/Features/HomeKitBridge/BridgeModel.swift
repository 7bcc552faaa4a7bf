import GatewayModel
import HAP

/// How one served characteristic relates to the device's state.
enum BridgeSource: Sendable, Hashable {
    /// A fixed value (Accessory Information, display units).
    case constant(JSONValue)
    /// Identify: write-only, no state.
    case identify
    /// Read from (and, where the characteristic is writable, written to) a state key.
    case key(String, BridgeConversion)
}

/// The conversion between a state key and a HAP value.
enum BridgeConversion: Sendable, Hashable {
    case onOff, active, number, mired, hue, saturation
    case lockCurrent, lockTarget
    case coverPosition, coverTarget, positionState
    case doorCurrent, doorTarget
    case hvacCurrent, hvacTarget
    case contact, flag, lowBattery
    case airQuality, co2Detected
}

struct BridgeCharacteristic: Sendable, Hashable {
    var iid: Int
    var type: HAPType
    var format: String
    var perms: [String]
    var unit: String?
    var minValue: Double?
    var maxValue: Double?
    var minStep: Double?
    var validValues: [Int]?
    var source: BridgeSource

    var readable: Bool { perms.contains("pr") }
    var writable: Bool { perms.contains("pw") }
}

struct BridgeService: Sendable, Hashable {
    var iid: Int
    var type: HAPType
    var primary: Bool
    var characteristics: [BridgeCharacteristic]
}

/// One accessory the bridge serves: a gateway device (or the bridge itself, aid 1).
struct BridgedAccessory: Sendable, Hashable {
    var aid: Int
    var device: DeviceID?
    var services: [BridgeService]
    /// The home view it shows instead of a device (`energy_home`).
    var view: String? = nil

    func characteristic(_ iid: Int) -> BridgeCharacteristic? {
        for service in services { if let found = service.characteristics.first(where: { $0.iid == iid }) { return found } }
        return nil
    }
}

/// Gateway devices → HAP accessories, services and characteristics, by device type and keys; values both ways.
/// Instance ids are fixed per service type and characteristic (a block of 16 per service type), so they never move
/// when a device gains or loses a key: controllers keep them across restarts.
enum BridgeModel {
    /// Each service type's block; its iid is `block * 16 + 1`, its characteristics' follow.
    enum Block: Int {
        case information = 0, protocolInformation, lightbulb, switchService, outlet, lock, windowCovering, garageDoor, thermostat, fan
        case temperature, humidity, co2, airQuality, light, motion, occupancy, contact, leak, smoke, carbonMonoxide, battery, consumption
    }

    static func iid(_ block: Block, _ offset: Int) -> Int { block.rawValue * 16 + 1 + offset }

    static let eveConsumption = HAPType("E863F008-079E-48FF-8F27-9C2605A29F52") ?? HAPType(apple: "0")
    static let evePower = HAPType("E863F10D-079E-48FF-8F27-9C2605A29F52") ?? HAPType(apple: "0")
    static let eveEnergy = HAPType("E863F10C-079E-48FF-8F27-9C2605A29F52") ?? HAPType(apple: "0")
    static let eveVoltage = HAPType("E863F10A-079E-48FF-8F27-9C2605A29F52") ?? HAPType(apple: "0")
    static let eveCurrent = HAPType("E863F126-079E-48FF-8F27-9C2605A29F52") ?? HAPType(apple: "0")

    static let readNotify = ["pr", "ev"]
    static let readWriteNotify = ["pr", "pw", "ev"]

    static func characteristic(_ block: Block, _ offset: Int, _ type: String, _ format: String, _ perms: [String], _ source: BridgeSource,
                               unit: String? = nil, min: Double? = nil, max: Double? = nil, step: Double? = nil, valid: [Int]? = nil) -> BridgeCharacteristic {
        BridgeCharacteristic(iid: iid(block, offset), type: HAPType(apple: type), format: format, perms: perms, unit: unit, minValue: min, maxValue: max,
                             minStep: step, validValues: valid, source: source)
    }

    static func information(name: String, manufacturer: String, model: String, serial: String, firmware: String) -> BridgeService {
        let block = Block.information
        return BridgeService(iid: iid(block, 0), type: HAPType(apple: "3E"), primary: false, characteristics: [
            characteristic(block, 1, "14", "bool", ["pw"], .identify),
            characteristic(block, 2, "20", "string", ["pr"], .constant(.string(clip(manufacturer)))),
            characteristic(block, 3, "21", "string", ["pr"], .constant(.string(clip(model)))),
            characteristic(block, 4, "23", "string", ["pr"], .constant(.string(clip(name)))),
            characteristic(block, 5, "30", "string", ["pr"], .constant(.string(clip(serial)))),
            characteristic(block, 6, "52", "string", ["pr"], .constant(.string(firmware))),
        ])
    }

    /// HAP strings are at most 64 characters unless `maxLen` says otherwise.
    static func clip(_ text: String) -> String { text.isEmpty ? "-" : String(text.prefix(64)) }

    /// The bridge itself (aid 1): Accessory Information and Protocol Information.
    static func bridge(name: String, version: String) -> BridgedAccessory {
        let block = Block.protocolInformation
        return BridgedAccessory(aid: 1, device: nil, services: [
            information(name: name, manufacturer: "lbs-gateway", model: "LBS Gateway", serial: "lbs-gateway", firmware: version),
            BridgeService(iid: iid(block, 0), type: HAPType(apple: "A2"), primary: false, characteristics: [
                characteristic(block, 1, "37", "string", ["pr"], .constant(.string("1.1.0"))),
            ]),
        ])
    }

    /// `<base>/energy/home` as one accessory: the home's power and energy on Eve's consumption service.
    static let energyHomeKey = "@energy_home"
    static func energyHome(aid: Int, version: String) -> BridgedAccessory {
        let keys: Set<String> = ["home_power", "home_energy"]
        return BridgedAccessory(aid: aid, device: nil, services: [
            information(name: "Home energy", manufacturer: "lbs-gateway", model: "Home energy", serial: "energy_home", firmware: version),
            BridgeService(iid: iid(.consumption, 0), type: eveConsumption, primary: true, characteristics: eveCharacteristics(.consumption, keys: keys)),
        ], view: "energy_home")
    }

    /// The accessory for one device; nil when nothing of it maps (HomeKit has no service for it).
    static func accessory(aid: Int, device: Device, version: String) -> BridgedAccessory? {
        let keys = Set(device.keys)
        var services: [BridgeService] = []
        var used: Set<String> = []
        func has(_ key: String) -> Bool { keys.contains(key) }
        func writable(_ key: String) -> [String] { device.isWritable(key) ? readWriteNotify : readNotify }
        func add(_ block: Block, _ type: String, primary: Bool, _ characteristics: [BridgeCharacteristic]) {
            services.append(BridgeService(iid: iid(block, 0), type: HAPType(apple: type), primary: primary, characteristics: characteristics))
        }

        switch device.type {
        case .light where has("state"):
            var list = [characteristic(.lightbulb, 1, "25", "bool", writable("state"), .key("state", .onOff))]
            if has("brightness") { list.append(characteristic(.lightbulb, 2, "8", "int", writable("brightness"), .key("brightness", .number), unit: "percentage", min: 0, max: 100, step: 1)) }
            if has("color_temp_kelvin") {
                let limits = device.spec("color_temp_kelvin").flatMap(rangeOf)
                let low = limits?.max.map { (1_000_000 / $0).rounded() } ?? 140, high = limits?.min.map { (1_000_000 / $0).rounded() } ?? 500
                list.append(characteristic(.lightbulb, 3, "CE", "uint32", writable("color_temp_kelvin"), .key("color_temp_kelvin", .mired), min: max(50, low), max: min(1000, high), step: 1))
            }
            if has("color") {
                list.append(characteristic(.lightbulb, 4, "13", "float", writable("color"), .key("color", .hue), unit: "arcdegrees", min: 0, max: 360, step: 1))
                list.append(characteristic(.lightbulb, 5, "2F", "float", writable("color"), .key("color", .saturation), unit: "percentage", min: 0, max: 100, step: 1))
            }
            add(.lightbulb, "43", primary: true, list)
            used.formUnion(["state", "brightness", "color_temp_kelvin", "color"])
        case .switch where has("state"):
            add(.switchService, "49", primary: true, [characteristic(.switchService, 1, "25", "bool", writable("state"), .key("state", .onOff))])
            used.insert("state")
        case .plug where has("state"):
            var list = [characteristic(.outlet, 1, "25", "bool", writable("state"), .key("state", .onOff)),
                        characteristic(.outlet, 2, "26", "bool", readNotify, has("in_use") ? .key("in_use", .flag) : .key("state", .onOff))]
            list += eveCharacteristics(.outlet, keys: keys)
            add(.outlet, "47", primary: true, list)
            used.formUnion(["state", "in_use", "power", "energy", "voltage", "current"])
        case .lock where has("lock"):
            add(.lock, "45", primary: true, [
                characteristic(.lock, 1, "1D", "uint8", readNotify, .key("lock", .lockCurrent), min: 0, max: 3, step: 1),
                characteristic(.lock, 2, "1E", "uint8", writable("lock"), .key("lock", .lockTarget), min: 0, max: 1, step: 1),
            ])
            used.insert("lock")
        case .garageDoor where has("cover"):
            add(.garageDoor, "41", primary: true, [
                characteristic(.garageDoor, 1, "E", "uint8", readNotify, .key("cover", .doorCurrent), min: 0, max: 4, step: 1),
                characteristic(.garageDoor, 2, "32", "uint8", writable("cover"), .key("cover", .doorTarget), min: 0, max: 1, step: 1),
                characteristic(.garageDoor, 3, "24", "bool", readNotify, .constant(.bool(false))),
            ])
            used.insert("cover")
        case .cover where has("cover") || has("position"):
            let key = has("position") ? "position" : "cover"
            add(.windowCovering, "8C", primary: true, [
                characteristic(.windowCovering, 1, "6D", "uint8", readNotify, .key(key, .coverPosition), unit: "percentage", min: 0, max: 100, step: 1),
                characteristic(.windowCovering, 2, "7C", "uint8", writable(key), .key(key, .coverTarget), unit: "percentage", min: 0, max: 100, step: 1),
                characteristic(.windowCovering, 3, "72", "uint8", readNotify, .key(has("cover") ? "cover" : key, .positionState), min: 0, max: 2, step: 1),
            ])
            used.formUnion(["cover", "position"])
        case .thermostat where has("temperature") || has("target_temperature"):
            let limits = device.spec("target_temperature").flatMap(rangeOf)
            let modes = (device.spec("hvac_mode").map(optionsOf) ?? ["off", "heat", "cool", "auto"]).compactMap { ["off": 0, "heat": 1, "cool": 2, "auto": 3][$0] }
            var list = [
                characteristic(.thermostat, 1, "F", "uint8", readNotify, .key(has("hvac_action") ? "hvac_action" : "hvac_mode", .hvacCurrent), min: 0, max: 2, step: 1),
                characteristic(.thermostat, 2, "33", "uint8", has("hvac_mode") ? writable("hvac_mode") : readNotify, .key("hvac_mode", .hvacTarget), min: 0, max: 3, step: 1,
                               valid: modes.isEmpty ? nil : modes.sorted()),
                characteristic(.thermostat, 3, "11", "float", readNotify, .key(has("temperature") ? "temperature" : "target_temperature", .number), unit: "celsius", min: -270, max: 100, step: 0.1),
                characteristic(.thermostat, 4, "35", "float", writable("target_temperature"), .key(has("target_temperature") ? "target_temperature" : "temperature", .number),
                               unit: "celsius", min: max(10, limits?.min ?? 10), max: min(38, limits?.max ?? 38), step: 0.1),
                characteristic(.thermostat, 5, "36", "uint8", readWriteNotify, .constant(.number(0)), min: 0, max: 1, step: 1),
            ]
            if has("humidity") { list.append(characteristic(.thermostat, 6, "10", "float", readNotify, .key("humidity", .number), unit: "percentage", min: 0, max: 100, step: 1)) }
            add(.thermostat, "4A", primary: true, list)
            used.formUnion(["temperature", "target_temperature", "hvac_mode", "hvac_action", "humidity"])
        case .fan where has("state"):
            var list = [characteristic(.fan, 1, "B0", "uint8", writable("state"), .key("state", .active), min: 0, max: 1, step: 1)]
            if has("fan_speed") { list.append(characteristic(.fan, 2, "29", "float", writable("fan_speed"), .key("fan_speed", .number), unit: "percentage", min: 0, max: 100, step: 1)) }
            add(.fan, "B7", primary: true, list)
            used.formUnion(["state", "fan_speed"])
        default:
            break
        }
        // Sensors, for whatever readings the device has beyond its main service.
        func sensor(_ key: String, _ block: Block, _ service: String, _ type: String, _ format: String, _ conversion: BridgeConversion,
                    unit: String? = nil, min: Double? = nil, max: Double? = nil, step: Double? = nil) {
            guard has(key), !used.contains(key) else { return }
            used.insert(key)
            add(block, service, primary: services.isEmpty, [characteristic(block, 1, type, format, readNotify, .key(key, conversion), unit: unit, min: min, max: max, step: step)])
        }
        sensor("temperature", .temperature, "8A", "11", "float", .number, unit: "celsius", min: -270, max: 100, step: 0.1)
        sensor("humidity", .humidity, "82", "10", "float", .number, unit: "percentage", min: 0, max: 100, step: 1)
        if has("co2"), !used.contains("co2") {
            used.insert("co2")
            add(.co2, "97", primary: services.isEmpty, [
                characteristic(.co2, 1, "92", "uint8", readNotify, .key("co2", .co2Detected), min: 0, max: 1, step: 1),
                characteristic(.co2, 2, "93", "float", readNotify, .key("co2", .number), min: 0, max: 100_000, step: 1),
            ])
        }
        let airKeys = ["air_quality", "pm25", "pm10", "voc"].filter(has)
        if !airKeys.isEmpty {
            var list = [characteristic(.airQuality, 1, "95", "uint8", readNotify, .key(has("air_quality") ? "air_quality" : (has("pm25") ? "pm25" : airKeys[0]), .airQuality), min: 0, max: 5, step: 1)]
            if has("pm25") { list.append(characteristic(.airQuality, 2, "C6", "float", readNotify, .key("pm25", .number), min: 0, max: 1000, step: 1)) }
            if has("pm10") { list.append(characteristic(.airQuality, 3, "C7", "float", readNotify, .key("pm10", .number), min: 0, max: 1000, step: 1)) }
            if has("voc") { list.append(characteristic(.airQuality, 4, "C8", "float", readNotify, .key("voc", .number), min: 0, max: 1000, step: 1)) }
            add(.airQuality, "8D", primary: services.isEmpty, list)
            used.formUnion(airKeys)
        }
        sensor("illuminance", .light, "84", "6B", "float", .number, unit: "lux", min: 0.0001, max: 100_000)
        sensor("motion", .motion, "85", "22", "bool", .flag)
        sensor("occupancy", .occupancy, "86", "71", "uint8", .flag, min: 0, max: 1, step: 1)
        sensor("contact", .contact, "80", "6A", "uint8", .contact, min: 0, max: 1, step: 1)
        sensor(has("water_leak") ? "water_leak" : "leak", .leak, "83", "70", "uint8", .flag, min: 0, max: 1, step: 1)
        sensor("smoke", .smoke, "87", "76", "uint8", .flag, min: 0, max: 1, step: 1)
        if has("carbon_monoxide") || has("co"), !used.contains("carbon_monoxide") {
            var list: [BridgeCharacteristic] = [characteristic(.carbonMonoxide, 1, "69", "uint8", readNotify,
                                                               .key(has("carbon_monoxide") ? "carbon_monoxide" : "co", has("carbon_monoxide") ? .flag : .co2Detected), min: 0, max: 1, step: 1)]
            if has("co") { list.append(characteristic(.carbonMonoxide, 2, "90", "float", readNotify, .key("co", .number), min: 0, max: 100, step: 0.1)) }
            add(.carbonMonoxide, "7F", primary: services.isEmpty, list)
            used.formUnion(["carbon_monoxide", "co"])
        }
        let batteryKey = has("battery") ? "battery" : (has("battery_level") && device.type != .energyMeter && device.type != .appliance ? "battery_level" : nil)
        if batteryKey != nil || has("battery_low") {
            var list: [BridgeCharacteristic] = []
            if let batteryKey { list.append(characteristic(.battery, 1, "68", "uint8", readNotify, .key(batteryKey, .number), unit: "percentage", min: 0, max: 100, step: 1)) }
            list.append(characteristic(.battery, 2, "8F", "uint8", readNotify, .constant(.number(2)), min: 0, max: 2, step: 1))
            list.append(characteristic(.battery, 3, "79", "uint8", readNotify, .key(has("battery_low") ? "battery_low" : (batteryKey ?? "battery"), .lowBattery), min: 0, max: 1, step: 1))
            add(.battery, "96", primary: false, list)
        }
        // Power and energy where the main service did not take them: Eve's consumption service (the Eve and Home+
        // apps show it; Apple's Home app shows nothing for energy).
        if !used.contains("power"), !eveCharacteristics(.consumption, keys: keys).isEmpty {
            services.append(BridgeService(iid: iid(.consumption, 0), type: eveConsumption, primary: services.isEmpty,
                                          characteristics: eveCharacteristics(.consumption, keys: keys)))
        }
        guard !services.isEmpty else { return nil }
        let info = information(name: device.name, manufacturer: device.manufacturer ?? device.vendorID, model: device.model ?? device.type.rawValue,
                               serial: device.serialNumber ?? device.id.rawValue, firmware: firmware(device.swVersion) ?? version)
        return BridgedAccessory(aid: aid, device: device.id, services: [info] + services)
    }

    static func eveCharacteristics(_ block: Block, keys: Set<String>) -> [BridgeCharacteristic] {
        var list: [BridgeCharacteristic] = []
        func eve(_ offset: Int, _ type: HAPType, _ key: String, max: Double, step: Double) {
            guard keys.contains(key) else { return }
            list.append(BridgeCharacteristic(iid: iid(block, offset), type: type, format: "float", perms: readNotify, minValue: 0, maxValue: max, minStep: step,
                                             source: .key(key, .number)))
        }
        eve(8, evePower, keys.contains("power") ? "power" : "home_power", max: 100_000, step: 0.1)
        eve(9, eveEnergy, keys.contains("energy") ? "energy" : "home_energy", max: 10_000_000, step: 0.01)
        eve(10, eveVoltage, "voltage", max: 1000, step: 0.1)
        eve(11, eveCurrent, "current", max: 1000, step: 0.01)
        return list
    }

    /// HAP wants `x.y.z` numbers in Firmware Revision.
    static func firmware(_ text: String?) -> String? {
        guard let text else { return nil }
        let parts = text.split(whereSeparator: { !$0.isNumber }).prefix(3)
        return parts.isEmpty ? nil : parts.joined(separator: ".")
    }

    static func rangeOf(_ spec: KeySpec) -> (min: Double?, max: Double?)? {
        if case .number(let low, let high) = spec.kind { return (low, high) }
        return nil
    }

    static func optionsOf(_ spec: KeySpec) -> [String] {
        if case .enumeration(let options) = spec.kind { return options }
        return []
    }

    // MARK: Values

    /// The HAP value of `characteristic` from the device's state; nil when the state has nothing for it yet.
    static func value(_ characteristic: BridgeCharacteristic, state: DeviceState?) -> JSONValue? {
        switch characteristic.source {
        case .constant(let value): return value
        case .identify: return nil
        case .key(let key, let conversion):
            guard let value = state?.values[key] else { return nil }
            return convert(value, conversion, characteristic)
        }
    }

    static func convert(_ value: StateValue, _ conversion: BridgeConversion, _ characteristic: BridgeCharacteristic) -> JSONValue? {
        func clamped(_ number: Double) -> JSONValue {
            var result = number
            if let low = characteristic.minValue { result = Swift.max(low, result) }
            if let high = characteristic.maxValue { result = Swift.min(high, result) }
            if characteristic.format != "float" { result = result.rounded() }
            return .number(result)
        }
        func flag(_ on: Bool) -> JSONValue { characteristic.format == "bool" ? .bool(on) : .number(on ? 1 : 0) }
        let word = value.string?.uppercased()
        switch conversion {
        case .onOff, .active:
            if let word { return flag(word == "ON") }
            return value.bool.map(flag)
        case .number:
            return value.number.flatMap { $0.isFinite ? clamped($0) : nil }
        case .mired:
            guard let kelvin = value.number, kelvin > 0 else { return nil }
            return clamped(1_000_000 / kelvin)
        case .hue:
            return (value.object?["hue"] ?? value.object?["h"])?.number.map(clamped)
        case .saturation:
            return (value.object?["saturation"] ?? value.object?["s"])?.number.map(clamped)
        case .lockCurrent:
            switch word { case "LOCKED": return .number(1)
            case "UNLOCKED": return .number(0)
            case "JAMMED": return .number(2)
            default: return .number(3) }
        case .lockTarget:
            switch word { case "LOCKED", "LOCKING": return .number(1)
            case "UNLOCKED", "UNLOCKING": return .number(0)
            default: return nil }
        case .coverPosition, .coverTarget:
            if let number = value.number { return clamped(number) }
            switch word { case "OPEN", "OPENING": return .number(100)
            case "CLOSED", "CLOSING": return .number(0)
            default: return nil }
        case .positionState:
            switch word { case "OPENING": return .number(1)
            case "CLOSING": return .number(0)
            default: return .number(2) }
        case .doorCurrent:
            switch word { case "OPEN": return .number(0)
            case "CLOSED": return .number(1)
            case "OPENING": return .number(2)
            case "CLOSING": return .number(3)
            case "STOPPED": return .number(4)
            default: return nil }
        case .doorTarget:
            switch word { case "OPEN", "OPENING": return .number(0)
            case "CLOSED", "CLOSING": return .number(1)
            default: return nil }
        case .hvacCurrent:
            switch value.string?.lowercased() { case "heating", "heat": return .number(1)
            case "cooling", "cool": return .number(2)
            case .some: return .number(0)
            case nil: return nil }
        case .hvacTarget:
            switch value.string?.lowercased() { case "off": return .number(0)
            case "heat": return .number(1)
            case "cool": return .number(2)
            case "auto": return .number(3)
            default: return nil }
        case .contact:
            return value.bool.map { .number($0 ? 0 : 1) }
        case .flag:
            if let flagValue = value.bool { return flag(flagValue) }
            return value.number.map { flag($0 != 0) }
        case .lowBattery:
            if let low = value.bool { return .number(low ? 1 : 0) }
            return value.number.map { .number($0 < 20 ? 1 : 0) }
        case .co2Detected:
            return value.number.map { .number($0 > 1000 ? 1 : 0) }
        case .airQuality:
            if let text = value.string {
                return .number(["good": 1, "fair": 2, "moderate": 3, "poor": 4, "very_poor": 5, "extremely_poor": 5][text] ?? 0)
            }
            // From PM2.5 (µg/m³), by the US AQI breakpoints.
            guard let pm = value.number else { return nil }
            return .number(pm <= 12 ? 1 : pm <= 35.4 ? 2 : pm <= 55.4 ? 3 : pm <= 150.4 ? 4 : 5)
        }
    }

    /// A `/set` payload's key and value for a HAP write; a HAP status when the value cannot be taken.
    static func command(_ characteristic: BridgeCharacteristic, value: JSONValue, state: DeviceState?) -> Result<(String, JSONValue)?, HAPWriteRefusal> {
        guard characteristic.writable else { return .failure(.readOnly) }
        switch characteristic.source {
        case .constant, .identify:
            return .success(nil)
        case .key(let key, let conversion):
            let number: Double? = switch value { case .number(let number): number
            case .bool(let flag): flag ? 1 : 0
            default: nil }
            guard let number, number.isFinite else { return .failure(.invalidValue) }
            if let low = characteristic.minValue, number < low { return .failure(.invalidValue) }
            if let high = characteristic.maxValue, number > high { return .failure(.invalidValue) }
            if let valid = characteristic.validValues, !(number.hapInt.map(valid.contains) ?? false) { return .failure(.invalidValue) }
            switch conversion {
            case .onOff, .active: return .success((key, .string(number != 0 ? "ON" : "OFF")))
            case .number: return .success((key, .number(number)))
            case .mired:
                guard number > 0 else { return .failure(.invalidValue) }
                return .success((key, .number((1_000_000 / number).rounded())))
            case .hue, .saturation:
                // One of the two: the other from the current colour.
                let current = state?.values[key]?.object
                var hue = (current?["hue"] ?? current?["h"])?.number ?? 0, saturation = (current?["saturation"] ?? current?["s"])?.number ?? 100
                if conversion == .hue { hue = number } else { saturation = number }
                return .success((key, .object(["hue": .number(hue), "saturation": .number(saturation)])))
            case .lockTarget: return .success((key, .string(number == 1 ? "LOCK" : "UNLOCK")))
            case .coverTarget:
                if key == "position" { return .success((key, .number(number))) }
                return .success((key, .string(number >= 50 ? "OPEN" : "CLOSE")))
            case .doorTarget: return .success((key, .string(number == 0 ? "OPEN" : "CLOSE")))
            case .hvacTarget:
                guard let mode = number.hapInt.flatMap({ [0: "off", 1: "heat", 2: "cool", 3: "auto"][$0] }) else { return .failure(.invalidValue) }
                return .success((key, .string(mode)))
            default:
                return .failure(.readOnly)
            }
        }
    }
}

/// Why a write is refused before it becomes a command.
enum HAPWriteRefusal: Error, Sendable {
    case readOnly, invalidValue

    var status: Int {
        switch self {
        case .readOnly: HAPStatus.readOnly
        case .invalidValue: HAPStatus.invalidValue
        }
    }
}
