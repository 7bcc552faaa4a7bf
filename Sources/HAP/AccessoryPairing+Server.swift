import Crypto

/// An accessory's long-term identity: its pairing id (`AA:BB:CC:DD:EE:FF`, the `id` of its TXT record) and Ed25519 key.
public struct AccessoryIdentity: Sendable {
    public var pairingID: String
    public var privateKey: Curve25519.Signing.PrivateKey

    public init(pairingID: String, privateKey: Curve25519.Signing.PrivateKey) {
        self.pairingID = pairingID
        self.privateKey = privateKey
    }

    /// A fresh identity with a random id (six random bytes, as accessories make theirs).
    public static func generate() -> AccessoryIdentity {
        var random = SystemRandomNumberGenerator()
        let id = (0..<6).map { _ in String(UInt8.random(in: 0...255, using: &random), radix: 16, uppercase: true) }
            .map { $0.count == 1 ? "0" + $0 : $0 }.joined(separator: ":")
        return AccessoryIdentity(pairingID: id, privateKey: Curve25519.Signing.PrivateKey())
    }

    public var publicKey: [UInt8] { Array(privateKey.publicKey.rawRepresentation) }
}

/// A controller an accessory is paired with: its pairing id, long-term key and whether it is an admin.
public struct ControllerPairing: Sendable, Equatable {
    public var pairingID: String
    public var publicKey: [UInt8]
    public var isAdmin: Bool

    public init(pairingID: String, publicKey: [UInt8], isAdmin: Bool) {
        self.pairingID = pairingID
        self.publicKey = publicKey
        self.isAdmin = isAdmin
    }
}

/// Pair Setup (M1–M6) from the accessory's side. Each `handle` takes one request body and returns the answer;
/// `paired` is set once M5 checked. A wrong code answers M4 with Error 2 (the caller counts failed attempts).
public struct PairSetupServer: Sendable {
    public enum Outcome: Sendable, Equatable {
        case answer([UInt8])
        /// The setup code was wrong (an M4 error answer to send, and one failed attempt to count).
        case wrongCode([UInt8])
        /// M6 to send: the controller is paired.
        case paired([UInt8], ControllerPairing)
    }

    let setupCode: String
    let identity: AccessoryIdentity
    var srp: SRPServer?
    var sessionKey: [UInt8]?
    var expectedState = 1

    public init(setupCode: String, identity: AccessoryIdentity) {
        self.setupCode = setupCode
        self.identity = identity
    }

    public static func error(_ error: TLVError, state: UInt8) -> [UInt8] {
        TLV8([(.state, [state]), (.error, [UInt8(error.rawValue)])]).encoded()
    }

    public mutating func handle(_ body: [UInt8]) -> Outcome {
        guard let tlv = try? TLV8.decode(body), let state = tlv.integer(.state) else {
            return .answer(Self.error(.unknown, state: 2))
        }
        switch state {
        case 1:
            // A new M1 starts over (a controller that retries with a fresh SRP secret).
            guard tlv.integer(.method).map({ $0 == 0 || $0 == 1 }) ?? true else { return .answer(Self.error(.unknown, state: 2)) }
            let srp = SRPServer(setupCode: setupCode)
            self.srp = srp
            sessionKey = nil
            expectedState = 3
            return .answer(TLV8([(.state, [2]), (.salt, srp.salt), (.publicKey, srp.publicBytes)]).encoded())
        case 3:
            guard expectedState == 3, let srp, let a = tlv[.publicKey], let proof = tlv[.proof] else { return .answer(Self.error(.unknown, state: 4)) }
            expectedState = 1
            guard let (key, serverProof) = try? srp.verify(clientPublic: a, proof: proof) else {
                self.srp = nil
                return .wrongCode(Self.error(.authentication, state: 4))
            }
            sessionKey = key
            expectedState = 5
            return .answer(TLV8([(.state, [4]), (.proof, serverProof)]).encoded())
        case 5:
            guard expectedState == 5, let key = sessionKey, let sealed = tlv[.encryptedData] else { return .answer(Self.error(.unknown, state: 6)) }
            expectedState = 1
            sessionKey = nil
            let encryptKey = HAPCrypto.hkdf(key, salt: "Pair-Setup-Encrypt-Salt", info: "Pair-Setup-Encrypt-Info")
            guard let plain = try? HAPCrypto.open(sealed, key: encryptKey, nonce: HAPCrypto.labelNonce("PS-Msg05"), what: "M5"),
                  let inner = try? TLV8.decode(plain), let id = inner[.identifier], let ltpk = inner[.publicKey], ltpk.count == 32,
                  let signature = inner[.signature] else {
                return .answer(Self.error(.authentication, state: 6))
            }
            let controllerX = HAPCrypto.hkdf(key, salt: "Pair-Setup-Controller-Sign-Salt", info: "Pair-Setup-Controller-Sign-Info")
            guard (try? HAPCrypto.verify(signature, of: HAPCrypto.bytes(controllerX) + id + ltpk, publicKey: ltpk, what: "M5")) != nil else {
                return .answer(Self.error(.authentication, state: 6))
            }
            let accessoryX = HAPCrypto.hkdf(key, salt: "Pair-Setup-Accessory-Sign-Salt", info: "Pair-Setup-Accessory-Sign-Info")
            let ownID = Array(identity.pairingID.utf8)
            guard let ownSignature = try? HAPCrypto.sign(HAPCrypto.bytes(accessoryX) + ownID + identity.publicKey, with: identity.privateKey),
                  let sealedReply = try? HAPCrypto.seal(TLV8([(.identifier, ownID), (.publicKey, identity.publicKey), (.signature, ownSignature)]).encoded(),
                                                         key: encryptKey, nonce: HAPCrypto.labelNonce("PS-Msg06")) else {
                return .answer(Self.error(.unknown, state: 6))
            }
            let pairing = ControllerPairing(pairingID: String(decoding: id, as: UTF8.self), publicKey: ltpk, isAdmin: true)
            return .paired(TLV8([(.state, [6]), (.encryptedData, sealedReply)]).encoded(), pairing)
        default:
            return .answer(Self.error(.unknown, state: UInt8(clamping: state + 1)))
        }
    }
}

/// Pair Verify (M1–M4) from the accessory's side: `known` looks up a controller's pairing by id.
public struct PairVerifyServer: Sendable {
    public enum Outcome: Sendable {
        case answer([UInt8])
        /// M4 to send in plaintext; everything after it goes through `channel`. `controller` is who verified.
        case verified([UInt8], channel: SecureChannel, controller: ControllerPairing)
    }

    let identity: AccessoryIdentity
    var ephemeral: Curve25519.KeyAgreement.PrivateKey?
    var shared: [UInt8]?
    var controllerKey: [UInt8]?

    public init(identity: AccessoryIdentity) {
        self.identity = identity
    }

    public mutating func handle(_ body: [UInt8], known: (String) -> ControllerPairing?) -> Outcome {
        guard let tlv = try? TLV8.decode(body), let state = tlv.integer(.state) else {
            return .answer(PairSetupServer.error(.unknown, state: 2))
        }
        switch state {
        case 1:
            guard let key = tlv[.publicKey], key.count == 32, let peer = try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: key) else {
                return .answer(PairSetupServer.error(.unknown, state: 2))
            }
            let ephemeral = Curve25519.KeyAgreement.PrivateKey()
            guard let secret = try? ephemeral.sharedSecretFromKeyAgreement(with: peer) else { return .answer(PairSetupServer.error(.unknown, state: 2)) }
            let shared = secret.withUnsafeBytes { Array($0) }
            let own = Array(ephemeral.publicKey.rawRepresentation)
            let id = Array(identity.pairingID.utf8)
            let verifyKey = HAPCrypto.hkdf(shared, salt: "Pair-Verify-Encrypt-Salt", info: "Pair-Verify-Encrypt-Info")
            guard let signature = try? HAPCrypto.sign(own + id + key, with: identity.privateKey),
                  let sealed = try? HAPCrypto.seal(TLV8([(.identifier, id), (.signature, signature)]).encoded(), key: verifyKey,
                                                   nonce: HAPCrypto.labelNonce("PV-Msg02")) else {
                return .answer(PairSetupServer.error(.unknown, state: 2))
            }
            self.ephemeral = ephemeral
            self.shared = shared
            controllerKey = key
            return .answer(TLV8([(.state, [2]), (.publicKey, own), (.encryptedData, sealed)]).encoded())
        case 3:
            guard let ephemeral, let shared, let controllerKey, let sealed = tlv[.encryptedData] else {
                return .answer(PairSetupServer.error(.authentication, state: 4))
            }
            self.ephemeral = nil
            self.shared = nil
            let verifyKey = HAPCrypto.hkdf(shared, salt: "Pair-Verify-Encrypt-Salt", info: "Pair-Verify-Encrypt-Info")
            guard let plain = try? HAPCrypto.open(sealed, key: verifyKey, nonce: HAPCrypto.labelNonce("PV-Msg03"), what: "M3"),
                  let inner = try? TLV8.decode(plain), let id = inner[.identifier], let signature = inner[.signature],
                  let pairing = known(String(decoding: id, as: UTF8.self)) else {
                return .answer(PairSetupServer.error(.authentication, state: 4))
            }
            let own = Array(ephemeral.publicKey.rawRepresentation)
            guard (try? HAPCrypto.verify(signature, of: controllerKey + id + own, publicKey: pairing.publicKey, what: "M3")) != nil else {
                return .answer(PairSetupServer.error(.authentication, state: 4))
            }
            return .verified(TLV8([(.state, [4])]).encoded(), channel: SecureChannel.accessory(sharedSecret: shared), controller: pairing)
        default:
            return .answer(PairSetupServer.error(.unknown, state: UInt8(clamping: state + 1)))
        }
    }
}
