import Crypto
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import HAP
import VendorKit

/// What the HomeKit vendor keeps in the cache (`VendorValueStore`): the controller's identity (one per vendor
/// instance), each accessory's pairing, and its last attribute database, so its devices exist (offline) before
/// it answers after a restart. Keys never leave the cache: not logged, not published.
struct HomeKitStore: Sendable {
    let values: any VendorValueStore
    let vendorID: String

    struct Pairing: Sendable, Equatable {
        var accessory: AccessoryPairing
        var host: String?
        var port: Int?
    }

    /// The controller's pairing id and Ed25519 key: made once, then always the same (a new one would be a
    /// stranger to every accessory paired before).
    func controller() async throws -> ControllerIdentity {
        let fresh = ControllerIdentity.generate()
        let text = try await values.value("controller", vendorID: vendorID, storingIfAbsent: JSONValue.object([
            "id": .string(fresh.pairingID), "secret_key": .string(Data(fresh.secretKey).base64EncodedString()),
        ]).render())
        guard case .success(let json) = JSONValue.parse(Array(text.utf8)), let id = json["id"]?.string,
              let secret = json["secret_key"]?.string.flatMap({ Data(base64Encoded: $0) }),
              let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: secret) else {
            throw GatewayError(.internal, message: "The HomeKit controller key in the cache is damaged.",
                               suggestion: "Pair the accessories again after removing the vendor's values from the cache.")
        }
        return ControllerIdentity(pairingID: id, privateKey: key)
    }

    func pairing(_ name: String) async throws -> Pairing? {
        guard let text = try await values.storedValue("pairing/\(name)", vendorID: vendorID), !text.isEmpty,
              case .success(let json) = JSONValue.parse(Array(text.utf8)), let id = json["accessory_id"]?.string,
              let key = json["public_key"]?.string.flatMap({ Data(base64Encoded: $0) }), key.count == 32 else { return nil }
        return Pairing(accessory: AccessoryPairing(accessoryID: id, publicKey: Array(key)), host: json["host"]?.string,
                       port: json["port"]?.number.flatMap(\.hapInt))
    }

    func save(_ pairing: Pairing?, name: String) async throws {
        guard let pairing else {
            try await values.store("", key: "pairing/\(name)", vendorID: vendorID)
            return
        }
        var object: [String: JSONValue] = [
            "accessory_id": .string(pairing.accessory.accessoryID), "public_key": .string(Data(pairing.accessory.publicKey).base64EncodedString()),
        ]
        if let host = pairing.host { object["host"] = .string(host) }
        if let port = pairing.port { object["port"] = .number(Double(port)) }
        try await values.store(JSONValue.object(object).render(), key: "pairing/\(name)", vendorID: vendorID)
    }

    func database(_ name: String) async throws -> [UInt8]? {
        guard let text = try await values.storedValue("accessories/\(name)", vendorID: vendorID), !text.isEmpty else { return nil }
        return Array(text.utf8)
    }

    func save(database: [UInt8]?, name: String) async throws {
        try await values.store(database.map { String(decoding: $0, as: UTF8.self) } ?? "", key: "accessories/\(name)", vendorID: vendorID)
    }
}
