import GatewayModel
import Resilience
import VendorKit

/// Options of a `type: flume` entry.
public struct FlumeOptions: Sendable {
    public var network: NetworkOptions
    public var clientID: String
    public var clientSecret: VendorSecret
    public var username: String
    public var password: VendorSecret
    /// How often active leaks are asked for (each device costs one call then).
    public var leakInterval: Duration

    public init(network: NetworkOptions, clientID: String, clientSecret: VendorSecret, username: String, password: VendorSecret,
                leakInterval: Duration = .seconds(300)) {
        self.network = network
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.username = username
        self.password = password
        self.leakInterval = leakInterval
    }
}

/// `type: flume`: Flume water sensors through Flume's Personal API (cloud).
public enum FlumeVendorFactory: VendorFactory {
    public static let typeName = "flume"

    /// Flume allows 120 requests an hour for the whole account. A poll costs one query per sensor (and one
    /// leak check per sensor every 5 min); the scheduler stretches the 60 s default to fit the hour, keeping a
    /// fifth of it for commands and logins.
    static let defaults = NetworkOptions.Defaults(
        url: "https://api.flumetech.com", urlExample: "https://api.flumetech.com", pollInterval: 60, timeout: 20,
        quota: QuotaScheduler.Budgets(perHour: 120)
    )
    public static let network: NetworkOptions.Defaults? = defaults

    public static func parse(_ settings: VendorSettings, reader: inout ConfigReader, environment: [String: String]) -> FlumeOptions? {
        let path = settings.path
        let node = settings.options
        reader.rejectUnknownKeys(in: node, at: path, allowed: NetworkOptions.keys + ConfigReader.secretKeys("client_secret")
            + ConfigReader.secretKeys("password") + ["client_id", "username", "leak_interval"])
        let network = NetworkOptions.parse(settings, defaults: defaults, reader: &reader)
        let clientID = reader.string(node["client_id"], at: "\(path).client_id", required: true)
        let username = reader.string(node["username"], at: "\(path).username", required: true)
        let secret = reader.secret("client_secret", of: settings, environment: environment)
        let password = reader.secret("password", of: settings, environment: environment)
        let leaks = reader.number(node["leak_interval"], at: "\(path).leak_interval", range: 60...86_400) ?? 300
        guard let network, let clientID, !clientID.isEmpty, let username, !username.isEmpty, let secret, let password else { return nil }
        return FlumeOptions(network: network, clientID: clientID, clientSecret: secret, username: username, password: password,
                            leakInterval: .clampedSeconds(leaks))
    }

    public static func make(_ settings: VendorSettings, options: FlumeOptions, sink: VendorEventSink, context: VendorContext) throws -> any Vendor {
        try FlumeVendor(instanceID: settings.id, options: options, sink: sink, context: context)
    }
}
