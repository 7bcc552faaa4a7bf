#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Any JSON value, decoded strictly (booleans stay booleans, numbers stay numbers).
public enum JSONValue: Sendable, Hashable, Decodable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// Decodes any value inside a `Decodable` vendor shape, at most `StrictJSON.maxDepth` levels deep.
    /// `Decoder` cannot say a value's kind without a try, so kinds are probed in one fixed order: at most
    /// four failed probes per value, each costing O(depth), and the depth cap (checked first) bounds that,
    /// so decoding stays linear. (Uncapped, a 500-deep array cost 0.8 s of CPU.) Vendor bodies are also
    /// checked with `StrictJSON` before `JSONDecoder` runs (`VendorHTTP.decode`).
    public init(from decoder: any Decoder) throws {
        let depth = decoder.codingPath.count
        guard depth < StrictJSON.maxDepth else {
            throw DecodingError.dataCorrupted(DecodingError.Context(
                codingPath: decoder.codingPath, debugDescription: "nesting deeper than \(StrictJSON.maxDepth)"))
        }
        let single = try decoder.singleValueContainer()
        if single.decodeNil() {
            self = .null
        } else if let text = try? single.decode(String.self) {
            self = .string(text)
        } else if let flag = try? single.decode(Bool.self) {
            self = .bool(flag)
        } else if let number = try? single.decode(Double.self) {
            self = .number(number)
        } else if let keyed = try? decoder.container(keyedBy: AnyKey.self) {
            var members: [String: JSONValue] = [:]
            for key in keyed.allKeys {
                members[key.stringValue] = try keyed.decode(JSONValue.self, forKey: key)
            }
            self = .object(members)
        } else {
            var unkeyed = try decoder.unkeyedContainer()
            var items: [JSONValue] = []
            while !unkeyed.isAtEnd {
                items.append(try unkeyed.decode(JSONValue.self))
            }
            self = .array(items)
        }
    }

    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// Parses UTF-8 JSON text strictly (`StrictJSON`: RFC 8259, duplicate keys refused, nesting at most
    /// `StrictJSON.maxDepth`), with a readable reason on failure.
    public static func parse(_ bytes: [UInt8]) -> Result<JSONValue, GatewayError> {
        switch StrictJSON.parse(bytes) {
        case .success(let value): return .success(value)
        case .failure(let error):
            // Bytes that are not UTF-8 anywhere (not only inside strings) get their own code.
            if error.kind == .invalidUTF8 || String(validating: bytes, as: UTF8.self) == nil { return .failure(.invalidUTF8()) }
            return .failure(.invalidJSON(error.description))
        }
    }

    public subscript(key: String) -> JSONValue? {
        if case .object(let object) = self { return object[key] }
        return nil
    }

    public var string: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    public var number: Double? {
        if case .number(let value) = self { return value }
        return nil
    }

    public var bool: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// A compact description for error messages.
    public var brief: String {
        switch self {
        case .null: "null"
        case .bool(let flag): flag ? "true" : "false"
        case .number(let number): JSONText.number(number)
        case .string(let text): JSONText.quoted(String(text.prefix(40)))
        case .array: "a list"
        case .object: "an object"
        }
    }
}
