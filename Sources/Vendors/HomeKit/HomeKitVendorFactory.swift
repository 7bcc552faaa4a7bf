import GatewayModel
import Resilience
import VendorKit

/// One `accessories:` entry of a `type: homekit` vendor.
public struct HomeKitAccessoryOptions: Sendable {
    /// `[a-z0-9_-]+`: the device id is `<vendor id>_<name>` (and `_<aid>` for the accessories behind a bridge).
    public var name: String
    public var host: String?
    public var port: Int?
    /// The accessory's HAP id (`id` of its `_hap._tcp` TXT record, `AA:BB:CC:DD:EE:FF`).
    public var deviceID: String?
    /// The 8-digit setup code as `XXX-XX-XXX`, used once to pair.
    public var setupCode: VendorSecret?

    public init(name: String, host: String? = nil, port: Int? = nil, deviceID: String? = nil, setupCode: VendorSecret? = nil) {
        self.name = name
        self.host = host
        self.port = port
        self.deviceID = deviceID
        self.setupCode = setupCode
    }
}

public struct HomeKitOptions: Sendable {
    public var accessories: [HomeKitAccessoryOptions]
    /// How often characteristics that send no events are read.
    public var pollInterval: Duration
    /// How long one request may take.
    public var requestTimeout: Duration
    public var connectTimeout: Duration = .seconds(10)
    /// Finds accessories by their HAP id and notices their `c#`: Avahi unless a test gives another.
    public var browser: (any HAPServiceBrowserProtocol)? = AvahiBrowser()
    /// How often mDNS is read for addresses and `c#` changes.
    public var mdnsInterval: Duration = .seconds(60)
    /// Reconnect delays after a drop: from `minDelay` growing ×2 to `maxDelay`.
    public var reconnect = ReconnectingStream.Policy(minDelay: .seconds(1), maxDelay: .seconds(60), downAfter: 1)

    public init(accessories: [HomeKitAccessoryOptions], pollInterval: Duration = .seconds(60), requestTimeout: Duration = .seconds(10)) {
        self.accessories = accessories
        self.pollInterval = pollInterval
        self.requestTimeout = requestTimeout
    }
}

/// `type: homekit`: HomeKit accessories over HAP (IP), the gateway as their controller.
public enum HomeKitVendorFactory: VendorFactory {
    public static let typeName = "homekit"
    public static let network: NetworkOptions.Defaults? = nil
    public static let requiresStorage: String? = "the controller's keys and each accessory's pairing live in the cache, and pairing again needs the accessory reset"

    public static func parse(_ settings: VendorSettings, reader: inout ConfigReader, environment: [String: String]) -> HomeKitOptions? {
        let path = settings.path
        let node = settings.options
        reader.rejectUnknownKeys(in: node, at: path, allowed: VendorSettings.commonKeys + ["accessories", "timeout"])
        var options = HomeKitOptions(accessories: [], pollInterval: settings.pollInterval(default: 60))
        if let seconds = reader.number(node["timeout"], at: "\(path).timeout", range: 1...120) { options.requestTimeout = .clampedSeconds(seconds) }
        guard case .sequence(let entries)? = node["accessories"] else {
            if node["accessories"] == nil {
                reader.problem("\(path).accessories", "missing", fix: "list the accessories: accessories: [{name: thermostat, host: 192.168.1.20, port: 51826, setup_code_file: thermostat-code}]")
            } else {
                reader.problem("\(path).accessories", "expected a list", fix: "write one '- name: …' entry per accessory")
            }
            return nil
        }
        var names: Set<String> = []
        for (index, entry) in entries.enumerated() {
            let entryPath = "\(path).accessories[\(index)]"
            guard reader.mapping(entry, at: entryPath, required: true) != nil else { continue }
            reader.rejectUnknownKeys(in: entry, at: entryPath, allowed: ["name", "host", "port", "device_id"] + ConfigReader.secretKeys("setup_code"))
            guard let name = reader.string(entry["name"], at: "\(entryPath).name", required: true) else { continue }
            guard !name.isEmpty, name.unicodeScalars.allSatisfy({ ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "_" || $0 == "-" }) else {
                reader.problem("\(entryPath).name", "'\(name)' is not [a-z0-9_-]+", fix: "use lower-case letters, digits, '_' and '-': it becomes the device id")
                continue
            }
            guard names.insert(name).inserted else {
                reader.problem("\(entryPath).name", "'\(name)' is used twice", fix: "give each accessory its own name")
                continue
            }
            var accessory = HomeKitAccessoryOptions(name: name)
            accessory.host = reader.string(entry["host"], at: "\(entryPath).host")
            if let port = reader.number(entry["port"], at: "\(entryPath).port", range: 1...65535) { accessory.port = Int(port) }
            if let id = reader.string(entry["device_id"], at: "\(entryPath).device_id") {
                if isDeviceID(id) { accessory.deviceID = id.uppercased() } else {
                    reader.problem("\(entryPath).device_id", "'\(id)' is not a HAP device id", fix: "use the id from the accessory's _hap._tcp record, like AA:BB:CC:DD:EE:FF")
                }
            }
            if accessory.deviceID == nil, accessory.host == nil || accessory.port == nil {
                reader.problem("\(entryPath).host", "no address: host and port, or device_id (found over mDNS), are needed",
                               fix: "add device_id: <the id from avahi-browse -rt _hap._tcp>, or host: <its IP address> and port: <its HAP port>")
            } else if (accessory.host == nil) != (accessory.port == nil) {
                reader.problem("\(entryPath).\(accessory.host == nil ? "host" : "port")", "host and port go together",
                               fix: "give both, or neither and device_id (the address then comes from mDNS)")
            }
            var secretSettings = VendorSettings(type: settings.type, id: "\(settings.id)_\(name)", options: entry, path: entryPath)
            secretSettings.baseDirectory = settings.baseDirectory
            if let code = reader.secret("setup_code", of: secretSettings, environment: environment, required: false) {
                if let normalized = normalizedSetupCode(code.reveal()) { accessory.setupCode = VendorSecret(normalized) } else {
                    reader.problem("\(entryPath).setup_code_file", "the setup code is not 8 digits (XXX-XX-XXX)",
                                   fix: "write the code from the accessory's label or box, like 031-45-154, into the file")
                }
            }
            options.accessories.append(accessory)
        }
        if entries.isEmpty { reader.problem("\(path).accessories", "the list is empty", fix: "add at least one accessory") }
        return options
    }

    /// `031-45-154`, `03145154` or `031 45 154` → `031-45-154`; nil for anything that is not 8 digits.
    public static func normalizedSetupCode(_ text: String) -> String? {
        let digits = text.filter { $0 != "-" && $0 != " " }
        guard digits.count == 8, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber) else { return nil }
        let characters = Array(digits)
        return String(characters[0..<3]) + "-" + String(characters[3..<5]) + "-" + String(characters[5..<8])
    }

    static func isDeviceID(_ text: String) -> Bool {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        return parts.count == 6 && parts.allSatisfy { $0.count == 2 && $0.allSatisfy(\.isHexDigit) }
    }

    public static func make(_ settings: VendorSettings, options: HomeKitOptions, sink: VendorEventSink, context: VendorContext) throws -> any Vendor {
        HomeKitVendor(instanceID: settings.id, options: options, sink: sink, context: context)
    }

    public static var stateKeys: [KeySpec] { [] }
}
