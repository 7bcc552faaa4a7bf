#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import HAP

/// How one published key is made from characteristics (iids of one accessory) and, where it is writable, how a
/// `/set` value becomes characteristic writes.
enum HKBinding: Sendable, Hashable {
    /// On (bool; some accessories send 0/1) → `state` ON/OFF.
    case onOff(Int)
    /// Active (0/1) of a fan v2, valve or air purifier → `state` ON/OFF.
    case active(Int)
    /// A plain number in the key's unit (°C, %, ppm, µg/m³, lux, W, kWh, V, A).
    case number(Int)
    /// Color Temperature in mired → `color_temp_kelvin`.
    case mired(Int)
    /// Hue (°) and Saturation (%) → `color` `{"hue","saturation"}`.
    case color(hue: Int, saturation: Int)
    /// Target Heating Cooling State → `hvac_mode`.
    case hvacMode(Int)
    /// Current Heating Cooling State → `hvac_action`.
    case hvacAction(Int)
    /// Air Quality (0–5) → `air_quality`.
    case airQuality(Int)
    /// Lock Current State (read) and Lock Target State (write) → `lock`.
    case lock(current: Int?, target: Int?)
    /// Current Position (read) and Target Position (write) → `position`.
    case position(current: Int?, target: Int?)
    /// A window covering's Position State and positions → `cover` (OPEN/CLOSE/STOP move the target).
    case windowCover(state: Int?, current: Int?, target: Int, hold: Int?)
    /// A garage door's Current and Target Door State → `cover`.
    case door(current: Int?, target: Int?)
    /// Contact Sensor State (0 = contact) → `contact` true = closed.
    case contact(Int)
    /// A 0/1 or bool flag → a bool key (motion, occupancy, leak, smoke, CO, in use, low battery).
    case flag(Int)

    /// The iids whose values make the key.
    var reads: [Int] {
        switch self {
        case .onOff(let iid), .active(let iid), .number(let iid), .mired(let iid), .hvacMode(let iid), .hvacAction(let iid),
             .airQuality(let iid), .contact(let iid), .flag(let iid): [iid]
        case .color(let hue, let saturation): [hue, saturation]
        case .lock(let current, let target): [current ?? target].compactMap { $0 }
        case .position(let current, let target): [current ?? target].compactMap { $0 }
        case .windowCover(let state, let current, let target, _): [state, current ?? target].compactMap { $0 }
        case .door(let current, let target): [current ?? target].compactMap { $0 }
        }
    }

    /// The iids a `/set` writes.
    var writes: [Int] {
        switch self {
        case .onOff(let iid), .active(let iid), .number(let iid), .mired(let iid), .hvacMode(let iid): [iid]
        case .color(let hue, let saturation): [hue, saturation]
        case .lock(_, let target), .position(_, let target), .door(_, let target): [target].compactMap { $0 }
        case .windowCover(_, _, let target, let hold): [target] + [hold].compactMap { $0 }
        case .hvacAction, .airQuality, .contact, .flag: []
        }
    }
}

/// What one HAP accessory becomes: one device, its keys and how each is read and written.
struct HKDevicePlan: Sendable {
    var device: Device
    var aid: Int
    var bindings: [String: HKBinding]
    /// Characteristics by iid (perms, format, range) for conversions and writes.
    var characteristics: [Int: HAPCharacteristic]
    /// Characteristics that feed a key and send events (`ev`): subscribed. The others that feed a key are polled.
    var notifying: [Int]
    var polled: [Int]
    /// Characteristic types no key fits (logged once at debug level).
    var unmapped: [String]

    /// Keys made from `iids`.
    func keys(fedBy iids: Set<Int>) -> [String] {
        bindings.filter { !Set($0.value.reads).isDisjoint(with: iids) }.map(\.key).sorted()
    }
}

/// HAP services and characteristics → devices and keys, by type (not by recorded device): any accessory with
/// these characteristics maps the same way. Pure; tested on recorded `/accessories` dumps.
enum HomeKitMapping {
    // Services.
    static let accessoryInformation = HAPType(apple: "3E"), protocolInformation = HAPType(apple: "A2")
    static let lightbulb = HAPType(apple: "43"), outlet = HAPType(apple: "47"), switchService = HAPType(apple: "49")
    static let lockMechanism = HAPType(apple: "45"), windowCovering = HAPType(apple: "8C"), garageDoor = HAPType(apple: "41")
    static let thermostat = HAPType(apple: "4A"), fan = HAPType(apple: "40"), fanV2 = HAPType(apple: "B7"), valve = HAPType(apple: "D0")
    static let airQualitySensor = HAPType(apple: "8D"), motionSensor = HAPType(apple: "85"), airPurifier = HAPType(apple: "BB")
    static let heaterCooler = HAPType(apple: "BC"), battery = HAPType(apple: "96")
    static let door = HAPType(apple: "81"), window = HAPType(apple: "8B")
    /// Eve's Consumption service (power characteristics on a service of their own).
    static let eveConsumption = HAPType("E863F008-079E-48FF-8F27-9C2605A29F52")

    // Accessory Information characteristics.
    static let name = HAPType(apple: "23"), manufacturer = HAPType(apple: "20"), model = HAPType(apple: "21")
    static let serial = HAPType(apple: "30"), firmware = HAPType(apple: "52")

    /// Characteristics read as a plain number into a key.
    static let numbers: [String: String] = [
        "8": "brightness", "11": "temperature", "35": "target_temperature", "10": "humidity", "93": "co2",
        "C6": "pm25", "C7": "pm10", "C8": "voc", "90": "co", "68": "battery", "6B": "illuminance", "29": "fan_speed",
        "E863F10D-079E-48FF-8F27-9C2605A29F52": "power", "E863F10C-079E-48FF-8F27-9C2605A29F52": "energy",
        "E863F10A-079E-48FF-8F27-9C2605A29F52": "voltage", "E863F126-079E-48FF-8F27-9C2605A29F52": "current",
    ]
    static let eveEnergy: Set<String> = [
        "E863F10D-079E-48FF-8F27-9C2605A29F52", "E863F10C-079E-48FF-8F27-9C2605A29F52", "E863F10A-079E-48FF-8F27-9C2605A29F52",
        "E863F126-079E-48FF-8F27-9C2605A29F52",
    ]
    /// Characteristics read as a bool flag.
    static let flags: [String: String] = [
        "22": "motion", "71": "occupancy", "70": "water_leak", "76": "smoke", "69": "carbon_monoxide", "79": "battery_low", "D2": "in_use",
        "26": "in_use",
    ]
    /// Keys that describe the whole accessory, not one of its services: the first service that has one gives it.
    static let accessoryWide: Set<String> = ["battery", "battery_low"]
    /// Characteristics consumed by a composite binding (not listed as unmapped).
    static let composite: Set<String> = ["25", "B0", "CE", "13", "2F", "33", "F", "95", "1D", "1E", "6D", "7C", "72", "6F", "E", "32", "6A"]
    /// Characteristics that say nothing a user needs on MQTT (names, identify, display units, versions, status flags).
    static let ignored: Set<String> = [
        "14", "20", "21", "23", "30", "52", "53", "37", "36", "A6", "220", "75", "77", "7A", "8F", "24", "D5", "D3", "D4", "CB", "E863F112-079E-48FF-8F27-9C2605A29F52",
    ]

    /// The devices of one configured accessory: `<name>` for aid 1, `<name>_<aid>` for the others behind a bridge.
    static func plans(vendorID: String, name: String, accessories: [HAPAccessory]) -> [HKDevicePlan] {
        let bridgeID = DeviceID(vendorInstance: vendorID, vendorDeviceID: name)
        let hasBridge = accessories.contains { $0.aid == 1 } && accessories.count > 1
        return accessories.map { accessory in
            plan(vendorID: vendorID, deviceName: accessory.aid == 1 ? name : "\(name)_\(accessory.aid)", accessory: accessory,
                 via: hasBridge && accessory.aid != 1 ? bridgeID : nil, fallbackName: name)
        }
    }

    static func plan(vendorID: String, deviceName: String, accessory: HAPAccessory, via: DeviceID?, fallbackName: String) -> HKDevicePlan {
        var bindings: [String: HKBinding] = [:]
        var order: [String] = []
        var unmapped: [String] = []
        var characteristics: [Int: HAPCharacteristic] = [:]
        for service in accessory.services {
            for characteristic in service.characteristics { characteristics[characteristic.iid] = characteristic }
        }
        /// Adds `binding` under `key`, or `key_2`, `key_3` … when an earlier service of this accessory has it.
        func add(_ key: String, _ binding: HKBinding) {
            // One battery per accessory: sensors repeat Status Low Battery on each of their services.
            if accessoryWide.contains(key), bindings[key] != nil { return }
            var name = key
            var index = 1
            while bindings[name] != nil {
                index += 1
                name = "\(key)_\(index)"
            }
            bindings[name] = binding
            order.append(name)
        }
        for service in accessory.services where service.type != accessoryInformation && service.type != protocolInformation {
            var used: Set<Int> = []
            func iid(_ short: String) -> Int? {
                guard let characteristic = service.characteristic(HAPType(apple: short)) else { return nil }
                return characteristic.iid
            }
            func take(_ short: String) -> Int? {
                guard let found = iid(short) else { return nil }
                used.insert(found)
                return found
            }
            // Composite and state-like characteristics, by service.
            if let on = take("25") { add("state", .onOff(on)) }
            if let active = take("B0"), service.type == fanV2 || service.type == valve || service.type == airPurifier || service.type == heaterCooler {
                add("state", .active(active))
            }
            if let mired = take("CE") { add("color_temp_kelvin", .mired(mired)) }
            if let hue = iid("13"), let saturation = iid("2F") {
                used.formUnion([hue, saturation])
                add("color", .color(hue: hue, saturation: saturation))
            }
            if service.type == thermostat || service.type == heaterCooler {
                if let target = take("33") { add("hvac_mode", .hvacMode(target)) }
                if let current = take("F") { add("hvac_action", .hvacAction(current)) }
            }
            if let quality = take("95") { add("air_quality", .airQuality(quality)) }
            let lockCurrent = take("1D"), lockTarget = take("1E")
            if lockCurrent != nil || lockTarget != nil { add("lock", .lock(current: lockCurrent, target: lockTarget)) }
            let doorCurrent = take("E"), doorTarget = take("32")
            if doorCurrent != nil || doorTarget != nil { add("cover", .door(current: doorCurrent, target: doorTarget)) }
            let positionCurrent = take("6D"), positionTarget = take("7C"), positionState = take("72"), hold = take("6F")
            if positionCurrent != nil || positionTarget != nil {
                if let target = positionTarget, service.type == windowCovering || service.type == door || service.type == window {
                    add("cover", .windowCover(state: positionState, current: positionCurrent, target: target, hold: hold))
                }
                add("position", .position(current: positionCurrent, target: positionTarget))
            }
            if let contact = take("6A") { add("contact", .contact(contact)) }
            // Plain numbers and flags, by characteristic type.
            for characteristic in service.characteristics where !used.contains(characteristic.iid) {
                let short = characteristic.type.short
                if let key = numbers[short] {
                    add(key, .number(characteristic.iid))
                } else if let key = flags[short] {
                    add(key, .flag(characteristic.iid))
                } else if !ignored.contains(short) && !composite.contains(short) && !characteristic.perms.contains("hd") {
                    unmapped.append("\(short)@\(characteristic.iid)")
                }
            }
        }
        let info = accessory.services(accessoryInformation).first
        func text(_ type: HAPType) -> String? {
            guard let raw = info?.characteristic(type)?.value?.string else { return nil }
            let value = raw.drop { $0 == " " }.reversed().drop { $0 == " " }.reversed()
            return value.isEmpty ? nil : String(value)
        }
        var writable: Set<String> = []
        var limits: [String: KeyLimits] = [:]
        for (key, binding) in bindings {
            let targets = binding.writes.compactMap { characteristics[$0] }
            if !targets.isEmpty, targets.allSatisfy(\.writable) { writable.insert(key) }
            if let range = keyLimits(key: key, binding: binding, characteristics: characteristics) { limits[key] = range }
        }
        let feeding = Set(bindings.values.flatMap(\.reads)).sorted()
        let readable = feeding.compactMap { characteristics[$0] }.filter(\.readable)
        // Eve's energy characteristics announce events but do not send them (aiohomekit polls them too).
        let polled = readable.filter { !$0.notifies || eveEnergy.contains($0.type.uuid) }.map(\.iid)
        let device = Device(
            vendorID: vendorID, vendorDeviceID: deviceName, name: text(name) ?? fallbackName, type: deviceType(accessory, keys: Set(order)),
            manufacturer: text(manufacturer), model: text(model), swVersion: text(firmware), serialNumber: text(serial),
            writableKeys: writable, keys: order, viaDevice: via, limits: limits.isEmpty ? nil : limits
        )
        return HKDevicePlan(device: device, aid: accessory.aid, bindings: bindings, characteristics: characteristics,
                            notifying: readable.filter(\.notifies).map(\.iid), polled: polled,
                            unmapped: unmapped)
    }

    /// A device's own range where the accessory narrows the registry's (a thermostat's 10–38 °C).
    static func keyLimits(key: String, binding: HKBinding, characteristics: [Int: HAPCharacteristic]) -> KeyLimits? {
        switch binding {
        case .number(let iid) where key.hasPrefix("target_temperature"):
            guard let characteristic = characteristics[iid], characteristic.minValue != nil || characteristic.maxValue != nil else { return nil }
            return KeyLimits(min: characteristic.minValue, max: characteristic.maxValue)
        case .mired(let iid):
            guard let characteristic = characteristics[iid], let low = characteristic.minValue, let high = characteristic.maxValue, low > 0, high > 0 else { return nil }
            return KeyLimits(min: (1_000_000 / high).rounded(), max: (1_000_000 / low).rounded())
        case .hvacMode(let iid):
            guard let valid = characteristics[iid]?.validValues, !valid.isEmpty else { return nil }
            return KeyLimits(options: valid.compactMap { hvacModes[$0] })
        default:
            return nil
        }
    }

    static func deviceType(_ accessory: HAPAccessory, keys: Set<String>) -> DeviceType {
        let types = accessory.services.sorted { $0.primary && !$1.primary }.map(\.type)
        for type in types {
            switch type {
            case lightbulb: return .light
            case outlet: return .plug
            case lockMechanism: return .lock
            case garageDoor: return .garageDoor
            case windowCovering, door, window: return .cover
            case thermostat, heaterCooler: return .thermostat
            case fan, fanV2, airPurifier: return .fan
            case switchService, valve: return .switch
            default: continue
            }
        }
        if keys.contains("power") || keys.contains("energy") { return .energyMeter }
        if types.contains(airQualitySensor) || keys.contains("co2") || keys.contains("pm25") { return .airQuality }
        if types.contains(motionSensor) { return .motionSensor }
        if keys.isEmpty && accessory.aid == 1 { return .hub }
        return .sensor
    }

    static let hvacModes: [Int: String] = [0: "off", 1: "heat", 2: "cool", 3: "auto"]

    // MARK: Reading

    /// The value of `binding` from the accessory's characteristic values (by iid); nil when not known yet.
    static func read(_ binding: HKBinding, values: [Int: JSONValue]) -> StateValue? {
        func number(_ iid: Int?) -> Double? {
            guard let iid else { return nil }
            switch values[iid] {
            case .number(let value)?: return value.isFinite ? value : nil
            case .bool(let flag)?: return flag ? 1 : 0
            default: return nil
            }
        }
        switch binding {
        case .onOff(let iid), .active(let iid):
            return number(iid).map { .string($0 != 0 ? "ON" : "OFF") }
        case .number(let iid):
            return number(iid).map { .number($0) }
        case .mired(let iid):
            guard let mired = number(iid), mired > 0 else { return nil }
            return .number((1_000_000 / mired).rounded())
        case .color(let hue, let saturation):
            guard let h = number(hue), let s = number(saturation) else { return nil }
            return .object(["hue": .number(h), "saturation": .number(s)])
        case .hvacMode(let iid):
            return number(iid).flatMap { $0.hapInt }.flatMap { hvacModes[$0] }.map(StateValue.string)
        case .hvacAction(let iid):
            return number(iid).flatMap { $0.hapInt }.flatMap { [0: "off", 1: "heating", 2: "cooling"][$0] }.map(StateValue.string)
        case .airQuality(let iid):
            return number(iid).flatMap { $0.hapInt }.flatMap { [0: "unknown", 1: "good", 2: "fair", 3: "moderate", 4: "poor", 5: "very_poor"][$0] }.map(StateValue.string)
        case .lock(let current, let target):
            if let value = number(current) {
                return value.hapInt.flatMap { [0: "UNLOCKED", 1: "LOCKED", 2: "JAMMED"][$0] }.map(StateValue.string)
            }
            return number(target).flatMap { $0.hapInt }.flatMap { [0: "UNLOCKED", 1: "LOCKED"][$0] }.map(StateValue.string)
        case .position(let current, let target):
            return number(current ?? target).map { .number($0) }
        case .windowCover(let state, let current, let target, _):
            let position = number(current ?? target)
            switch number(state).flatMap(\.hapInt) {
            case 0?: return .string("CLOSING")
            case 1?: return .string("OPENING")
            default: return position.map { .string($0 > 0 ? "OPEN" : "CLOSED") }
            }
        case .door(let current, let target):
            if let value = number(current) {
                return value.hapInt.flatMap { [0: "OPEN", 1: "CLOSED", 2: "OPENING", 3: "CLOSING", 4: "STOPPED"][$0] }.map(StateValue.string)
            }
            return number(target).flatMap { $0.hapInt }.flatMap { [0: "OPEN", 1: "CLOSED"][$0] }.map(StateValue.string)
        case .contact(let iid):
            return number(iid).map { .bool($0 == 0) }
        case .flag(let iid):
            return number(iid).map { .bool($0 != 0) }
        }
    }

    /// Every key of `plan` that `values` can make.
    static func state(_ plan: HKDevicePlan, values: [Int: JSONValue], keys: [String]? = nil) -> [String: StateValue] {
        var state: [String: StateValue] = [:]
        for key in keys ?? Array(plan.bindings.keys) {
            if let binding = plan.bindings[key], let value = read(binding, values: values) { state[key] = value }
        }
        return state
    }

    // MARK: Writing

    /// The characteristic writes for one `/set` of `plan`'s keys (several keys of one accessory go in one PUT).
    static func writes(for changes: [String: StateValue], plan: HKDevicePlan, values: [Int: JSONValue]) throws(GatewayError) -> [CharacteristicValue] {
        var writes: [CharacteristicValue] = []
        for name in changes.keys.sorted() {
            guard let value = changes[name], let binding = plan.bindings[name] else {
                throw GatewayError(.unknownKey, message: "\(plan.device.id) has no '\(name)'.")
            }
            guard plan.device.writableKeys?.contains(name) ?? false else {
                throw GatewayError(.readOnlyKey, message: "'\(name)' of \(plan.device.id) is read-only on the accessory.")
            }
            for (iid, json) in try self.write(binding, key: name, value: value, plan: plan, values: values) {
                writes.append(CharacteristicValue(aid: plan.aid, iid: iid, value: json))
            }
        }
        return writes
    }

    static func write(_ binding: HKBinding, key: String, value: StateValue, plan: HKDevicePlan, values: [Int: JSONValue]) throws(GatewayError) -> [(Int, JSONValue)] {
        func invalid(_ expected: String) -> GatewayError {
            GatewayError(.invalidPayload, message: "'\(key)' takes \(expected).")
        }
        /// A number in the characteristic's own format and range (an int format gets an integer).
        func fitted(_ number: Double, _ iid: Int) -> JSONValue {
            var value = number
            if let characteristic = plan.characteristics[iid] {
                if let low = characteristic.minValue { value = max(low, value) }
                if let high = characteristic.maxValue { value = min(high, value) }
                if characteristic.format != "float" { value = value.rounded() }
            }
            return .number(value)
        }
        func flag(_ on: Bool, _ iid: Int) -> JSONValue {
            plan.characteristics[iid]?.format == "bool" ? .bool(on) : .number(on ? 1 : 0)
        }
        switch binding {
        case .onOff(let iid), .active(let iid):
            guard let word = value.string?.uppercased(), ["ON", "OFF", "TOGGLE"].contains(word) else { throw invalid("ON, OFF or TOGGLE") }
            let on = word == "TOGGLE" ? read(binding, values: values) != .string("ON") : word == "ON"
            return [(iid, flag(on, iid))]
        case .number(let iid):
            guard let number = value.number else { throw invalid("a number") }
            return [(iid, fitted(number, iid))]
        case .mired(let iid):
            guard let kelvin = value.number, kelvin > 0 else { throw invalid("a colour temperature in K") }
            return [(iid, fitted(1_000_000 / kelvin, iid))]
        case .color(let hue, let saturation):
            guard let object = value.object, let h = (object["hue"] ?? object["h"])?.number, let s = (object["saturation"] ?? object["s"])?.number else {
                throw invalid("{\"hue\":0…360,\"saturation\":0…100}")
            }
            return [(hue, fitted(h, hue)), (saturation, fitted(s, saturation))]
        case .hvacMode(let iid):
            guard let word = value.string?.lowercased(), let code = hvacModes.first(where: { $0.value == word })?.key else {
                throw invalid("off, heat, cool or auto")
            }
            return [(iid, .number(Double(code)))]
        case .lock(_, let target?):
            guard let word = value.string?.uppercased(), ["LOCK", "UNLOCK", "LOCKED", "UNLOCKED"].contains(word) else { throw invalid("LOCK or UNLOCK") }
            return [(target, .number(word.hasPrefix("LOCK") ? 1 : 0))]
        case .position(_, let target?):
            guard let number = value.number else { throw invalid("a number from 0 to 100") }
            return [(target, fitted(number, target))]
        case .windowCover(_, let current, let target, let hold):
            guard let word = value.string?.uppercased() else { throw invalid("OPEN, CLOSE or STOP") }
            switch word {
            case "OPEN": return [(target, fitted(100, target))]
            case "CLOSE": return [(target, fitted(0, target))]
            case "STOP":
                if let hold { return [(hold, flag(true, hold))] }
                guard let current, let position = values[current]?.number else { throw invalid("OPEN or CLOSE (this cover cannot stop)") }
                return [(target, fitted(position, target))]
            default: throw invalid("OPEN, CLOSE or STOP")
            }
        case .door(_, let target?):
            guard let word = value.string?.uppercased(), ["OPEN", "CLOSE"].contains(word) else { throw invalid("OPEN or CLOSE") }
            return [(target, .number(word == "OPEN" ? 0 : 1))]
        default:
            throw GatewayError(.readOnlyKey, message: "'\(key)' of \(plan.device.id) is read-only on the accessory.")
        }
    }
}
