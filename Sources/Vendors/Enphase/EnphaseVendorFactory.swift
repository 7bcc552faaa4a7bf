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

    public init(network: NetworkOptions, token: VendorSecret?, inverters: Bool = false) {
        self.network = network
        self.token = token
        self.inverters = inverters
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
        reader.rejectUnknownKeys(in: node, at: path, allowed: NetworkOptions.keys + ConfigReader.secretKeys("token") + ["inverters", "username", "password_file", "password_env"])
        for key in ["username", "password_file", "password_env"] where node[key] != nil {
            reader.problem("\(path).\(key)", "the Enlighten login is not supported yet", fix: "give the owner token with token_file (from https://entrez.enphaseenergy.com, valid one year)")
        }
        let network = NetworkOptions.parse(settings, defaults: defaults, reader: &reader)
        let token = reader.secret("token", of: settings, environment: environment, required: false)
        let inverters = reader.bool(node["inverters"], at: "\(path).inverters") ?? false
        guard let network else { return nil }
        return EnphaseOptions(network: network, token: token, inverters: inverters)
    }

    public static func make(_ settings: VendorSettings, options: EnphaseOptions, sink: VendorEventSink, context: VendorContext) throws -> any Vendor {
        try EnphaseVendor(instanceID: settings.id, options: options, sink: sink, context: context)
    }
}
