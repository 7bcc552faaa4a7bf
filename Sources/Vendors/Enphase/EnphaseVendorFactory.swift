import GatewayModel
import Resilience
import VendorKit

/// Options of a `type: enphase` entry.
public struct EnphaseOptions: Sendable {
    public var network: NetworkOptions
    /// The owner token (a JWT valid one year) for firmware 7 and later; earlier firmware needs none.
    public var token: VendorSecret?
    /// One device per microinverter (`power`, `max_power`).
    public var inverters: Bool
    /// The Enlighten login that gets a token for this gateway's serial when no token is given.
    public var enlighten: Enlighten?
    /// When the Envoy resets itself each night (`nightly_outage`, local time; nil: `false`, every failure counts).
    public var nightlyOutage: ExpectedOutage?

    /// The Envoy goes dark shortly after 23:00 local time for a few minutes to over an hour, by model and firmware.
    public static func nightly(_ window: DailyWindow = DailyWindow(start: 22 * 60 + 55, end: 30)) -> ExpectedOutage {
        ExpectedOutage(window: window, reason: "The Envoy resets itself shortly after 23:00 every night.")
    }

    public struct Enlighten: Sendable {
        public var username: String
        public var password: VendorSecret
        public var enlightenURL: String
        public var entrezURL: String

        public init(username: String, password: VendorSecret, enlightenURL: String = "https://enlighten.enphaseenergy.com",
                    entrezURL: String = "https://entrez.enphaseenergy.com") {
            self.username = username
            self.password = password
            self.enlightenURL = enlightenURL
            self.entrezURL = entrezURL
        }
    }

    public init(network: NetworkOptions, token: VendorSecret?, inverters: Bool = false, enlighten: Enlighten? = nil,
                nightlyOutage: ExpectedOutage? = EnphaseOptions.nightly()) {
        self.nightlyOutage = nightlyOutage
        self.network = network
        self.token = token
        self.inverters = inverters
        self.enlighten = enlighten
    }
}

/// `type: enphase`: an Enphase IQ Gateway (Envoy) on the local network.
public enum EnphaseVendorFactory: VendorFactory {
    public static let typeName = "enphase"

    /// The Envoy is slow (pyenphase waits 45 s for an answer) and updates its meters about once a minute.
    static let defaults = NetworkOptions.Defaults(
        urlExample: "https://envoy.local", pollInterval: 60, timeout: 45, tls: .firstUse, quota: QuotaScheduler.Budgets(perMinute: 30)
    )
    public static let network: NetworkOptions.Defaults? = defaults

    public static func parse(_ settings: VendorSettings, reader: inout ConfigReader, environment: [String: String]) -> EnphaseOptions? {
        let path = settings.path
        let node = settings.options
        reader.rejectUnknownKeys(in: node, at: path, allowed: NetworkOptions.keys + ConfigReader.secretKeys("token") + ConfigReader.secretKeys("password")
            + ["inverters", "username", "enlighten_url", "entrez_url", "nightly_outage"])
        let network = NetworkOptions.parse(settings, defaults: defaults, reader: &reader)
        let token = reader.secret("token", of: settings, environment: environment, required: false)
        let inverters = reader.bool(node["inverters"], at: "\(path).inverters") ?? false
        var enlighten: EnphaseOptions.Enlighten?
        if let username = reader.string(node["username"], at: "\(path).username") {
            if token != nil {
                reader.problem("\(path).username", "a token and an Enlighten login are both given", fix: "keep token_file (simplest) or username and password_file")
            }
            let password = reader.secret("password", of: settings, environment: environment)
            var login = password.map { EnphaseOptions.Enlighten(username: username, password: $0) }
            for (key, keyPath) in [("enlighten_url", \EnphaseOptions.Enlighten.enlightenURL), ("entrez_url", \EnphaseOptions.Enlighten.entrezURL)] {
                guard let url = reader.string(node[key], at: "\(path).\(key)") else { continue }
                if NetworkOptions.isValidURL(url) { login?[keyPath: keyPath] = url } else {
                    reader.problem("\(path).\(key)", "'\(ConfigReader.redactURL(url))' is not an http:// or https:// URL", fix: "leave it out for Enphase's own service")
                }
            }
            enlighten = login
        } else if node["password_file"] != nil || node["password_env"] != nil {
            reader.problem("\(path).username", "missing", fix: "the Enlighten login needs the account's email as username")
        }
        var outage: ExpectedOutage? = EnphaseOptions.nightly()
        if let value = node["nightly_outage"] {
            if case .scalar(let text, _) = value, ["false", "no", "off"].contains(text.lowercased()) {
                outage = nil
            } else if let text = reader.string(value, at: "\(path).nightly_outage"), let window = DailyWindow(text) {
                outage = EnphaseOptions.nightly(window)
            } else {
                reader.problem("\(path).nightly_outage", "expected a local-time window like \"22:55-00:30\", or false",
                               fix: "leave it out for 22:55-00:30, or set false to treat every failure as a fault")
            }
        }
        guard let network else { return nil }
        return EnphaseOptions(network: network, token: token, inverters: inverters, enlighten: enlighten, nightlyOutage: outage)
    }

    public static func make(_ settings: VendorSettings, options: EnphaseOptions, sink: VendorEventSink, context: VendorContext) throws -> any Vendor {
        try EnphaseVendor(instanceID: settings.id, options: options, sink: sink, context: context)
    }
}
