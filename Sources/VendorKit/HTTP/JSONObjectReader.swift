import GatewayModel

/// Reads a vendor answer from the tree `StrictJSON` already parsed (`VendorHTTP` checks every body with it)
/// instead of parsing the bytes again with `JSONDecoder`. Meant for the answers on a command's path: there
/// `JSONDecoder`'s generic machinery took about 35 µs of a 0.8 ms `/set` → vendor → state round trip
/// (measured in place, where its code is cold), the tree lookups a few.
///
/// Missing or mistyped fields throw the `DecodingError` `JSONDecoder` would throw at the same path, so
/// `ErrorClassifier.classifyDecoding` words them the same way: absent and `null` read as nil for optional
/// fields, any other kind is a type mismatch.
public struct JSONObjectReader: Sendable {
    public let members: [String: JSONValue]
    /// Where the object is in the answer ("device"), for error messages.
    public let path: [String]

    /// Reads `value` as an object; a type mismatch when it is another kind.
    public init(_ value: JSONValue, path: [String] = []) throws {
        guard case .object(let members) = value else {
            throw DecodingError.typeMismatch([String: Any].self, Self.context(path, "Expected an object but found \(value.brief)."))
        }
        self.members = members
        self.path = path
    }

    /// A string field; nil when absent or null.
    public func string(_ key: String) throws -> String? {
        switch members[key] {
        case nil, .null?: return nil
        case .string(let text)?: return text
        case let other?: throw DecodingError.typeMismatch(String.self, Self.context(path + [key], "Expected a string but found \(other.brief)."))
        }
    }

    /// A string field that must be there.
    public func requiredString(_ key: String) throws -> String {
        switch members[key] {
        case nil:
            throw DecodingError.keyNotFound(Key(key), Self.context(path, "No value for '\(key)'."))
        case .null?:
            throw DecodingError.valueNotFound(String.self, Self.context(path + [key], "Expected a string but found null."))
        default:
            return try string(key) ?? ""
        }
    }

    /// An object field, to read further; nil when absent or null.
    public func object(_ key: String) throws -> JSONObjectReader? {
        guard let value = members[key], value != .null else { return nil }
        return try JSONObjectReader(value, path: path + [key])
    }

    /// An object field's members as they are (free-form properties); nil when absent or null.
    public func objectMembers(_ key: String) throws -> [String: JSONValue]? {
        try object(key)?.members
    }

    /// A coding key for the errors' paths (`describeDecoding` prints string values).
    struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ name: String) { stringValue = name }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    static func context(_ path: [String], _ description: String) -> DecodingError.Context {
        DecodingError.Context(codingPath: path.map { Key($0) }, debugDescription: description)
    }
}
