#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `application/x-www-form-urlencoded` bodies and query values: everything but RFC 3986's unreserved
/// characters is percent-encoded (so `+`, `&`, `=` in a password or token survive).
public enum FormEncoding {
    private static let hexDigits = Array("0123456789ABCDEF".unicodeScalars)

    public static func escape(_ text: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                escaped.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                escaped.unicodeScalars.append("%")
                escaped.unicodeScalars.append(hexDigits[Int(byte >> 4)])
                escaped.unicodeScalars.append(hexDigits[Int(byte & 0x0F)])
            }
        }
        return escaped
    }

    /// `name=value&…` in the given order.
    public static func body(_ fields: [(String, String)]) -> Data {
        Data(fields.map { "\(escape($0.0))=\(escape($0.1))" }.joined(separator: "&").utf8)
    }
}
