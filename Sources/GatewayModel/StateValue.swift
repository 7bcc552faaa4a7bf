/// One normalized reading or setting. JSON numbers, strings and booleans, and flat objects of them for the
/// few keys whose value has parts (`color`: `{"hue":36,"saturation":20}`): every key has one fixed unit (see
/// `StateKeys`), so no unit travels with the value.
public enum StateValue: Sendable, Hashable, Codable, CustomStringConvertible {
    case number(Double)
    case string(String)
    case bool(Bool)
    case object([String: StateValue])

    public var object: [String: StateValue]? {
        if case .object(let value) = self { return value }
        return nil
    }

    public var number: Double? {
        if case .number(let value) = self { return value }
        return nil
    }

    public var string: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    public var bool: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    public var description: String {
        switch self {
        case .number(let value): JSONText.number(value)
        case .string(let value): value
        case .bool(let value): value ? "true" : "false"
        case .object(let members): JSONText.object(members)
        }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else {
            self = .object(try container.decode([String: StateValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .bool(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }
}
