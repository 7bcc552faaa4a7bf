import Crypto
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import VendorKit
import GatewayModel
import ModularPower

/// The client's half of AWS Cognito's `USER_SRP_AUTH` (SRP-6a over the 3072-bit group of RFC 5054 with SHA-256),
/// the password sign-in Emporia's app and PyEmVue use. The password never leaves the box: Cognito sends a salt,
/// its public value B and a secret block; the gateway answers with an HMAC that only the password can make.
///
/// Cognito's conventions (checked against pycognito in `Tests/Fixtures/emporia/srp-vector.json`):
/// - numbers are hashed as hex strings padded to whole bytes, with a `00` byte before a leading high bit;
/// - k = H(00‖N‖0‖g) as hex; u = H(pad(A)‖pad(B)); x = H(pad(salt)‖H(pool‖user id‖":"‖password));
/// - the key is HKDF-SHA256(ikm: pad(S), salt: pad(u), info: "Caldera Derived Key") cut to 16 bytes;
/// - the claim is HMAC-SHA256(key, pool‖user id‖secret block‖timestamp), timestamp as "Thu Mar 5 07:08:09 UTC 2026".
package struct CognitoSRP: Sendable {
    static let modulusHex = SRPGroup.prime3072Hex
    static let modulus = BigNumber(hex: modulusHex) ?? BigNumber(0)
    static let generator = BigNumber(2)
    static let multiplier = BigNumber(hex: hexHash("00" + modulusHex + "02")) ?? BigNumber(0)

    /// The random secret `a` and the public `A = g^a mod N` sent in `SRP_A`.
    let secret: BigNumber
    let publicValue: BigNumber

    /// A fresh `a` of 256 random bits (RFC 5054 asks for at least 256); `secret` is given only by tests.
    init(secret: BigNumber? = nil) {
        var generator = SystemRandomNumberGenerator()
        let a = secret ?? BigNumber(bytes: (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) })
        self.secret = a
        publicValue = Self.generator.power(a, oddModulus: Self.modulus)
    }

    /// `SRP_A` as Cognito takes it: plain hex.
    var srpA: String { publicValue.hex }

    enum Failure: Error, Equatable {
        /// B, the salt or the secret block is not what SRP needs; signing anyway could leak the password.
        case badChallenge(String)
    }

    /// The `PASSWORD_CLAIM_SIGNATURE` for Cognito's `PASSWORD_VERIFIER` challenge.
    func passwordClaim(poolID: String, userIDForSRP: String, password: String, salt: String, serverB: String,
                       secretBlock: String, timestamp: String) throws(Failure) -> String {
        guard let b = BigNumber(hex: serverB), !(b % Self.modulus).isZero else { throw .badChallenge("SRP_B is not a valid public value") }
        guard BigNumber(hex: salt) != nil else { throw .badChallenge("SALT is not hex") }
        guard let block = Data(base64Encoded: secretBlock) else { throw .badChallenge("SECRET_BLOCK is not base64") }
        let u = BigNumber(hex: Self.hexHash(Self.padded(publicValue) + Self.padded(b))) ?? BigNumber(0)
        guard !u.isZero else { throw .badChallenge("the scrambling value u is zero") }
        let pool = Self.poolName(poolID)
        let identity = Self.hex(SHA256.hash(data: Data((pool + userIDForSRP + ":" + password).utf8)))
        let x = BigNumber(hex: Self.hexHash(Self.padded(hex: salt) + identity)) ?? BigNumber(0)
        let n = Self.modulus
        // S = (B − k·g^x)^(a + u·x) mod N, kept non-negative.
        let kgx = (Self.multiplier * Self.generator.power(x, oddModulus: n)) % n
        let base = ((b % n) + n - kgx) % n
        let s = base.power(secret + u * x, oddModulus: n)
        let key = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: Self.bytes(hex: Self.padded(s))),
            salt: Self.bytes(hex: Self.padded(hex: u.hex)),
            info: Data("Caldera Derived Key".utf8), outputByteCount: 16
        )
        var message = Data((pool + userIDForSRP).utf8)
        message.append(block)
        message.append(Data(timestamp.utf8))
        return Data(HMAC<SHA256>.authenticationCode(for: message, using: key)).base64EncodedString()
    }

    /// Cognito's timestamp: `EEE MMM d HH:mm:ss 'UTC' yyyy` in English, UTC, the day not zero-padded.
    package static func timestamp(_ date: Date) -> String {
        let parts = LocalZone.utc.components(of: date)
        let weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        let weekday = weekdays[(parts.weekday - 1) % 7]
        let month = months[(parts.month - 1) % 12]
        let time = "\(parts.hour.zeroPadded(2)):\(parts.minute.zeroPadded(2)):\(parts.second.zeroPadded(2))"
        return "\(weekday) \(month) \(parts.day) \(time) UTC \(parts.year)"
    }

    /// The pool's name: `us-east-2_ghlOXVLi1` → `ghlOXVLi1`.
    static func poolName(_ poolID: String) -> String {
        poolID.split(separator: "_", maxSplits: 1).last.map(String.init) ?? poolID
    }

    // MARK: Cognito's hex conventions

    static func padded(_ value: BigNumber) -> String { padded(hex: value.hex) }

    /// Whole bytes, and a `00` byte first when the top bit is set (so the number reads as positive).
    static func padded(hex: String) -> String {
        if hex.count % 2 == 1 { return "0" + hex }
        if let first = hex.first, "89abcdefABCDEF".contains(first) { return "00" + hex }
        return hex
    }

    static func hexHash(_ hex: String) -> String { Self.hex(SHA256.hash(data: bytes(hex: hex))) }

    static func hex(_ digest: some Sequence<UInt8>) -> String { hexString(digest) }

    static func bytes(hex: String) -> Data {
        var data = Data(capacity: hex.count / 2)
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2, limitedBy: hex.endIndex) ?? hex.endIndex
            data.append(UInt8(hex[index..<next], radix: 16) ?? 0)
            index = next
        }
        return data
    }
}
