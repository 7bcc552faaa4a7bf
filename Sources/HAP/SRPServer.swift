#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ModularPower

/// The accessory's half of HAP's SRP-6a. Controllers disagree on byte forms where a value starts with a zero byte
/// (HomeKitADK and iOS strip, aiohomekit pads S and puts B "as received" into u and M1): B goes out padded to 384
/// bytes, so u = H(PAD(A) ‖ PAD(B)) whatever form a controller hashes, and the proof M1 is checked against every form
/// of A, B and K a controller may have used; the answer M2 and the session key follow the form that matched.
public struct SRPServer: Sendable {
    public let salt: [UInt8]
    let verifier: BigNumber
    let secret: BigNumber
    public let publicValue: BigNumber

    public init(setupCode: String, salt: [UInt8]? = nil, secret: [UInt8]? = nil) {
        var random = SystemRandomNumberGenerator()
        let salt = salt ?? (0..<16).map { _ in UInt8.random(in: 0...255, using: &random) }
        self.salt = salt
        let n = SRPClient.modulus, g = SRPClient.generator
        let inner = SRPClient.sha512(SRPClient.username + Array(":".utf8) + Array(setupCode.utf8))
        let x = BigNumber(bytes: SRPClient.sha512(salt + inner))
        verifier = g.power(x, oddModulus: n)
        self.secret = BigNumber(bytes: secret ?? (0..<32).map { _ in UInt8.random(in: 0...255, using: &random) })
        publicValue = (SRPClient.multiplier * verifier + g.power(self.secret, oddModulus: n)) % n
    }

    /// B as sent in pair-setup M2: padded to the group's 384 bytes.
    public var publicBytes: [UInt8] { SRPClient.padded(publicValue) }

    /// Checks the controller's proof; returns K and the accessory's proof M2. Throws `.authentication` for a
    /// wrong setup code (no form of the proof matches) or an invalid A.
    public func verify(clientPublic: [UInt8], proof: [UInt8]) throws(HAPError) -> (key: [UInt8], serverProof: [UInt8]) {
        let n = SRPClient.modulus
        let a = BigNumber(bytes: clientPublic)
        guard !(a % n).isZero else { throw .authentication("the controller's SRP public value is 0 mod N") }
        let u = BigNumber(bytes: SRPClient.sha512(SRPClient.padded(a) + SRPClient.padded(publicValue)))
        let s = ((a * verifier.power(u, oddModulus: n)) % n).power(secret, oddModulus: n)
        let hashN = SRPClient.sha512(SRPClient.minimal(n)), hashG = SRPClient.sha512(SRPClient.minimal(SRPClient.generator))
        let prefix = zip(hashN, hashG).map { $0 ^ $1 } + SRPClient.sha512(SRPClient.username) + salt
        let keys = unique([SRPClient.sha512(SRPClient.minimal(s)), SRPClient.sha512(SRPClient.padded(s))])
        let aForms = unique([clientPublic, SRPClient.minimal(a), SRPClient.padded(a)])
        let bForms = unique([SRPClient.minimal(publicValue), SRPClient.padded(publicValue)])
        for key in keys {
            for aForm in aForms {
                for bForm in bForms where SRPClient.sha512(prefix + aForm + bForm + key) == proof {
                    return (key, SRPClient.sha512(aForm + proof + key))
                }
            }
        }
        throw .authentication("the SRP proof does not match the setup code")
    }

    private func unique(_ forms: [[UInt8]]) -> [[UInt8]] {
        var seen: [[UInt8]] = []
        for form in forms where !seen.contains(form) { seen.append(form) }
        return seen
    }
}
