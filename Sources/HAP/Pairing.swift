import Crypto

/// Reads one pairing answer: its TLV8, an accessory error as `.refused`, and the state it must have.
func pairingAnswer(_ bytes: [UInt8], state: Int, step: String) throws(HAPError) -> TLV8 {
    let tlv = try TLV8.decode(bytes)
    if let code = tlv.integer(.error) {
        throw .refused(TLVError(rawValue: code) ?? .unknown, step: step, retryDelay: tlv.integer(.retryDelay))
    }
    guard tlv.integer(.state) == state else {
        throw .malformed("\(step): expected state \(state), got \(tlv.integer(.state).map(String.init) ?? "none")")
    }
    return tlv
}

/// Pair Setup (M1–M6) from the controller's side: SRP with the setup code, then an exchange of long-term
/// Ed25519 keys, each signed with a key only the two sides know.
public struct PairSetupClient: Sendable {
    public let setupCode: String
    public let identity: ControllerIdentity
    let srp: SRPClient
    var session: SRPClient.Session?

    public init(setupCode: String, identity: ControllerIdentity, srp: SRPClient = SRPClient()) {
        self.setupCode = setupCode
        self.identity = identity
        self.srp = srp
    }

    /// True when this attempt's K starts with a zero byte: an accessory refusing the proof may have truncated
    /// it (HAP-python), so a new attempt with a fresh SRP secret is worth making before blaming the setup code.
    public var mayRetryRefusal: Bool { session?.hasLeadingZeroHazard ?? false }

    /// M1: State 1, Method 0 (pair setup without MFi authentication).
    public func m1() -> [UInt8] {
        TLV8([(.state, [1]), (.method, [PairingMethod.pairSetup.rawValue])]).encoded()
    }

    /// M3 from the accessory's salt and B: A and the proof.
    public mutating func m3(answering m2: [UInt8]) throws(HAPError) -> [UInt8] {
        let tlv = try pairingAnswer(m2, state: 2, step: "pair-setup M2")
        guard let salt = tlv[.salt], let b = tlv[.publicKey], !b.isEmpty else {
            throw .malformed("pair-setup M2 lacks the salt or the SRP public value")
        }
        let session = try srp.session(salt: salt, serverPublic: b, setupCode: setupCode)
        self.session = session
        return TLV8([(.state, [3]), (.publicKey, srp.publicBytes), (.proof, session.proof)]).encoded()
    }

    /// M5 once the accessory proved it knows the setup code: the controller's long-term key, signed.
    public func m5(answering m4: [UInt8]) throws(HAPError) -> [UInt8] {
        let tlv = try pairingAnswer(m4, state: 4, step: "pair-setup M4")
        guard let session else { throw .malformed("pair-setup M4 arrived before M2") }
        guard let proof = tlv[.proof], session.expectedServerProofs.contains(proof) else {
            throw .authentication("pair-setup M4: the accessory's SRP proof does not match (it does not know this setup code)")
        }
        let signKey = HAPCrypto.hkdf(session.key, salt: "Pair-Setup-Controller-Sign-Salt", info: "Pair-Setup-Controller-Sign-Info")
        let id = Array(identity.pairingID.utf8)
        let signature = try HAPCrypto.sign(HAPCrypto.bytes(signKey) + id + identity.publicKey, with: identity.privateKey)
        let inner = TLV8([(.identifier, id), (.publicKey, identity.publicKey), (.signature, signature)]).encoded()
        let sealed = try HAPCrypto.seal(inner, key: encryptionKey(session), nonce: HAPCrypto.labelNonce("PS-Msg05"))
        return TLV8([(.state, [5]), (.encryptedData, sealed)]).encoded()
    }

    /// The accessory's pairing id and long-term key from M6, its signature checked.
    public func finish(answering m6: [UInt8]) throws(HAPError) -> AccessoryPairing {
        let tlv = try pairingAnswer(m6, state: 6, step: "pair-setup M6")
        guard let session else { throw .malformed("pair-setup M6 arrived before M2") }
        guard let sealed = tlv[.encryptedData] else { throw .malformed("pair-setup M6 has no encrypted data") }
        let plain = try HAPCrypto.open(sealed, key: encryptionKey(session), nonce: HAPCrypto.labelNonce("PS-Msg06"), what: "pair-setup M6")
        let inner = try TLV8.decode(plain)
        guard let id = inner[.identifier], let key = inner[.publicKey], let signature = inner[.signature], key.count == 32 else {
            throw .malformed("pair-setup M6 lacks the accessory's identifier, key or signature")
        }
        let accessoryX = HAPCrypto.hkdf(session.key, salt: "Pair-Setup-Accessory-Sign-Salt", info: "Pair-Setup-Accessory-Sign-Info")
        try HAPCrypto.verify(signature, of: HAPCrypto.bytes(accessoryX) + id + key, publicKey: key, what: "pair-setup M6")
        return AccessoryPairing(accessoryID: String(decoding: id, as: UTF8.self), publicKey: key)
    }

    private func encryptionKey(_ session: SRPClient.Session) -> SymmetricKey {
        HAPCrypto.hkdf(session.key, salt: "Pair-Setup-Encrypt-Salt", info: "Pair-Setup-Encrypt-Info")
    }
}

/// Pair Verify (M1–M4) from the controller's side: an X25519 exchange both sides sign with their long-term keys;
/// its shared secret gives the session keys.
public struct PairVerifyClient: Sendable {
    public let identity: ControllerIdentity
    public let accessory: AccessoryPairing
    let ephemeral: Curve25519.KeyAgreement.PrivateKey
    var sharedSecret: [UInt8]?

    public init(identity: ControllerIdentity, accessory: AccessoryPairing, ephemeral: Curve25519.KeyAgreement.PrivateKey = .init()) {
        self.identity = identity
        self.accessory = accessory
        self.ephemeral = ephemeral
    }

    public func m1() -> [UInt8] {
        TLV8([(.state, [1]), (.publicKey, Array(ephemeral.publicKey.rawRepresentation))]).encoded()
    }

    public mutating func m3(answering m2: [UInt8]) throws(HAPError) -> [UInt8] {
        let tlv = try pairingAnswer(m2, state: 2, step: "pair-verify M2")
        guard let accessoryKey = tlv[.publicKey], accessoryKey.count == 32, let sealed = tlv[.encryptedData] else {
            throw .malformed("pair-verify M2 lacks the accessory's X25519 key or the encrypted data")
        }
        guard let peer = try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: accessoryKey),
              let secret = try? ephemeral.sharedSecretFromKeyAgreement(with: peer) else {
            throw .malformed("pair-verify M2: the accessory's X25519 key is not usable")
        }
        let shared = secret.withUnsafeBytes { Array($0) }
        let verifyKey = HAPCrypto.hkdf(shared, salt: "Pair-Verify-Encrypt-Salt", info: "Pair-Verify-Encrypt-Info")
        let plain = try HAPCrypto.open(sealed, key: verifyKey, nonce: HAPCrypto.labelNonce("PV-Msg02"), what: "pair-verify M2")
        let inner = try TLV8.decode(plain)
        guard let id = inner[.identifier], let signature = inner[.signature] else {
            throw .malformed("pair-verify M2 lacks the accessory's identifier or signature")
        }
        guard String(decoding: id, as: UTF8.self).uppercased() == accessory.accessoryID.uppercased() else {
            throw .authentication("pair-verify M2: the accessory says it is \(String(decoding: id, as: UTF8.self)), not the paired \(accessory.accessoryID)")
        }
        let ownKey = Array(ephemeral.publicKey.rawRepresentation)
        try HAPCrypto.verify(signature, of: accessoryKey + id + ownKey, publicKey: accessory.publicKey, what: "pair-verify M2")
        let controllerID = Array(identity.pairingID.utf8)
        let ownSignature = try HAPCrypto.sign(ownKey + controllerID + accessoryKey, with: identity.privateKey)
        let reply = TLV8([(.identifier, controllerID), (.signature, ownSignature)]).encoded()
        let sealedReply = try HAPCrypto.seal(reply, key: verifyKey, nonce: HAPCrypto.labelNonce("PV-Msg03"))
        sharedSecret = shared
        return TLV8([(.state, [3]), (.encryptedData, sealedReply)]).encoded()
    }

    /// The session's cipher once the accessory accepted M3 (M4 without an error).
    public func finish(answering m4: [UInt8]) throws(HAPError) -> SecureChannel {
        _ = try pairingAnswer(m4, state: 4, step: "pair-verify M4")
        guard let sharedSecret else { throw .malformed("pair-verify M4 arrived before M2") }
        return SecureChannel.controller(sharedSecret: sharedSecret)
    }
}

/// Pairings management (`POST /pairings`, on a verified session): remove one, list them.
public enum PairingsRequest {
    public static func remove(pairingID: String) -> [UInt8] {
        TLV8([(.state, [1]), (.method, [PairingMethod.removePairing.rawValue]), (.identifier, Array(pairingID.utf8))]).encoded()
    }

    public static func list() -> [UInt8] {
        TLV8([(.state, [1]), (.method, [PairingMethod.listPairings.rawValue])]).encoded()
    }

    /// Checks an answer (State 2, no error).
    public static func checkAnswer(_ bytes: [UInt8], step: String) throws(HAPError) -> TLV8 {
        try pairingAnswer(bytes, state: 2, step: step)
    }
}
