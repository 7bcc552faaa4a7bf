#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel

/// The claims of a JSON Web Token, read without verifying it (the vendor does that): an Envoy token's `exp`,
/// a Flume token's `user_id`.
public enum JWTClaims {
    /// One claim's value. Whole numbers are kept as `Int64`, so a 64-bit user id keeps every digit.
    public enum Claim: Sendable, Equatable, Decodable {
        case text(String)
        case whole(Int64)
        case number(Double)
        /// A boolean, null, list or object: nothing these readers use.
        case other

        public init(from decoder: any Decoder) throws {
            let single = try decoder.singleValueContainer()
            if let text = try? single.decode(String.self) {
                self = .text(text)
            } else if let whole = try? single.decode(Int64.self) {
                self = .whole(whole)
            } else if let number = try? single.decode(Double.self) {
                self = .number(number)
            } else {
                self = .other
            }
        }
    }

    /// The payload (second part)'s claims; nil when `token` is not a JWT with a JSON object payload.
    public static func decode(_ token: String) -> [String: Claim]? {
        let parts = token.split(separator: ".")
        guard parts.count >= 2 else { return nil }
        var payload = String(parts[1]).replacing("-", with: "+").replacing("_", with: "/")
        while payload.count % 4 != 0 { payload += "=" }
        guard let data = Data(base64Encoded: payload) else { return nil }
        return try? JSONDecoder().decode([String: Claim].self, from: data)
    }

    /// The `exp` claim as a date; nil when it is no date ISO 8601 can show (`1e300`), which is no expiry to act on.
    public static func expiry(_ token: String) -> Date? {
        let seconds: Double
        switch decode(token)?["exp"] {
        case .whole(let whole): seconds = Double(whole)
        case .number(let number): seconds = number
        default: return nil
        }
        guard ISOTime.representable.contains(seconds) else { return nil }
        return Date(timeIntervalSince1970: seconds)
    }

    /// A claim as text, whether the token carries it as a string or a number (`user_id`). A number that is not a
    /// whole 64-bit integer (`1e300`, `1.5`) has no text the vendor would recognise: nil, as for a missing claim.
    public static func text(_ name: String, in token: String) -> String? {
        switch decode(token)?[name] {
        case .text(let text): text.isEmpty ? nil : text
        case .whole(let whole): String(whole)
        case .number(let number): Int64(exactly: number).map { String($0) }
        default: nil
        }
    }
}
