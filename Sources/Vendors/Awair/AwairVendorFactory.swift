import GatewayModel
import Resilience
import VendorKit

/// Options of a `type: awair` entry (the cloud).
public struct AwairCloudOptions: Sendable {
    public var network: NetworkOptions
    /// `token_file`, `token_env` or `LBS_<ID>_TOKEN`: the access token from the Awair developer console.
    public var token: VendorSecret
    /// `rooms: {<deviceId>: <room>}`: a room for a monitor whose name is not its room.
    public var rooms: [String: String]

    public init(network: NetworkOptions, token: VendorSecret, rooms: [String: String] = [:]) {
        self.network = network
        self.token = token
        self.rooms = rooms
    }
}

/// `type: awair`: Awair monitors through the Awair Home developer API.
public enum AwairCloudVendorFactory: VendorFactory {
    public static let typeName = "awair"

    /// Home Assistant polls the cloud every 5 min. Until `/users/self` gives this account's quota, 300 calls a
    /// day are assumed (the smallest tier's order of magnitude); the account's `LATEST` quota then replaces it.
    static let defaults = NetworkOptions.Defaults(
        url: "https://developer-apis.awair.is/v1", urlExample: "https://developer-apis.awair.is/v1", pollInterval: 300, timeout: 20,
        quota: QuotaScheduler.Budgets(perDay: 300)
    )
    public static let network: NetworkOptions.Defaults? = defaults

    public static func parse(_ settings: VendorSettings, reader: inout ConfigReader, environment: [String: String]) -> AwairCloudOptions? {
        reader.rejectUnknownKeys(in: settings.options, at: settings.path, allowed: NetworkOptions.keys + ConfigReader.secretKeys("token") + ["rooms"])
        let network = NetworkOptions.parse(settings, defaults: defaults, reader: &reader)
        let token = reader.secret("token", of: settings, environment: environment)
        var rooms: [String: String] = [:]
        if let node = reader.mapping(settings.options["rooms"], at: "\(settings.path).rooms") {
            for key in node.keys {
                if let room = reader.string(node[key], at: "\(settings.path).rooms.\(key)"), !room.isEmpty { rooms[key] = room }
            }
        }
        guard let network, let token else { return nil }
        return AwairCloudOptions(network: network, token: token, rooms: rooms)
    }

    public static func make(_ settings: VendorSettings, options: AwairCloudOptions, sink: VendorEventSink, context: VendorContext) throws -> any Vendor {
        try AwairCloudVendor(instanceID: settings.id, options: options, sink: sink, context: context)
    }
}

/// Options of a `type: awair_local` entry.
public struct AwairLocalOptions: Sendable {
    public struct Monitor: Sendable, Equatable {
        public var url: String
        public var room: String?
        public var name: String?

        public init(url: String, room: String? = nil, name: String? = nil) {
            self.url = url
            self.room = room
            self.name = name
        }
    }

    /// Timeout, poll interval and breaker (its `url` is the first monitor's).
    public var network: NetworkOptions
    public var monitors: [Monitor]

    public init(network: NetworkOptions, monitors: [Monitor]) {
        self.network = network
        self.monitors = monitors
    }
}

/// `type: awair_local`: Awair monitors over their Local API, one `url` (with `room`) or a `devices:` list.
public enum AwairLocalVendorFactory: VendorFactory {
    public static let typeName = "awair_local"

    /// Home Assistant polls a local monitor every 30 s; the monitor measures about every 10 s.
    static let defaults = NetworkOptions.Defaults(urlExample: "http://192.168.1.225", pollInterval: 30, timeout: 10)
    public static let network: NetworkOptions.Defaults? = defaults

    public static func parse(_ settings: VendorSettings, reader: inout ConfigReader, environment: [String: String]) -> AwairLocalOptions? {
        let path = settings.path
        let node = settings.options
        reader.rejectUnknownKeys(in: node, at: path, allowed: NetworkOptions.keys + ["room", "name", "devices"])
        var monitors: [AwairLocalOptions.Monitor] = []
        var settings = settings
        if let list = node["devices"] {
            guard case .sequence(let entries) = list, !entries.isEmpty else {
                reader.problem("\(path).devices", "expected a list of {url, room}", fix: "e.g. devices: [{url: http://192.168.1.225, room: Living Room}]")
                return nil
            }
            for key in ["url", "room", "name"] where node[key] != nil {
                reader.problem("\(path).\(key)", "\(key) and devices are both set", fix: "give each monitor's \(key) inside devices:")
            }
            for (index, entry) in entries.enumerated() {
                let at = "\(path).devices[\(index)]"
                guard let entry = reader.mapping(entry, at: at) else { continue }
                reader.rejectUnknownKeys(in: entry, at: at, allowed: ["url", "room", "name"])
                guard let url = reader.string(entry["url"], at: "\(at).url", required: true) else { continue }
                guard NetworkOptions.isValidURL(url) else {
                    reader.problem("\(at).url", "'\(ConfigReader.redactURL(url))' is not an http:// URL", fix: "e.g. \(defaults.urlExample)")
                    continue
                }
                monitors.append(.init(url: url, room: reader.string(entry["room"], at: "\(at).room"), name: reader.string(entry["name"], at: "\(at).name")))
            }
            guard let first = monitors.first else { return nil }
            // The shared options (timeout, breaker, poll_interval) are read against the first monitor's URL.
            if case .mapping(var pairs) = node {
                pairs.removeAll { $0.key == "devices" }
                pairs.append((key: "url", value: .scalar(first.url, line: 0)))
                settings.options = .mapping(pairs)
            }
        }
        let network = NetworkOptions.parse(settings, defaults: defaults, reader: &reader)
        if node["devices"] == nil, let network {
            monitors = [.init(url: network.url, room: reader.string(node["room"], at: "\(path).room"), name: reader.string(node["name"], at: "\(path).name"))]
        }
        guard let network, !monitors.isEmpty else { return nil }
        return AwairLocalOptions(network: network, monitors: monitors)
    }

    public static func make(_ settings: VendorSettings, options: AwairLocalOptions, sink: VendorEventSink, context: VendorContext) throws -> any Vendor {
        try AwairLocalVendor(instanceID: settings.id, options: options, sink: sink, context: context)
    }
}
