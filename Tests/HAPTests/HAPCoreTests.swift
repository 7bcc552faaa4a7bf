import BigInt
import Foundation
import Crypto
import ModularPower
import GatewayModel
import HAP
import Testing
import VendorSimulators

@Suite struct TLV8Tests {
    @Test func longValuesAreFragmentedAndJoined() throws {
        let long = (0..<600).map { UInt8($0 % 251) }
        let tlv = TLV8([(.state, [3]), (.publicKey, long), (.proof, [1, 2])])
        let bytes = tlv.encoded()
        // 600 bytes: items of 255, 255 and 90 bytes.
        #expect(bytes.count == 3 + (2 + 255) * 2 + 2 + 90 + 4)
        let decoded = try TLV8.decode(bytes)
        #expect(decoded[.publicKey] == long)
        #expect(decoded.integer(.state) == 3)
        #expect(decoded[.proof] == [1, 2])
    }

    @Test func separatedItemsStaySeparate() throws {
        let bytes: [UInt8] = [0x01, 1, 0x41, 0x0B, 1, 1, 0xFF, 0, 0x01, 1, 0x42, 0x0B, 1, 0]
        let groups = try TLV8.decode(bytes).groups
        #expect(groups.count == 2)
        #expect(groups[0][.identifier] == [0x41])
        #expect(groups[1].integer(.permissions) == 0)
    }

    @Test func truncatedInputIsAnErrorNotACrash() {
        #expect(throws: HAPError.self) { try TLV8.decode([0x06, 5, 1]) }
        #expect(throws: HAPError.self) { try TLV8.decode([0x06]) }
    }
}

@Suite struct SRPTests {
    @Test func clientAndServerAgreeOnTheKeyAndProofs() throws {
        for round in 0..<4 {
            let server = SRPServer(setupCode: "031-45-154")
            let client = SRPClient()
            let session = try client.session(salt: server.salt, serverPublic: server.publicBytes, setupCode: "031-45-154")
            let (key, serverProof) = try server.verify(clientPublic: client.publicBytes, proof: session.proof)
            #expect(key == session.key, "round \(round)")
            #expect(session.expectedServerProofs.contains(serverProof))
            #expect(key.count == 64)
        }
    }

    @Test func aWrongSetupCodeFailsTheProof() throws {
        let server = SRPServer(setupCode: "031-45-154")
        let client = SRPClient()
        let session = try client.session(salt: server.salt, serverPublic: server.publicBytes, setupCode: "031-45-155")
        #expect(throws: HAPError.self) { try server.verify(clientPublic: client.publicBytes, proof: session.proof) }
    }

    /// A whose first byte is zero: sent minimal, the server zero-extends it, both still agree (HAP's padding rule).
    @Test func aLeadingZeroInAIsHandled() throws {
        var found: SRPClient?
        for seed in 0..<4000 {
            let secret = Array(SHA256.hash(data: Array("seed \(seed)".utf8)))
            let client = SRPClient(secret: secret)
            if SRPClientProbe.firstPaddedByte(client) == 0 { found = client; break }
        }
        let client = try #require(found, "no A with a leading zero byte among the tried secrets")
        #expect(client.publicBytes.count < 384)
        let server = SRPServer(setupCode: "111-22-333")
        let session = try client.session(salt: server.salt, serverPublic: server.publicBytes, setupCode: "111-22-333")
        let (key, serverProof) = try server.verify(clientPublic: client.publicBytes, proof: session.proof)
        #expect(key == session.key)
        #expect(session.expectedServerProofs.contains(serverProof))
    }
}

enum SRPClientProbe {
    static func firstPaddedByte(_ client: SRPClient) -> UInt8 {
        client.publicBytes.count < 384 ? 0 : client.publicBytes[0]
    }
}

@Suite struct SecureChannelTests {
    @Test func framesRoundTripInPiecesAndOverTheFrameLimit() throws {
        let secret = (0..<32).map { UInt8($0) }
        var controller = SecureChannel.controller(sharedSecret: secret)
        var accessory = SecureChannel.accessory(sharedSecret: secret)
        let message = Array(String(repeating: "GET /accessories HTTP/1.1\r\n", count: 100).utf8)
        let sealed = try controller.seal(message)
        #expect(sealed.count == message.count + 3 * 18)
        var received: [UInt8] = []
        var index = 0
        // Delivered in odd-sized reads: partial frames wait for the rest.
        while index < sealed.count {
            let end = min(index + 333, sealed.count)
            received += try accessory.open(Array(sealed[index..<end]))
            index = end
        }
        #expect(received == message)
        let answer = try accessory.seal(Array("HTTP/1.1 204 No Content\r\n\r\n".utf8))
        #expect(try controller.open(answer) == Array("HTTP/1.1 204 No Content\r\n\r\n".utf8))
    }

    @Test func aTamperedFrameIsRefused() throws {
        let secret = (0..<32).map { UInt8($0 * 3) }
        var controller = SecureChannel.controller(sharedSecret: secret)
        var accessory = SecureChannel.accessory(sharedSecret: secret)
        var sealed = try controller.seal(Array("hello".utf8))
        sealed[3] ^= 1
        #expect(throws: HAPError.self) { try accessory.open(sealed) }
    }
}

@Suite struct HAPMessageParserTests {
    @Test func responsesAndEventsSplitAcrossReads() throws {
        var parser = HAPMessageParser()
        let event = "EVENT/1.0 200 OK\r\nContent-Type: application/hap+json\r\nContent-Length: 49\r\n\r\n{\"characteristics\":[{\"aid\":1,\"iid\":9,\"value\":1}]}"
        let response = "HTTP/1.1 204 No Content\r\n\r\n"
        let bytes = Array((event + response).utf8)
        var messages: [HAPMessage] = []
        for chunk in stride(from: 0, to: bytes.count, by: 17) {
            messages += try parser.feed(Array(bytes[chunk..<min(chunk + 17, bytes.count)]))
        }
        #expect(messages.count == 2)
        #expect(messages[0].kind == .event)
        let values = try CharacteristicValue.parseList(messages[0].body)
        #expect(values == [CharacteristicValue(aid: 1, iid: 9, value: .number(1))])
        #expect(messages[1].kind == .response(status: 204))
        #expect(parser.bufferedBytes == 0)
    }

    @Test func chunkedBodies() throws {
        var parser = HAPMessageParser()
        let text = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
        let messages = try parser.feed(Array(text.utf8))
        #expect(messages.first?.body == Array("hello world".utf8))
    }

    @Test func garbageIsAnError() {
        var parser = HAPMessageParser()
        #expect(throws: HAPError.self) { try parser.feed(Array("NONSENSE\r\n\r\n".utf8)) }
        var limited = HAPMessageParser(maxBodyBytes: 10)
        #expect(throws: HAPError.self) { try limited.feed(Array("HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n".utf8)) }
    }
}

@Suite struct AccessoryDatabaseTests {
    @Test func shortAndFullTypesNormalize() {
        #expect(HAPType("25") == HAPType(apple: "25"))
        #expect(HAPType("00000025-0000-1000-8000-0026bb765291")?.short == "25")
        #expect(HAPType("E863F10D-079E-48FF-8F27-9C2605A29F52")?.isApple == false)
        #expect(HAPType("not a type") == nil)
    }

    @Test func parsesTheWireForm() throws {
        let json = #"{"accessories":[{"aid":1,"services":[{"iid":1,"type":"3E","characteristics":[{"iid":2,"type":"14","perms":["pw"],"format":"bool"}]},{"iid":8,"type":"43","primary":true,"characteristics":[{"iid":10,"type":"8","perms":["pr","pw","ev"],"format":"int","unit":"percentage","minValue":0,"maxValue":100,"minStep":1,"value":50}]}]}]}"#
        let accessories = try AccessoryDatabase.parse(Array(json.utf8))
        let brightness = try #require(accessories.first?.services(HAPType(apple: "43")).first?.characteristic(HAPType(apple: "8")))
        #expect(brightness.value == .number(50))
        #expect(brightness.writable && brightness.notifies && !brightness.needsTimedWrite)
        #expect(brightness.maxValue == 100)
    }
}

/// Both sides of pairing in memory: the controller's and the accessory's code agree, refuse what they must.
@Suite struct PairingRoundTripTests {
    @Test func pairSetupThenPairVerifyThenAnEncryptedExchange() throws {
        let accessory = AccessoryIdentity.generate()
        let controller = ControllerIdentity.generate()
        var server = PairSetupServer(setupCode: "031-45-154", identity: accessory)
        var client = PairSetupClient(setupCode: "031-45-154", identity: controller)
        guard case .answer(let m2) = server.handle(client.m1()) else { Issue.record("M2"); return }
        guard case .answer(let m4) = server.handle(try client.m3(answering: m2)) else { Issue.record("M4"); return }
        guard case .paired(let m6, let pairing) = server.handle(try client.m5(answering: m4)) else { Issue.record("M6"); return }
        let accessoryPairing = try client.finish(answering: m6)
        #expect(accessoryPairing == AccessoryPairing(accessoryID: accessory.pairingID, publicKey: accessory.publicKey))
        #expect(pairing == ControllerPairing(pairingID: controller.pairingID, publicKey: controller.publicKey, isAdmin: true))

        var verifier = PairVerifyServer(identity: accessory)
        var verify = PairVerifyClient(identity: controller, accessory: accessoryPairing)
        guard case .answer(let v2) = verifier.handle(verify.m1(), known: { $0 == pairing.pairingID ? pairing : nil }) else { Issue.record("V2"); return }
        guard case .verified(let v4, var accessoryChannel, let who) = verifier.handle(try verify.m3(answering: v2), known: { $0 == pairing.pairingID ? pairing : nil }) else {
            Issue.record("V4"); return
        }
        #expect(who.pairingID == controller.pairingID)
        var controllerChannel = try verify.finish(answering: v4)
        let request = Array("GET /accessories HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
        #expect(try accessoryChannel.open(try controllerChannel.seal(request)) == request)
    }

    @Test func aWrongCodeAndAStrangerAreRefused() throws {
        let accessory = AccessoryIdentity.generate()
        var server = PairSetupServer(setupCode: "031-45-154", identity: accessory)
        var client = PairSetupClient(setupCode: "111-22-333", identity: ControllerIdentity.generate())
        guard case .answer(let m2) = server.handle(client.m1()) else { Issue.record("M2"); return }
        guard case .wrongCode(let m4) = server.handle(try client.m3(answering: m2)) else { Issue.record("a wrong code was accepted"); return }
        #expect(throws: HAPError.refused(.authentication, step: "pair-setup M4", retryDelay: nil)) { try client.m5(answering: m4) }

        // A controller the accessory does not know cannot verify.
        var verifier = PairVerifyServer(identity: accessory)
        var verify = PairVerifyClient(identity: ControllerIdentity.generate(), accessory: AccessoryPairing(accessoryID: accessory.pairingID, publicKey: accessory.publicKey))
        guard case .answer(let v2) = verifier.handle(verify.m1(), known: { _ in nil }) else { Issue.record("V2"); return }
        guard case .answer(let v4) = verifier.handle(try verify.m3(answering: v2), known: { _ in nil }) else { Issue.record("a stranger verified"); return }
        #expect(throws: HAPError.self) { try verify.finish(answering: v4) }
        // A controller talking to an impostor (another key under the same id) refuses at M2.
        var impostor = PairVerifyServer(identity: AccessoryIdentity(pairingID: accessory.pairingID, privateKey: .init()))
        var wary = PairVerifyClient(identity: ControllerIdentity.generate(), accessory: AccessoryPairing(accessoryID: accessory.pairingID, publicKey: accessory.publicKey))
        guard case .answer(let forged) = impostor.handle(wary.m1(), known: { _ in nil }) else { Issue.record("V2"); return }
        #expect(throws: HAPError.self) { try wary.m3(answering: forged) }
    }
}

/// The accessory's SRP against the byte forms controllers really use where values start with a zero byte: our own
/// (minimal A, K from minimal S) and aiohomekit's (padded A, u over B as received, K from padded S). Secrets are
/// searched until every leading-zero case has happened, so the test cannot pass by luck.
@Suite struct SRPFormsTests {
    /// aiohomekit 3.x's controller arithmetic, written out (its `srp.py`), for the test only.
    static func aiohomekitProof(salt: [UInt8], serverPublic: [UInt8], code: String, secret: BigUInt) -> (a: [UInt8], proof: [UInt8], key: [UInt8], shortS: Bool) {
        // BigInt here, not the gateway's BigNumber: an independent implementation of the same arithmetic.
        let n = BigUInt(Data(SRPClient.modulus.bytes)), g = BigUInt(Data(SRPClient.generator.bytes))
        func h(_ bytes: [UInt8]) -> [UInt8] { Array(SHA512.hash(data: bytes)) }
        func pad(_ value: BigUInt) -> [UInt8] { let bytes = [UInt8](value.serialize()); return [UInt8](repeating: 0, count: 384 - bytes.count) + bytes }
        let aValue = g.power(secret, oddModulus: n)
        let b = BigUInt(Data(serverPublic))
        let k = BigUInt(Data(h(pad(n) + pad(g))))
        let u = BigUInt(Data(h(pad(aValue) + serverPublic)))
        let x = BigUInt(Data(h(salt + h(Array("Pair-Setup:\(code)".utf8)))))
        let base = ((b % n) + n - (k * g.power(x, oddModulus: n)) % n) % n
        let s = base.power(secret + u * x, oddModulus: n)
        let key = h(pad(s))
        let xored = zip(h([UInt8](n.serialize())), h([UInt8](g.serialize()))).map { $0 ^ $1 }
        let proof = h(xored + h(Array("Pair-Setup".utf8)) + salt + pad(aValue) + serverPublic + key)
        return (pad(aValue), proof, key, [UInt8](s.serialize()).count < 384)
    }

    @Test func bothControllersPairWhateverTheLeadingZeros() throws {
        var sawShortB = false, sawShortS = false
        let rounds = Array(1...12) + [32, 307, 391]
        for round in rounds {
            let server = SRPServer(setupCode: "482-19-573", salt: Array(Array(SHA256.hash(data: Array("salt \(round)".utf8))).prefix(16)),
                                   secret: Array(SHA256.hash(data: Array("b \(round)".utf8))))
            #expect(server.publicBytes.count == 384)
            if server.publicBytes.first == 0 { sawShortB = true }
            // Ours.
            let client = SRPClient(secret: Array(SHA256.hash(data: Array("a \(round)".utf8))))
            let session = try client.session(salt: server.salt, serverPublic: server.publicBytes, setupCode: "482-19-573")
            let (key, serverProof) = try server.verify(clientPublic: client.publicBytes, proof: session.proof)
            #expect(key == session.key && session.expectedServerProofs.contains(serverProof))
            // aiohomekit's.
            let secret = BigUInt(Data(Array(SHA256.hash(data: Array("c \(round)".utf8)))))
            let theirs = Self.aiohomekitProof(salt: server.salt, serverPublic: server.publicBytes, code: "482-19-573", secret: secret)
            let (theirKey, _) = try server.verify(clientPublic: theirs.a, proof: theirs.proof)
            #expect(theirKey == theirs.key, "round \(round)")
            if theirs.shortS { sawShortS = true }
        }
        #expect(sawShortB && sawShortS, "a B and an S with a leading zero byte came up")
    }
}
