import GatewayModel
import Resilience
import VendorKit

/// Options of a `type: solaredge` entry.
public struct SolarEdgeOptions: Sendable {
    public var network: NetworkOptions
    /// `api_key_file`, `api_key_env` or `LBS_<ID>_API_KEY`: a Monitoring API v2 key (sent as `X-API-Key`).
    public var apiKey: VendorSecret
    /// nil: every site of the key (`/v2/sites`).
    public var siteID: String?

    public init(network: NetworkOptions, apiKey: VendorSecret, siteID: String? = nil) {
        self.network = network
        self.apiKey = apiKey
        self.siteID = siteID
    }
}

/// `type: solaredge`: the SolarEdge Monitoring API v2 (v1 answers 410 since November 2026).
public enum SolarEdgeVendorFactory: VendorFactory {
    public static let typeName = "solaredge"

    /// The cloud refreshes about every 15 min and a v2 key has 10 calls a minute and 2,000 a month: one call a
    /// site every 30 min is 1,440 a month (the quota scheduler stretches the interval further if needed).
    static let defaults = NetworkOptions.Defaults(
        url: "https://monitoringapi.solaredge.com/v2", urlExample: "https://monitoringapi.solaredge.com/v2", pollInterval: 1800, timeout: 20,
        quota: QuotaScheduler.Budgets(perMinute: 10, perMonth: 2000)
    )
    public static let network: NetworkOptions.Defaults? = defaults

    public static func parse(_ settings: VendorSettings, reader: inout ConfigReader, environment: [String: String]) -> SolarEdgeOptions? {
        reader.rejectUnknownKeys(in: settings.options, at: settings.path, allowed: NetworkOptions.keys + ConfigReader.secretKeys("api_key") + ["site_id"])
        let network = NetworkOptions.parse(settings, defaults: defaults, reader: &reader)
        let key = reader.secret("api_key", of: settings, environment: environment)
        let site = reader.string(settings.options["site_id"], at: "\(settings.path).site_id")
        if let site, site.isEmpty || !site.allSatisfy(\.isNumber) {
            reader.problem("\(settings.path).site_id", "'\(site)' is not a SolarEdge site id", fix: "use the number shown in the monitoring portal's URL, or leave it out for every site")
        }
        guard let network, let key else { return nil }
        return SolarEdgeOptions(network: network, apiKey: key, siteID: site)
    }

    public static func make(_ settings: VendorSettings, options: SolarEdgeOptions, sink: VendorEventSink, context: VendorContext) throws -> any Vendor {
        try SolarEdgeVendor(instanceID: settings.id, options: options, sink: sink, context: context)
    }
}
