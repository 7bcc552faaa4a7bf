import GatewayModel
import Resilience
import VendorKit

/// `type: powerwall`: a Tesla Backup Gateway 2, Powerwall+ or Powerwall 3 on the local network.
public enum PowerwallVendorFactory: VendorFactory {
    public static let typeName = "powerwall"

    /// A local device with a self-signed certificate (trusted on first use); polled every 5 s. Tesla publishes
    /// no limit; the declared 120 requests a minute leave room for a poll (3–4 requests) every 5 s and commands.
    static let defaults = NetworkOptions.Defaults(
        urlExample: "https://192.168.91.1", pollInterval: 5, timeout: 10, tls: .firstUse,
        quota: QuotaScheduler.Budgets(perMinute: 120)
    )
    public static let network: NetworkOptions.Defaults? = defaults

    public static func parse(_ settings: VendorSettings, reader: inout ConfigReader, environment: [String: String]) -> PowerwallOptions? {
        reader.rejectUnknownKeys(
            in: settings.options, at: settings.path, allowed: NetworkOptions.keys + ConfigReader.secretKeys("password") + ["email"]
        )
        let network = NetworkOptions.parse(settings, defaults: defaults, reader: &reader)
        let password = reader.secret("password", of: settings, environment: environment)
        let email = reader.string(settings.options["email"], at: "\(settings.path).email") ?? ""
        guard let network, let password else { return nil }
        return PowerwallOptions(network: network, password: password, email: email)
    }

    public static func make(_ settings: VendorSettings, options: PowerwallOptions, sink: VendorEventSink, context: VendorContext) throws -> any Vendor {
        try PowerwallVendor(instanceID: settings.id, options: options, sink: sink, context: context)
    }
}
