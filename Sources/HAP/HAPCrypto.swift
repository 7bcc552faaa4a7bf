import Crypto
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The few primitives HAP combines: HKDF-SHA-512 to 32-byte keys, ChaCha20-Poly1305 with HAP's nonces, Ed25519.
enum HAPCrypto {
    static func hkdf(_ secret: [UInt8], salt: String, info: String) -> SymmetricKey {
        HKDF<SHA512>.deriveKey(inputKeyMaterial: SymmetricKey(data: secret), salt: Array(salt.utf8), info: Array(info.utf8), outputByteCount: 32)
    }

    /// Pairing messages' nonce: four zero bytes and an 8-character label (`PS-Msg05`, `PV-Msg02` …).
    static func labelNonce(_ label: String) -> [UInt8] {
        [0, 0, 0, 0] + Array(label.utf8.prefix(8))
    }

    /// Session frames' nonce: four zero bytes and the frame counter, little-endian.
    static func counterNonce(_ counter: UInt64) -> [UInt8] {
        var nonce: [UInt8] = [0, 0, 0, 0]
        withUnsafeBytes(of: counter.littleEndian) { nonce.append(contentsOf: $0) }
        return nonce
    }

    /// ciphertext ‖ 16-byte tag.
    static func seal(_ plaintext: [UInt8], key: SymmetricKey, nonce: [UInt8], aad: [UInt8] = []) throws(HAPError) -> [UInt8] {
        do {
            let box = try ChaChaPoly.seal(plaintext, using: key, nonce: ChaChaPoly.Nonce(data: nonce), authenticating: aad)
            return Array(box.ciphertext) + Array(box.tag)
        } catch {
            throw .decryption("ChaCha20-Poly1305 could not seal: \(error)")
        }
    }

    /// Opens ciphertext ‖ tag; throws when the tag does not check.
    static func open(_ sealed: [UInt8], key: SymmetricKey, nonce: [UInt8], aad: [UInt8] = [], what: String) throws(HAPError) -> [UInt8] {
        guard sealed.count >= 16 else { throw .malformed("\(what) is shorter than its 16-byte tag") }
        do {
            let box = try ChaChaPoly.SealedBox(nonce: ChaChaPoly.Nonce(data: nonce), ciphertext: sealed.dropLast(16), tag: sealed.suffix(16))
            return Array(try ChaChaPoly.open(box, using: key, authenticating: aad))
        } catch {
            throw .decryption("\(what) did not decrypt (wrong key or tampered)")
        }
    }

    static func sign(_ message: [UInt8], with key: Curve25519.Signing.PrivateKey) throws(HAPError) -> [UInt8] {
        do { return Array(try key.signature(for: message)) } catch { throw .authentication("Ed25519 signing failed: \(error)") }
    }

    static func verify(_ signature: [UInt8], of message: [UInt8], publicKey: [UInt8], what: String) throws(HAPError) {
        guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: publicKey) else {
            throw .malformed("\(what): the long-term public key is not 32 bytes of Ed25519")
        }
        guard key.isValidSignature(signature, for: message) else { throw .authentication("\(what): the signature does not check") }
    }

    static func bytes(_ key: SymmetricKey) -> [UInt8] { key.withUnsafeBytes { Array($0) } }
}

/// The controller's long-term identity: its pairing id (an uppercase UUID: HAP-python parses it as one, and iOS 16
/// expects uppercase) and its Ed25519 key pair.
public struct ControllerIdentity: Sendable {
    public var pairingID: String
    public var privateKey: Curve25519.Signing.PrivateKey

    public init(pairingID: String, privateKey: Curve25519.Signing.PrivateKey) {
        self.pairingID = pairingID
        self.privateKey = privateKey
    }

    public static func generate() -> ControllerIdentity {
        ControllerIdentity(pairingID: UUID().uuidString.uppercased(), privateKey: Curve25519.Signing.PrivateKey())
    }

    public var publicKey: [UInt8] { Array(privateKey.publicKey.rawRepresentation) }
    public var secretKey: [UInt8] { Array(privateKey.rawRepresentation) }
}

/// What a controller keeps of an accessory after pair-setup: its pairing id (the `id` of its TXT record) and
/// Ed25519 long-term public key.
public struct AccessoryPairing: Sendable, Equatable {
    public var accessoryID: String
    public var publicKey: [UInt8]

    public init(accessoryID: String, publicKey: [UInt8]) {
        self.accessoryID = accessoryID
        self.publicKey = publicKey
    }
}
