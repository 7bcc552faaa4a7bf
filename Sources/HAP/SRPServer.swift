import BigInt
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ModularPower

/// The accessory's half of HAP's SRP-6a, with HomeKitADK's byte forms: B sent minimal, A taken zero-extended,
/// u = H(PAD(A) ‖ PAD(B)), K = H(minimal S), M1 over minimal A and B, M2 = H(PAD(A) ‖ M1 ‖ K).
public struct SRPServer: Sendable {
    public let salt: [UInt8]
    let verifier: BigUInt
    let secret: BigUInt
    public let publicValue: BigUInt

    public init(setupCode: String, salt: [UInt8]? = nil, secret: [UInt8]? = nil) {
        var random = SystemRandomNumberGenerator()
        let salt = salt ?? (0..<16).map { _ in UInt8.random(in: 0...255, using: &random) }
        self.salt = salt
        let n = SRPClient.modulus, g = SRPClient.generator
        let inner = SRPClient.sha512(SRPClient.username + Array(":".utf8) + Array(setupCode.utf8))
        let x = BigUInt(Data(SRPClient.sha512(salt + inner)))
        verifier = g.power(x, oddModulus: n)
        self.secret = BigUInt(Data(secret ?? (0..<32).map { _ in UInt8.random(in: 0...255, using: &random) }))
        publicValue = (SRPClient.multiplier * verifier + g.power(self.secret, oddModulus: n)) % n
    }

    /// B as sent in pair-setup M2.
    public var publicBytes: [UInt8] { SRPClient.minimal(publicValue) }

    /// Checks the controller's proof; returns K and the accessory's proof M2. Throws `.authentication` for a
    /// wrong setup code (the proof does not match) or an invalid A.
    public func verify(clientPublic: [UInt8], proof: [UInt8]) throws(HAPError) -> (key: [UInt8], serverProof: [UInt8]) {
        let n = SRPClient.modulus
        let a = BigUInt(Data(clientPublic))
        guard !(a % n).isZero else { throw .authentication("the controller's SRP public value is 0 mod N") }
        let u = BigUInt(Data(SRPClient.sha512(SRPClient.padded(a) + SRPClient.padded(publicValue))))
        let s = ((a * verifier.power(u, oddModulus: n)) % n).power(secret, oddModulus: n)
        let key = SRPClient.sha512(SRPClient.minimal(s))
        let hashN = SRPClient.sha512(SRPClient.minimal(n)), hashG = SRPClient.sha512(SRPClient.minimal(SRPClient.generator))
        let xored = zip(hashN, hashG).map { $0 ^ $1 }
        let expected = SRPClient.sha512(xored + SRPClient.sha512(SRPClient.username) + salt + SRPClient.minimal(a) + publicBytes + key)
        guard expected == proof else { throw .authentication("the SRP proof does not match the setup code") }
        return (key, SRPClient.sha512(SRPClient.padded(a) + proof + key))
    }
}
