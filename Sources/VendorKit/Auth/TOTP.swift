import Crypto
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// RFC 6238 time-based one-time passwords (HMAC-SHA1, 30 s steps, 6 digits), as authenticator apps compute
/// them, so a vendor with multi-factor sign-in (Sense) can finish it unattended from the account's TOTP secret.
/// HMAC and SHA-1 are swift-crypto's (BoringSSL); SHA-1 remains the algorithm TOTP apps use.
public enum TOTP {
    /// The code for `date` from a base32 secret (spaces and `=` ignored); nil when the secret is not base32.
    public static func code(secret: String, at date: Date, digits: Int = 6, step: Double = 30) -> String? {
        guard let key = base32Decode(secret), !key.isEmpty else { return nil }
        let counter = UInt64(max(0, date.timeIntervalSince1970 / step).rounded(.down))
        return code(key: key, counter: counter, digits: digits)
    }

    /// RFC 4226 HOTP for one counter value.
    public static func code(key: [UInt8], counter: UInt64, digits: Int = 6) -> String {
        let message = (0..<8).map { UInt8(truncatingIfNeeded: counter >> (56 - 8 * UInt64($0))) }
        let mac = Array(HMAC<Insecure.SHA1>.authenticationCode(for: message, using: SymmetricKey(data: key)))
        let offset = Int(mac[19] & 0x0F)
        let binary = (UInt32(mac[offset] & 0x7F) << 24) | (UInt32(mac[offset + 1]) << 16) | (UInt32(mac[offset + 2]) << 8) | UInt32(mac[offset + 3])
        let places = max(1, min(digits, 9))
        var modulus: UInt32 = 1
        for _ in 0..<places { modulus *= 10 }
        let text = String(binary % modulus)
        return String(repeating: "0", count: max(0, places - text.count)) + text
    }

    /// RFC 4648 base32 (the alphabet authenticator apps use); case-insensitive.
    public static func base32Decode(_ text: String) -> [UInt8]? {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
        var bits: UInt64 = 0, count = 0
        var bytes: [UInt8] = []
        for character in text.uppercased() where character != " " && character != "=" && character != "-" {
            guard let value = alphabet.firstIndex(of: character) else { return nil }
            bits = (bits << 5) | UInt64(value)
            count += 5
            if count >= 8 {
                count -= 8
                bytes.append(UInt8(truncatingIfNeeded: bits >> UInt64(count)))
                bits &= (1 << UInt64(count)) - 1
            }
        }
        return bytes
    }
}

/// Lower-case hex of bytes.
public func hexString(_ bytes: some Sequence<UInt8>) -> String {
    let digits = Array("0123456789abcdef")
    return String(bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0x0F)]] })
}
