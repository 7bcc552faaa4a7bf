import GatewayModel
import Resilience
import VendorKit

/// Options of a `type: emporia` entry.
public struct EmporiaOptions: Sendable {
    public var network: NetworkOptions
    /// `refresh_token_file`, `refresh_token_env` or `LBS_<ID>_REFRESH_TOKEN`: the account's Cognito refresh token.
    public var refreshToken: VendorSecret
    /// Cognito's endpoint (`auth_url`), overridable for the simulator.
    public var authURL: String
    /// Emporia's Cognito app client.
    public var clientID: String

    public init(network: NetworkOptions, refreshToken: VendorSecret, authURL: String = "https://cognito-idp.us-east-2.amazonaws.com/",
                clientID: String = "4qte47jbstod8apnfic0bunmrq") {
        self.network = network
        self.refreshToken = refreshToken
        self.authURL = authURL
        self.clientID = clientID
    }
}

/// `type: emporia`: Emporia Vue monitors, smart plugs and chargers through Emporia's cloud.
public enum EmporiaVendorFactory: VendorFactory {
    public static let typeName = "emporia"

    /// Emporia asks API users to stay near 2,000 requests a day: one usage call a minute is 1,440; the quota
    /// scheduler stretches the interval when plugs add a device-list call a poll.
    static let defaults = NetworkOptions.Defaults(
        url: "https://api.emporiaenergy.com", urlExample: "https://api.emporiaenergy.com", pollInterval: 60, timeout: 20,
        quota: QuotaScheduler.Budgets(perDay: 2000)
    )
    public static let network: NetworkOptions.Defaults? = defaults

    public static func parse(_ settings: VendorSettings, reader: inout ConfigReader, environment: [String: String]) -> EmporiaOptions? {
        let path = settings.path
        let node = settings.options
        reader.rejectUnknownKeys(in: node, at: path, allowed: NetworkOptions.keys + ConfigReader.secretKeys("refresh_token") + ["auth_url", "client_id", "username", "password_file", "password_env"])
        if node["password_file"] != nil || node["password_env"] != nil {
            reader.problem("\(path).password_file", "the username/password (SRP) login is not built yet",
                           fix: "give refresh_token_file instead: the refresh token of a signed-in session (e.g. PyEmVue's keys.json)")
        }
        let network = NetworkOptions.parse(settings, defaults: defaults, reader: &reader)
        let token = reader.secret("refresh_token", of: settings, environment: environment)
        var options = network.flatMap { network in token.map { EmporiaOptions(network: network, refreshToken: $0) } }
        if let url = reader.string(node["auth_url"], at: "\(path).auth_url") {
            if NetworkOptions.isValidURL(url) { options?.authURL = url } else {
                reader.problem("\(path).auth_url", "'\(ConfigReader.redactURL(url))' is not an http:// or https:// URL", fix: "leave it out for Emporia's Cognito")
            }
        }
        if let client = reader.string(node["client_id"], at: "\(path).client_id"), !client.isEmpty { options?.clientID = client }
        return options
    }

    public static func make(_ settings: VendorSettings, options: EmporiaOptions, sink: VendorEventSink, context: VendorContext) throws -> any Vendor {
        try EmporiaVendor(instanceID: settings.id, options: options, sink: sink, context: context)
    }
}
