import Crypto
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayCore
import GatewayModel
import HAP
import VendorKit

/// What the bridge keeps in the cache (`vendor_value` under `@homekit-bridge`, a name no vendor can have): its
/// identity (id and Ed25519 key), the controllers paired with it, each device's aid, the config number `c#` with
/// the database digest it was counted for, and failed pair-setup attempts.
struct BridgeStore: Sendable {
    static let owner = "@homekit-bridge"
    let values: any VendorValueStore

    struct Snapshot: Sendable {
        var identity: AccessoryIdentity
        var pairings: [ControllerPairing]
        var aids: [String: Int]
        var configNumber: Int
        var digest: String
        var failedAttempts: Int
    }

    func load() async throws -> Snapshot {
        let fresh = AccessoryIdentity.generate()
        let identityText = try await values.value("identity", vendorID: Self.owner, storingIfAbsent: JSONValue.object([
            "id": .string(fresh.pairingID), "secret_key": .string(Data(fresh.privateKey.rawRepresentation).base64EncodedString()),
        ]).render())
        guard case .success(let identityJSON) = JSONValue.parse(Array(identityText.utf8)), let id = identityJSON["id"]?.string,
              let secret = identityJSON["secret_key"]?.string.flatMap({ Data(base64Encoded: $0) }),
              let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: secret) else {
            throw GatewayError(.internal, message: "The HomeKit bridge's key in the cache is damaged.",
                               suggestion: "Remove the bridge's values from the cache and add the bridge to the Home app again.")
        }
        var pairings: [ControllerPairing] = []
        if let text = try await values.storedValue("pairings", vendorID: Self.owner), case .success(.array(let items)) = JSONValue.parse(Array(text.utf8)) {
            pairings = items.compactMap { item in
                guard let id = item["id"]?.string, let key = item["public_key"]?.string.flatMap({ Data(base64Encoded: $0) }), key.count == 32 else { return nil }
                return ControllerPairing(pairingID: id, publicKey: Array(key), isAdmin: item["admin"]?.bool ?? false)
            }
        }
        var aids: [String: Int] = [:]
        if let text = try await values.storedValue("aids", vendorID: Self.owner), case .success(.object(let object)) = JSONValue.parse(Array(text.utf8)) {
            for (device, aid) in object { if let number = aid.number?.hapInt { aids[device] = number } }
        }
        var configNumber = 1, digest = "", failed = 0
        if let text = try await values.storedValue("config", vendorID: Self.owner), case .success(let json) = JSONValue.parse(Array(text.utf8)) {
            configNumber = json["c#"]?.number.flatMap(\.hapInt) ?? 1
            digest = json["digest"]?.string ?? ""
            failed = json["failed_attempts"]?.number.flatMap(\.hapInt) ?? 0
        }
        return Snapshot(identity: AccessoryIdentity(pairingID: id, privateKey: key), pairings: pairings, aids: aids, configNumber: configNumber,
                        digest: digest, failedAttempts: failed)
    }

    func save(pairings: [ControllerPairing]) async throws {
        let items: [JSONValue] = pairings.map {
            .object(["id": .string($0.pairingID), "public_key": .string(Data($0.publicKey).base64EncodedString()), "admin": .bool($0.isAdmin)])
        }
        try await values.store(JSONValue.array(items).render(), key: "pairings", vendorID: Self.owner)
    }

    func save(aids: [String: Int]) async throws {
        try await values.store(JSONValue.object(aids.mapValues { .number(Double($0)) }).render(), key: "aids", vendorID: Self.owner)
    }

    func save(configNumber: Int, digest: String, failedAttempts: Int) async throws {
        try await values.store(JSONValue.object([
            "c#": .number(Double(configNumber)), "digest": .string(digest), "failed_attempts": .number(Double(failedAttempts)),
        ]).render(), key: "config", vendorID: Self.owner)
    }
}
