import Crypto

/// An encrypted HAP session after pair-verify: frames of `length (UInt16 LE, ≤ 1024) ‖ ciphertext ‖ tag`, the
/// length bytes as additional data, one nonce counter per direction from 0.
public struct SecureChannel: Sendable {
    public static let maxFrame = 1024
    let sendKey: SymmetricKey
    let receiveKey: SymmetricKey
    var sendCounter: UInt64 = 0
    var receiveCounter: UInt64 = 0
    /// Received bytes not yet a whole frame.
    var pending: [UInt8] = []

    init(sendKey: SymmetricKey, receiveKey: SymmetricKey) {
        self.sendKey = sendKey
        self.receiveKey = receiveKey
    }

    /// The controller writes with "Control-Write-Encryption-Key" and reads with "Control-Read-Encryption-Key".
    public static func controller(sharedSecret: [UInt8]) -> SecureChannel {
        SecureChannel(sendKey: HAPCrypto.hkdf(sharedSecret, salt: "Control-Salt", info: "Control-Write-Encryption-Key"),
                      receiveKey: HAPCrypto.hkdf(sharedSecret, salt: "Control-Salt", info: "Control-Read-Encryption-Key"))
    }

    /// The accessory's side: the same keys, the other way round.
    public static func accessory(sharedSecret: [UInt8]) -> SecureChannel {
        SecureChannel(sendKey: HAPCrypto.hkdf(sharedSecret, salt: "Control-Salt", info: "Control-Read-Encryption-Key"),
                      receiveKey: HAPCrypto.hkdf(sharedSecret, salt: "Control-Salt", info: "Control-Write-Encryption-Key"))
    }

    /// Encrypts `plaintext` into as many frames as it needs.
    public mutating func seal(_ plaintext: [UInt8]) throws(HAPError) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(plaintext.count + (plaintext.count / Self.maxFrame + 1) * 18)
        var start = 0
        repeat {
            let end = min(start + Self.maxFrame, plaintext.count)
            let length = UInt16(end - start)
            let aad = [UInt8(length & 0xFF), UInt8(length >> 8)]
            out += aad
            out += try HAPCrypto.seal(Array(plaintext[start..<end]), key: sendKey, nonce: HAPCrypto.counterNonce(sendCounter), aad: aad)
            sendCounter &+= 1
            start = end
        } while start < plaintext.count
        return out
    }

    /// Adds received bytes and returns the plaintext of every whole frame among them (empty while a frame is
    /// incomplete). A frame that fails to decrypt ends the session: the caller closes the connection.
    public mutating func open(_ received: [UInt8]) throws(HAPError) -> [UInt8] {
        pending += received
        var plain: [UInt8] = []
        var index = 0
        while pending.count - index >= 2 {
            let length = Int(pending[index]) | Int(pending[index + 1]) << 8
            guard length <= Self.maxFrame else { throw .malformed("an encrypted frame claims \(length) bytes (at most 1024)") }
            guard pending.count - index >= 2 + length + 16 else { break }
            let aad = Array(pending[index..<index + 2])
            let sealed = Array(pending[index + 2..<index + 2 + length + 16])
            plain += try HAPCrypto.open(sealed, key: receiveKey, nonce: HAPCrypto.counterNonce(receiveCounter), aad: aad, what: "an encrypted frame")
            receiveCounter &+= 1
            index += 2 + length + 16
        }
        if index > 0 { pending.removeFirst(index) }
        return plain
    }
}
