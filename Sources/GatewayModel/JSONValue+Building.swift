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

    /// Written as UTF-8 bytes and made a String once: appending to a String cost ~350 instructions a piece
    /// (uniqueness and growth checks), which made rendering 1,000 devices' discovery the bulk of a cold start.
    public func render() -> String {
        var out: [UInt8] = []
        out.reserveCapacity(512)
        write(into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    private func write(into out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let flag): out.append(contentsOf: (flag ? "true" : "false").utf8)
        case .number(let number): JSONText.appendNumber(number, to: &out)
        case .string(let text): JSONText.appendQuoted(text, toBytes: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                item.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            // Keys sorted (equal documents are equal bytes), as pairs: no second hash lookup per key.
            out.append(UInt8(ascii: "{"))
            for (index, member) in members.sorted(by: { $0.key < $1.key }).enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                JSONText.appendQuoted(member.key, toBytes: &out)
                out.append(UInt8(ascii: ":"))
                member.value.write(into: &out)
            }
            out.append(UInt8(ascii: "}"))
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
