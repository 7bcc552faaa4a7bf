#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel

/// The python-matter-server WebSocket API (schema 11; matterjs-server keeps it): what the server sends.
/// Attribute values are raw TLV turned JSON: integers up to 64 bits, float32 noise, base64 octet strings,
/// structs as objects keyed by field tag (`"0"`, `"1"`), null for a nullable attribute without a value.

/// A JSON value that keeps integers whole (node ids and event numbers need 64 bits, not a Double).
enum MatterValue: Sendable, Hashable, Decodable {
    case int(Int64)
    case uint(UInt64)
    case double(Double)
    case bool(Bool)
    case string(String)
    case array([MatterValue])
    case object([String: MatterValue])
    case null

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() { self = .null } else if let value = try? container.decode(Bool.self) { self = .bool(value) } else if let value = try? container.decode(Int64.self) {
            self = .int(value)
        } else if let value = try? container.decode(UInt64.self) { self = .uint(value) } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) { self = .string(value) } else if let value = try? container.decode([MatterValue].self) {
            self = .array(value)
        } else { self = .object(try container.decode([String: MatterValue].self)) }
    }

    /// A number as a Double (integers too); nil for anything else.
    var number: Double? {
        switch self {
        case .int(let value): Double(value)
        case .uint(let value): Double(value)
        case .double(let value): value.isFinite ? value : nil
        default: nil
        }
    }

    /// A whole number; nil for a fraction or anything else.
    var integer: Int64? {
        switch self {
        case .int(let value): value
        case .uint(let value): Int64(exactly: value)
        case .double(let value): value.rounded() == value ? Int64(exactly: value) : nil
        default: nil
        }
    }

    /// A whole number of 0 or more (node ids use all 64 bits); nil for a negative number or anything else.
    var unsigned: UInt64? {
        switch self {
        case .uint(let value): value
        case .int(let value): value >= 0 ? UInt64(value) : nil
        default: integer.flatMap { $0 >= 0 ? UInt64($0) : nil }
        }
    }

    /// JSON text with integers written whole (a request's node id must reach the server exactly).
    func render() -> String {
        var out = ""
        write(into: &out)
        return out
    }

    private func write(into out: inout String) {
        switch self {
        case .int(let value): out += String(value)
        case .uint(let value): out += String(value)
        case .double(let value): out += JSONText.number(value)
        case .bool(let flag): out += flag ? "true" : "false"
        case .string(let text): JSONText.appendQuoted(text, to: &out)
        case .null: out += "null"
        case .array(let items): JSONText.appendArray(items, to: &out) { item, out in item.write(into: &out) }
        case .object(let members): JSONText.appendObject(members, to: &out) { value, out in value.write(into: &out) }
        }
    }

    var bool: Bool? { if case .bool(let value) = self { value } else { nil } }

    var string: String? { if case .string(let value) = self { value } else { nil } }

    var array: [MatterValue]? { if case .array(let value) = self { value } else { nil } }

    /// A struct's field by tag.
    subscript(field tag: Int) -> MatterValue? { if case .object(let fields) = self { fields[String(tag)] } else { nil } }

    /// The SDK's marker for a value it could not decode: treated as absent.
    var isUndecodable: Bool {
        if case .object(let fields) = self { return fields.keys.contains("TLVValue") && fields.keys.contains("Reason") }
        return false
    }
}

/// The first frame on a connection, and `server_info`'s result.
struct MatterServerInfo: Decodable, Sendable {
    var fabric_id: UInt64?
    var compressed_fabric_id: UInt64?
    var schema_version: Int
    var min_supported_schema_version: Int?
    var sdk_version: String?
    var wifi_credentials_set: Bool?
    var thread_credentials_set: Bool?
    var bluetooth_enabled: Bool?
}

/// One commissioned node as the server knows it: its attributes by `endpoint/cluster/attribute`.
struct MatterNode: Sendable {
    var node_id: UInt64
    var available: Bool
    var is_bridge: Bool?
    var attributes: [String: MatterValue]

    init(node_id: UInt64, available: Bool, is_bridge: Bool? = nil, attributes: [String: MatterValue]) {
        self.node_id = node_id
        self.available = available
        self.is_bridge = is_bridge
        self.attributes = attributes
    }

    /// The value at `endpoint/cluster/attribute`, nil when absent, null or undecodable.
    func value(_ endpoint: Int, _ cluster: Int, _ attribute: Int) -> MatterValue? {
        guard let value = attributes["\(endpoint)/\(cluster)/\(attribute)"], value != .null, !value.isUndecodable else { return nil }
        return value
    }
}

/// Any message from the server: a result, an error, an event, or (first) the server's info.
struct MatterIncoming: Decodable, Sendable {
    var message_id: String?
    var result: MatterValue?
    var error_code: Int?
    var details: String?
    var event: String?
    var data: MatterValue?
    var schema_version: Int?
}

/// `node_event`'s data: a device event (a button press, a lock operation).
struct MatterNodeEvent: Sendable {
    var node_id: UInt64
    var endpoint_id: Int
    var cluster_id: Int
    var event_id: Int
    var event_number: UInt64?
    var data: MatterValue?
}

extension MatterNode {
    /// A node inside a result or event (`start_listening`, `node_added`, `node_updated`, `get_node`), or a dump.
    init?(_ value: MatterValue) {
        guard case .object(let fields) = value, let id = fields["node_id"]?.unsigned else { return nil }
        var attributes: [String: MatterValue] = [:]
        if case .object(let values)? = fields["attributes"] { attributes = values }
        self.init(node_id: id, available: fields["available"]?.bool ?? false, is_bridge: fields["is_bridge"]?.bool, attributes: attributes)
    }
}

extension MatterNodeEvent {
    init?(_ value: MatterValue) {
        guard case .object(let fields) = value, let node = fields["node_id"]?.unsigned,
              let endpoint = fields["endpoint_id"]?.integer, let cluster = fields["cluster_id"]?.integer, let event = fields["event_id"]?.integer else {
            return nil
        }
        self.init(node_id: node, endpoint_id: Int(endpoint), cluster_id: Int(cluster), event_id: Int(event),
                  event_number: fields["event_number"]?.unsigned, data: fields["data"])
    }
}
