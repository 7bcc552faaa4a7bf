import GatewayModel

/// A service or characteristic type: a UUID, kept upper-case in full form. Apple's own types
/// (`0000XXXX-0000-1000-8000-0026BB765291`) travel short ("25", "3E"); `short` gives that form back.
public struct HAPType: Sendable, Hashable, CustomStringConvertible {
    public static let appleSuffix = "-0000-1000-8000-0026BB765291"
    public let uuid: String

    /// Accepts the short form (1–8 hex digits) or a full UUID; nil for anything else.
    public init?(_ text: String) {
        let upper = text.uppercased()
        let hex = upper.allSatisfy { $0.isHexDigit }
        if hex, (1...8).contains(upper.count) {
            uuid = String(repeating: "0", count: 8 - upper.count) + upper + Self.appleSuffix
        } else if upper.count == 36, upper.split(separator: "-").map(\.count) == [8, 4, 4, 4, 12], upper.allSatisfy({ $0.isHexDigit || $0 == "-" }) {
            uuid = upper
        } else {
            return nil
        }
    }

    /// An Apple type from its short form (a constant in code, known to be valid).
    public init(apple short: String) {
        uuid = String(repeating: "0", count: max(0, 8 - short.count)) + short.uppercased() + Self.appleSuffix
    }

    /// "25" for Apple's types; the full UUID for others.
    public var short: String {
        guard uuid.hasSuffix(Self.appleSuffix) else { return uuid }
        let head = uuid.prefix(8).drop { $0 == "0" }
        return head.isEmpty ? "0" : String(head)
    }

    public var isApple: Bool { uuid.hasSuffix(Self.appleSuffix) }
    public var description: String { short }
}

/// One characteristic of the attribute database (`GET /accessories`).
public struct HAPCharacteristic: Sendable, Equatable {
    public var iid: Int
    public var type: HAPType
    public var perms: Set<String>
    public var format: String
    public var value: JSONValue?
    public var unit: String?
    public var minValue: Double?
    public var maxValue: Double?
    public var minStep: Double?
    public var validValues: [Int]?
    public var description: String?

    public init(iid: Int, type: HAPType, perms: Set<String>, format: String, value: JSONValue? = nil, unit: String? = nil,
                minValue: Double? = nil, maxValue: Double? = nil, minStep: Double? = nil, validValues: [Int]? = nil, description: String? = nil) {
        self.iid = iid
        self.type = type
        self.perms = perms
        self.format = format
        self.value = value
        self.unit = unit
        self.minValue = minValue
        self.maxValue = maxValue
        self.minStep = minStep
        self.validValues = validValues
        self.description = description
    }

    public var readable: Bool { perms.contains("pr") }
    public var writable: Bool { perms.contains("pw") }
    public var notifies: Bool { perms.contains("ev") }
    /// Writes need a timed write (`PUT /prepare` first).
    public var needsTimedWrite: Bool { perms.contains("tw") }
}

public struct HAPService: Sendable, Equatable {
    public var iid: Int
    public var type: HAPType
    public var primary: Bool
    public var hidden: Bool
    public var characteristics: [HAPCharacteristic]

    public init(iid: Int, type: HAPType, primary: Bool = false, hidden: Bool = false, characteristics: [HAPCharacteristic]) {
        self.iid = iid
        self.type = type
        self.primary = primary
        self.hidden = hidden
        self.characteristics = characteristics
    }

    public func characteristic(_ type: HAPType) -> HAPCharacteristic? {
        characteristics.first { $0.type == type }
    }
}

public struct HAPAccessory: Sendable, Equatable {
    public var aid: Int
    public var services: [HAPService]

    public init(aid: Int, services: [HAPService]) {
        self.aid = aid
        self.services = services
    }

    public func services(_ type: HAPType) -> [HAPService] { services.filter { $0.type == type } }
}

public enum AccessoryDatabase {
    /// Parses `/accessories`: `{"accessories":[…]}` (the wire form) or a bare array (recorded dumps). Entries
    /// without a usable aid, iid or type are skipped, not fatal: one odd characteristic must not hide a device.
    public static func parse(_ bytes: [UInt8]) throws(HAPError) -> [HAPAccessory] {
        let root: JSONValue
        switch JSONValue.parse(bytes) {
        case .success(let value): root = value
        case .failure(let error): throw .malformed("/accessories is not JSON: \(error.message)")
        }
        let list: [JSONValue]
        switch root {
        case .array(let items): list = items
        case .object(let object):
            guard case .array(let items)? = object["accessories"] else { throw .malformed("/accessories has no \"accessories\" array") }
            list = items
        default: throw .malformed("/accessories is not an object")
        }
        return list.compactMap(accessory)
    }

    static func accessory(_ json: JSONValue) -> HAPAccessory? {
        guard let aid = integer(json["aid"]), case .array(let services)? = json["services"] else { return nil }
        return HAPAccessory(aid: aid, services: services.compactMap(service))
    }

    static func service(_ json: JSONValue) -> HAPService? {
        guard let iid = integer(json["iid"]), let typeText = json["type"]?.string, let type = HAPType(typeText) else { return nil }
        var characteristics: [HAPCharacteristic] = []
        if case .array(let items)? = json["characteristics"] { characteristics = items.compactMap(characteristic) }
        return HAPService(iid: iid, type: type, primary: json["primary"]?.bool ?? false, hidden: json["hidden"]?.bool ?? false,
                          characteristics: characteristics)
    }

    static func characteristic(_ json: JSONValue) -> HAPCharacteristic? {
        guard let iid = integer(json["iid"]), let typeText = json["type"]?.string, let type = HAPType(typeText) else { return nil }
        var perms: Set<String> = []
        if case .array(let items)? = json["perms"] { perms = Set(items.compactMap(\.string)) }
        var valid: [Int]?
        if case .array(let items)? = json["valid-values"] { valid = items.compactMap { integer($0) } }
        let value: JSONValue? = switch json["value"] { case .none, .null?: nil
        case let some?: some }
        return HAPCharacteristic(
            iid: iid, type: type, perms: perms, format: json["format"]?.string ?? "data", value: value, unit: json["unit"]?.string,
            minValue: json["minValue"]?.number, maxValue: json["maxValue"]?.number, minStep: json["minStep"]?.number,
            validValues: valid, description: json["description"]?.string
        )
    }

    static func integer(_ json: JSONValue?) -> Int? {
        guard let number = json?.number, number.isFinite, number == number.rounded(), abs(number) < 9.0e15 else { return nil }
        return Int(number)
    }
}

/// One characteristic's value in a read, write or event: `{"aid","iid","value"}`, or a `status` when it failed.
public struct CharacteristicValue: Sendable, Equatable {
    public var aid: Int
    public var iid: Int
    public var value: JSONValue?
    public var status: Int?

    public init(aid: Int, iid: Int, value: JSONValue? = nil, status: Int? = nil) {
        self.aid = aid
        self.iid = iid
        self.value = value
        self.status = status
    }

    /// `{"characteristics":[…]}` of a read answer, a 207 write answer or an event.
    public static func parseList(_ bytes: [UInt8]) throws(HAPError) -> [CharacteristicValue] {
        guard !bytes.isEmpty else { return [] }
        let root: JSONValue
        switch JSONValue.parse(bytes) {
        case .success(let value): root = value
        case .failure(let error): throw .malformed("a characteristics body is not JSON: \(error.message)")
        }
        guard case .array(let items)? = root["characteristics"] else { throw .malformed("a characteristics body has no \"characteristics\" array") }
        return items.compactMap { item in
            guard let aid = AccessoryDatabase.integer(item["aid"]), let iid = AccessoryDatabase.integer(item["iid"]) else { return nil }
            let value: JSONValue? = switch item["value"] { case .none, .null?: nil
            case let some?: some }
            return CharacteristicValue(aid: aid, iid: iid, value: value, status: AccessoryDatabase.integer(item["status"]))
        }
    }
}

extension Double {
    /// The integer a HAP number stands for; nil when it is not a whole number Int can hold (no trap on 1e300).
    public var hapInt: Int? { Int(exactly: rounded()) }
}
