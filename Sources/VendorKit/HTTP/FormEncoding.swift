#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel

/// `application/x-www-form-urlencoded` bodies and query values: everything but RFC 3986's unreserved
/// characters is percent-encoded (so `+`, `&`, `=` in a password or token survive).
public enum FormEncoding {
    public static func escape(_ text: String) -> String { URLText.percentEncoded(text) }

    /// `name=value&…` in the given order.
    public static func body(_ fields: [(String, String)]) -> Data {
        Data(fields.map { "\(escape($0.0))=\(escape($0.1))" }.joined(separator: "&").utf8)
    }
}
