/// Building JSON in code: literals, conversions from state values, and rendering with sorted keys, so equal
/// documents are equal bytes (discovery is only re-published when its bytes change). Parsing is in
/// `JSONValue.swift`: one value type for both directions.
extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByFloatLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    public init(floatLiteral value: Double) { self = .number(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }

    public init(_ value: StateValue) {
        switch value {
        case .number(let n): self = .number(n)
        case .string(let s): self = .string(s)
        case .bool(let b): self = .bool(b)
        case .object(let members): self = .object(members.mapValues(JSONValue.init))
        }
    }

    /// `.string` for a value, `.null` for nil.
    public static func optional(_ text: String?) -> JSONValue { text.map(JSONValue.string) ?? .null }

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
        case .string(let text): JSONText.appendQuoted(text, to: &out)
        case .array(let items): JSONText.appendArray(items, to: &out) { item, out in item.write(into: &out) }
        case .object(let members): JSONText.appendObject(members, to: &out) { value, out in value.write(into: &out) }
        }
    }

    /// Drops members whose value is null (optional fields that are not set).
    public var compacted: JSONValue {
        guard case .object(let members) = self else { return self }
        return .object(members.filter { $0.value != .null })
    }
}

/// The name the gateway's code builds documents with: the same type as `JSONValue`.
public typealias JSON = JSONValue
