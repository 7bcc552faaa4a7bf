import Crypto
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import VendorKit

/// `homekit:` — the gateway as a HomeKit bridge: every device (or the `devices` chosen) appears in Apple Home.
public struct HomeKitBridgeSettings: Sendable {
    /// Where the HAP server listens (TCP); every interface on port 51827 by default, as HomeKit needs.
    public var host = "0.0.0.0"
    public var port = 51827
    /// The 8-digit code the Home app asks for, `XXX-XX-XXX`.
    public var setupCode: VendorSecret
    /// The bridge's name in the Home app and in mDNS.
    public var name = "LBS Gateway"
    /// The devices to bridge, by id; nil: every device but the gateway's own.
    public var devices: [String]?
    /// Announce `_hap._tcp` over mDNS (through Avahi) so the Home app finds the bridge.
    public var advertise = true

    public init(setupCode: VendorSecret) {
        self.setupCode = setupCode
    }

    /// HAP allows 149 accessories behind a bridge (150 with the bridge itself).
    public static let maxBridgedAccessories = 149

    /// Codes HAP forbids: every digit the same, 123-45-678 and 876-54-321.
    public static func isForbidden(_ code: String) -> Bool {
        let digits = code.filter(\.isNumber)
        return Set(digits).count == 1 || digits == "12345678" || digits == "87654321"
    }

    /// The setup id (4 characters of `0-9A-Z`) that ties the setup URI to the mDNS record (`sh`): derived from the
    /// code, so `lbs-gateway homekit-code` and the running bridge agree without sharing state.
    public static func setupID(for code: String) -> String {
        let alphabet = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ")
        let digest = Array(SHA256.hash(data: Array("lbs-gateway setup id \(code)".utf8)))
        return String(digest.prefix(4).map { alphabet[Int($0) % alphabet.count] })
    }

    /// The setup payload of the QR code and NFC tag, `X-HM://` + 9 base-36 characters + the setup id: category 2
    /// (bridge), the IP flag (bit 28) and the code as a number.
    public static func setupURI(code: String, category: Int = 2) -> String {
        let number = UInt64(code.filter(\.isNumber)) ?? 0
        let payload = (UInt64(category) << 31) | (1 << 28) | (number & 0x7FF_FFFF)
        let text = String(payload, radix: 36, uppercase: true)
        return "X-HM://" + String(repeating: "0", count: max(0, 9 - text.count)) + text + setupID(for: code)
    }
}

extension ConfigLoader {
    /// `homekit:`; nil when the section is absent.
    static func readHomeKitBridge(_ node: ConfigNode?, storage: StorageSettings?, reader: inout ConfigReader, environment: [String: String],
                                  baseDirectory: String) -> HomeKitBridgeSettings? {
        guard let node = reader.mapping(node, at: "homekit") else { return nil }
        reader.rejectUnknownKeys(in: node, at: "homekit", allowed: ["listen", "name", "devices", "advertise"] + ConfigReader.secretKeys("setup_code"))
        var secrets = VendorSettings(type: "homekit", id: "homekit", options: node, path: "homekit")
        secrets.baseDirectory = baseDirectory
        guard let secret = reader.secret("setup_code", of: secrets, environment: environment, required: true) else { return nil }
        let digits = secret.reveal().filter { $0 != "-" && $0 != " " }
        guard digits.count == 8, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else {
            reader.problem("homekit.setup_code_file", "the setup code is not 8 digits (XXX-XX-XXX)", fix: "write a code like 482-19-573 into the file")
            return nil
        }
        let code = String(digits.prefix(3)) + "-" + String(digits.dropFirst(3).prefix(2)) + "-" + String(digits.suffix(3))
        if HomeKitBridgeSettings.isForbidden(code) {
            reader.problem("homekit.setup_code_file", "HomeKit refuses the setup code \(code) (all digits the same, 123-45-678 and 876-54-321 are not allowed)",
                           fix: "choose another 8-digit code, e.g. from: shuf -i 0-99999999 -n1 | xargs printf '%08d' | sed 's/^\\(...\\)\\(..\\)/\\1-\\2-/'")
            return nil
        }
        var settings = HomeKitBridgeSettings(setupCode: VendorSecret(code))
        if let (host, port) = readListen(node["listen"], at: "homekit.listen", ports: 1...65535, example: "0.0.0.0:51827", reader: &reader) {
            settings.host = host
            settings.port = port
        }
        if let name = reader.string(node["name"], at: "homekit.name") {
            if name.isEmpty || name.count > 64 {
                reader.problem("homekit.name", "the name must have 1 to 64 characters", fix: "write e.g. name: LBS Gateway")
            } else {
                settings.name = name
            }
        }
        switch node["devices"] {
        case .none, .null?:
            break
        case .sequence(let items)?:
            var ids: [String] = []
            for (index, item) in items.enumerated() {
                guard let id = reader.string(item, at: "homekit.devices[\(index)]") else { continue }
                if DeviceID(validating: id) == nil {
                    reader.problem("homekit.devices[\(index)]", "'\(id)' is not a device id", fix: "use ids as in <base>/bridge/devices, e.g. demo_light")
                } else {
                    ids.append(id)
                }
            }
            if ids.count > HomeKitBridgeSettings.maxBridgedAccessories {
                reader.problem("homekit.devices", "\(ids.count) devices; HomeKit allows \(HomeKitBridgeSettings.maxBridgedAccessories) behind one bridge",
                               fix: "choose at most \(HomeKitBridgeSettings.maxBridgedAccessories) devices")
            }
            settings.devices = ids
        case let other?:
            reader.problem("homekit.devices", "expected a list, found \(other.kindName)", fix: "write devices: [demo_light, demo_lock]")
        }
        if let advertise = reader.bool(node["advertise"], at: "homekit.advertise") { settings.advertise = advertise }
        if storage == nil {
            reader.problem("homekit", "the HomeKit bridge needs storage: its key, pairings and accessory numbers must survive a restart",
                           fix: "add 'storage: {path: /var/lib/lbs-gateway/gateway.sqlite}'")
        }
        return settings
    }
}
