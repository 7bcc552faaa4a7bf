/// One normalized reading or setting. JSON numbers, strings and booleans only:
/// every key has one fixed unit (see `StateKeys`), so no unit travels with the value.
public enum StateValue: Sendable, Hashable, Codable, CustomStringConvertible {
    case number(Double)
    case string(String)
    case bool(Bool)

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
        }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else {
            self = .string(try container.decode(String.self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .bool(let value): try container.encode(value)
        }
    }
}
