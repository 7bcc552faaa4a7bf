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

    /// Decodes any value inside a `Decodable` vendor shape (through `init(from:configuration:)`).
    public init(from decoder: any Decoder) throws {
        try self.init(from: decoder, configuration: decoder.codingPath.count)
    }

    fileprivate struct AnyKey: CodingKey {
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

extension JSONValue: DecodableWithConfiguration {
    /// Decodes a value `depth` levels below the document's top, refusing more than `StrictJSON.maxDepth`.
    /// The depth travels down as the configuration, so no level rebuilds its coding path. `Decoder`
    /// cannot tell a value's kind without trying, so containers are tried first (an object costs no
    /// failed probe, an array one, a scalar at most four); the old cascade tried the scalars first at
    /// every level and cost 0.8 s for a 1 kB 500-deep array. Vendor bodies are also checked with
    /// `StrictJSON` before `JSONDecoder` runs (`VendorHTTP.decode`).
    public init(from decoder: any Decoder, configuration depth: Int) throws {
        // Containers only while the limit allows another level (the same rule as `StrictJSON`).
        if depth < StrictJSON.maxDepth {
            if let keyed = try? decoder.container(keyedBy: AnyKey.self) {
                var members: [String: JSONValue] = [:]
                for key in keyed.allKeys {
                    members[key.stringValue] = try keyed.decode(JSONValue.self, forKey: key, configuration: depth + 1)
                }
                self = .object(members)
                return
            }
            if var unkeyed = try? decoder.unkeyedContainer() {
                var items: [JSONValue] = []
                while !unkeyed.isAtEnd {
                    items.append(try unkeyed.decode(JSONValue.self, configuration: depth + 1))
                }
                self = .array(items)
                return
            }
        }
        // Bool before Double: some decoders read true as 1.
        let single = try decoder.singleValueContainer()
        if single.decodeNil() {
            self = .null
        } else if let text = try? single.decode(String.self) {
            self = .string(text)
        } else if let flag = try? single.decode(Bool.self) {
            self = .bool(flag)
        } else if let number = try? single.decode(Double.self) {
            self = .number(number)
        } else {
            throw DecodingError.dataCorrupted(DecodingError.Context(
                codingPath: decoder.codingPath,
                debugDescription: depth >= StrictJSON.maxDepth ? "nesting deeper than \(StrictJSON.maxDepth)" : "not a JSON value"))
        }
    }
}
