#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// URL text helpers shared by vendor adapters (path segments) and secret redaction (encoded forms).
public enum URLText {
    /// Percent-encodes `text` as one URL path segment: RFC 3986 unreserved characters stay, every other byte is `%XX`.
    public static func percentEncoded(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = String(byte, radix: 16, uppercase: true)
                out += "%" + (hex.count == 1 ? "0" + hex : hex)
            }
        }
        return out
    }
}
