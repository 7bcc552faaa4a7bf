import GatewayModel
import Resilience
import VendorKit

/// Options of a `type: emporia` entry.
public struct EmporiaOptions: Sendable {
    public var network: NetworkOptions
    /// `refresh_token_file`, `refresh_token_env` or `LBS_<ID>_REFRESH_TOKEN`: a Cognito refresh token (optional
    /// with a password).
    public var refreshToken: VendorSecret?
    /// `username` (the account's email) and `password_file`/`password_env`/`LBS_<ID>_PASSWORD`: the SRP sign-in.
    public var username: String?
    public var password: VendorSecret?
    /// Emporia's Cognito user pool (`user_pool_id`): its name goes into the SRP maths.
    public var userPoolID: String
    /// Cognito's endpoint (`auth_url`), overridable for the simulator.
    public var authURL: String
    /// Emporia's Cognito app client.
    public var clientID: String

    public init(network: NetworkOptions, refreshToken: VendorSecret? = nil, username: String? = nil, password: VendorSecret? = nil,
                authURL: String = "https://cognito-idp.us-east-2.amazonaws.com/", clientID: String = "4qte47jbstod8apnfic0bunmrq",
                userPoolID: String = "us-east-2_ghlOXVLi1") {
        self.network = network
        self.refreshToken = refreshToken
        self.username = username
        self.password = password
        self.userPoolID = userPoolID
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
        reader.rejectUnknownKeys(in: node, at: path, allowed: NetworkOptions.keys + ConfigReader.secretKeys("refresh_token")
            + ConfigReader.secretKeys("password") + ["auth_url", "client_id", "username", "user_pool_id"])
        let network = NetworkOptions.parse(settings, defaults: defaults, reader: &reader)
        let username = reader.string(node["username"], at: "\(path).username").flatMap { $0.isEmpty ? nil : $0 }
        let token = reader.secret("refresh_token", of: settings, environment: environment, required: false)
        let password = reader.secret("password", of: settings, environment: environment, required: username != nil && token == nil)
        if password != nil, username == nil {
            reader.problem("\(path).username", "a password is set but no username", fix: "add username: the email of the Emporia account")
        }
        if token == nil, username == nil {
            reader.problem("\(path).username", "no way to sign in to Emporia",
                           fix: "give username and password_file (or LBS_\(settings.id.uppercased())_PASSWORD), or refresh_token_file")
        }
        var options = network.map { EmporiaOptions(network: $0, refreshToken: token, username: username, password: password) }
        if token == nil, username == nil || password == nil { options = nil }
        if let url = reader.string(node["auth_url"], at: "\(path).auth_url") {
            if NetworkOptions.isValidURL(url) { options?.authURL = url } else {
                reader.problem("\(path).auth_url", "'\(ConfigReader.redactURL(url))' is not an http:// or https:// URL", fix: "leave it out for Emporia's Cognito")
            }
        }
        if let client = reader.string(node["client_id"], at: "\(path).client_id"), !client.isEmpty { options?.clientID = client }
        if let pool = reader.string(node["user_pool_id"], at: "\(path).user_pool_id") {
            if pool.contains("_") { options?.userPoolID = pool } else {
                reader.problem("\(path).user_pool_id", "'\(pool)' is not a Cognito pool id (<region>_<name>)", fix: "leave it out for Emporia's pool")
            }
        }
        return options
    }

    public static func make(_ settings: VendorSettings, options: EmporiaOptions, sink: VendorEventSink, context: VendorContext) throws -> any Vendor {
        try EmporiaVendor(instanceID: settings.id, options: options, sink: sink, context: context)
    }
}
