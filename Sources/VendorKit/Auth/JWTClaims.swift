import Foundation
import GatewayModel

/// The claims of a JSON Web Token, read without verifying it (the vendor does that): an Envoy token's `exp`,
/// a Flume token's `user_id`.
public enum JWTClaims {
    /// The payload (second part) as a JSON object; nil when `token` is not a JWT.
    public static func decode(_ token: String) -> [String: Any]? {
        let parts = token.split(separator: ".")
        guard parts.count >= 2 else { return nil }
        var payload = String(parts[1]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while payload.count % 4 != 0 { payload += "=" }
        guard let data = Data(base64Encoded: payload) else { return nil }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
    }

    /// The `exp` claim as a date; nil when it is no date ISO 8601 can show (`1e300`), which is no expiry to act on.
    public static func expiry(_ token: String) -> Date? {
        guard let exp = decode(token)?["exp"] else { return nil }
        let seconds: Double
        if let number = exp as? Double { seconds = number } else if let number = exp as? Int { seconds = Double(number) } else { return nil }
        guard ISOTime.representable.contains(seconds) else { return nil }
        return Date(timeIntervalSince1970: seconds)
    }

    /// A claim as text, whether the token carries it as a string or a number (`user_id`). A number that is not a
    /// whole 64-bit integer (`1e300`, `1.5`) has no text the vendor would recognise: nil, as for a missing claim.
    public static func text(_ name: String, in token: String) -> String? {
        switch decode(token)?[name] {
        case let text as String: text.isEmpty ? nil : text
        case let number as Int: String(number)
        case let number as Double: Int64(exactly: number).map { String($0) }
        default: nil
        }
    }
}
