import GatewayModel

/// A JSON document built in code and rendered with sorted keys, so equal documents are equal bytes
/// (discovery is only re-published when its bytes change).
public indirect enum JSON: Sendable, Hashable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByFloatLiteral
{
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSON])
    case object([String: JSON])

    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    public init(floatLiteral value: Double) { self = .number(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSON...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSON)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }

    public init(_ value: StateValue) {
        switch value {
        case .number(let n): self = .number(n)
        case .string(let s): self = .string(s)
        case .bool(let b): self = .bool(b)
        case .object(let members): self = .object(members.mapValues(JSON.init))
        }
    }

    /// `.string` for a value, `.null` for nil.
    public static func optional(_ text: String?) -> JSON { text.map(JSON.string) ?? .null }

    public func render() -> String {
        var out = ""
        write(into: &out)
        return out
    }

    private func write(into out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let flag): out += flag ? "true" : "false"
        case .number(let number): out += JSONText.number(number)
        case .string(let text): out += JSONText.quoted(text)
        case .array(let items):
            out += "["
            for (index, item) in items.enumerated() {
                if index > 0 { out += "," }
                item.write(into: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            var first = true
            for key in members.keys.sorted() {
                guard let value = members[key] else { continue }
                if !first { out += "," }
                first = false
                out += JSONText.quoted(key)
                out += ":"
                value.write(into: &out)
            }
            out += "}"
        }
    }

    /// Drops members whose value is null (optional fields that are not set).
    public var compacted: JSON {
        guard case .object(let members) = self else { return self }
        return .object(members.filter { $0.value != .null })
    }
}

extension JSON {
    public init(_ value: JSONValue) {
        switch value {
        case .null: self = .null
        case .bool(let flag): self = .bool(flag)
        case .number(let number): self = .number(number)
        case .string(let text): self = .string(text)
        case .array(let items): self = .array(items.map(JSON.init))
        case .object(let members): self = .object(members.mapValues(JSON.init))
        }
    }
}
