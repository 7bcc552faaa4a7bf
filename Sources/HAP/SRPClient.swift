import Crypto
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ModularPower

/// The controller's half of HAP's SRP-6a: RFC 5054's 3072-bit group with g = 5, SHA-512, user "Pair-Setup",
/// password = the setup code with its dashes.
///
/// Byte forms follow Apple's reference accessory (HomeKitADK), which other accessories copy: A is sent in its
/// minimal form (an accessory zero-extends it), u = H(PAD(A) ‖ PAD(B)), K = H(minimal S) (always 64 bytes), and
/// M1 hashes the minimal A and B. HAP-python truncates K when its first byte is 0 (1 pairing in 256): that
/// accessory then refuses the proof, and `PairSetupClient` starts over with a fresh `a` (see `hasLeadingZeroHazard`).
public struct SRPClient: Sendable {
    public static let modulus = BigNumber(hex: SRPGroup.prime3072Hex) ?? BigNumber(0)
    public static let generator = BigNumber(5)
    public static let width = 384
    public static let username = Array("Pair-Setup".utf8)
    /// k = H(N ‖ PAD(g)).
    static let multiplier = BigNumber(bytes: sha512(padded(modulus) + padded(generator)))

    let secret: BigNumber
    /// A = g^a mod N.
    public let publicValue: BigNumber

    /// A fresh `a` of 256 random bits; `secret` is given only by tests.
    public init(secret: [UInt8]? = nil) {
        var random = SystemRandomNumberGenerator()
        let bytes = secret ?? (0..<32).map { _ in UInt8.random(in: 0...255, using: &random) }
        self.secret = BigNumber(bytes: bytes)
        publicValue = Self.generator.power(self.secret, oddModulus: Self.modulus)
    }

    /// A as sent in pair-setup M3: its minimal big-endian form.
    public var publicBytes: [UInt8] { Self.minimal(publicValue) }

    /// What the accessory's salt and B give: the client proof M1 for M3, the shared key K, and the proof the
    /// accessory must answer with (M2) in the two forms accessories compute it.
    public struct Session: Sendable {
        public var proof: [UInt8]
        public var key: [UInt8]
        /// H(A ‖ M1 ‖ K) with A minimal (HAP-python) and padded (HomeKitADK); they differ only when A's first byte is 0.
        public var expectedServerProofs: [[UInt8]]
        /// True when K starts with a zero byte: an accessory that truncates K (HAP-python) will compute other proofs.
        public var hasLeadingZeroHazard: Bool
    }

    public func session(salt: [UInt8], serverPublic: [UInt8], setupCode: String) throws(HAPError) -> Session {
        let n = Self.modulus
        let b = BigNumber(bytes: serverPublic)
        guard !(b % n).isZero else { throw .authentication("pair-setup M2: the accessory's SRP public value is 0 mod N") }
        let u = BigNumber(bytes: Self.sha512(Self.padded(publicValue) + Self.padded(b)))
        guard !u.isZero else { throw .authentication("pair-setup M2: the SRP scrambling value u is 0") }
        let inner = Self.sha512(Self.username + Array(":".utf8) + Array(setupCode.utf8))
        let x = BigNumber(bytes: Self.sha512(salt + inner))
        // S = (B − k·g^x)^(a + u·x) mod N, kept non-negative.
        let kgx = (Self.multiplier * Self.generator.power(x, oddModulus: n)) % n
        let base = ((b % n) + n - kgx) % n
        let s = base.power(secret + u * x, oddModulus: n)
        let key = Self.sha512(Self.minimal(s))
        let hashN = Self.sha512(Self.minimal(n)), hashG = Self.sha512(Self.minimal(Self.generator))
        let xored = zip(hashN, hashG).map { $0 ^ $1 }
        let a = Self.minimal(publicValue)
        let proof = Self.sha512(xored + Self.sha512(Self.username) + salt + a + Self.minimal(b) + key)
        let expected = [Self.sha512(a + proof + key), Self.sha512(Self.padded(publicValue) + proof + key)]
        return Session(proof: proof, key: key, expectedServerProofs: expected, hasLeadingZeroHazard: key.first == 0)
    }

    static func sha512(_ bytes: [UInt8]) -> [UInt8] { Array(SHA512.hash(data: bytes)) }

    static func minimal(_ value: BigNumber) -> [UInt8] {
        let bytes = value.bytes
        return bytes.isEmpty ? [0] : bytes
    }

    static func padded(_ value: BigNumber) -> [UInt8] {
        let bytes = value.bytes
        return bytes.count >= width ? bytes : [UInt8](repeating: 0, count: width - bytes.count) + bytes
    }
}
