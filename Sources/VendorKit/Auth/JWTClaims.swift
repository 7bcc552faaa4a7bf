import Foundation

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

    /// The `exp` claim as a date.
    public static func expiry(_ token: String) -> Date? {
        guard let exp = decode(token)?["exp"] else { return nil }
        if let seconds = exp as? Double { return Date(timeIntervalSince1970: seconds) }
        if let seconds = exp as? Int { return Date(timeIntervalSince1970: Double(seconds)) }
        return nil
    }

    /// A claim as text, whether the token carries it as a string or a number (`user_id`).
    public static func text(_ name: String, in token: String) -> String? {
        switch decode(token)?[name] {
        case let text as String: text.isEmpty ? nil : text
        case let number as Int: String(number)
        case let number as Double where number.rounded() == number: String(Int64(number))
        default: nil
        }
    }
}
