import BigInt
import Crypto
import Foundation
import ModularPower

/// Cognito's side of `USER_SRP_AUTH`, written from the SRP-6a definitions (RFC 5054, SHA-256) and Cognito's
/// conventions, separately from the gateway's client code: the verifier v = g^x, B = k·v + g^b, and the check
/// S = (A·v^u)^b. A client that signs the claim right is one whose maths agrees with the server's.
struct CognitoSRPServer: Sendable {
    static let n = BigUInt(SRPGroup.prime3072Hex, radix: 16) ?? 0
    static let g = BigUInt(2)

    /// A challenge handed out, kept until the client answers it.
    struct Challenge: Sendable {
        var a: BigUInt
        var b: BigUInt
        var publicB: BigUInt
        var secretBlock: Data
    }

    let poolName: String
    let userID: String
    let salt: Data
    let verifier: BigUInt

    init(poolID: String, userID: String, password: String, salt: Data) {
        poolName = poolID.components(separatedBy: "_").last ?? poolID
        self.userID = userID
        self.salt = salt
        let inner = Data(SHA256.hash(data: Data((poolName + userID + ":" + password).utf8)))
        let x = BigUInt(Data(SHA256.hash(data: Self.signed(BigUInt(salt)) + inner)))
        verifier = Self.g.power(x, oddModulus: Self.n)
    }

    /// k = H(N ‖ g) with both as Cognito pads them (a 00 byte before N's high bit; g as one byte).
    static var k: BigUInt { BigUInt(Data(SHA256.hash(data: signed(n) + Data([2])))) }

    /// A fresh challenge for the client's A; nil when A is 0 mod N (RFC 5054 says abort).
    func challenge(publicA: BigUInt) -> Challenge? {
        guard !(publicA % Self.n).isZero else { return nil }
        let b = BigUInt.randomInteger(withExactWidth: 256)
        let publicB = (Self.k * verifier + Self.g.power(b, oddModulus: Self.n)) % Self.n
        return Challenge(a: publicA, b: b, publicB: publicB, secretBlock: Data((0..<64).map { _ in UInt8.random(in: 0...255) }))
    }

    /// The signature a client that knows the password sends for this challenge and timestamp.
    func expectedSignature(_ challenge: Challenge, timestamp: String) -> String {
        let u = BigUInt(Data(SHA256.hash(data: Self.signed(challenge.a) + Self.signed(challenge.publicB))))
        let s = (challenge.a * verifier.power(u, oddModulus: Self.n)).power(challenge.b, oddModulus: Self.n)
        let key = HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: Self.signed(s)), salt: Self.signed(u),
                                         info: Data("Caldera Derived Key".utf8), outputByteCount: 16)
        let message = Data((poolName + userID).utf8) + challenge.secretBlock + Data(timestamp.utf8)
        return Data(HMAC<SHA256>.authenticationCode(for: message, using: key)).base64EncodedString()
    }

    /// A number's big-endian bytes as a signed integer (Java's BigInteger.toByteArray, which Cognito follows).
    static func signed(_ value: BigUInt) -> Data {
        let bytes = value.serialize()
        guard let first = bytes.first else { return Data([0]) }
        return first >= 0x80 ? Data([0]) + bytes : bytes
    }
}
