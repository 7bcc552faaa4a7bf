import GatewayModel
import Resilience
import VendorKit

/// Options of a `type: sense` entry.
public struct SenseOptions: Sendable {
    /// REST base (`url`), timeout, breaker.
    public var network: NetworkOptions
    /// The realtime feed's base (`realtime_url`): `wss://clientrt.sense.com`.
    public var realtimeURL: String
    public var email: String
    public var password: VendorSecret
    /// The account's TOTP secret (base32), for an account with multi-factor sign-in.
    public var totpSecret: VendorSecret?
    /// Or a file a current 6-digit code is written to (read at each sign-in).
    public var totpFile: String?
    /// Only these monitors (default: every monitor of the account).
    public var monitorIDs: [Int64]
    /// At most one state per device this often (the feed sends two a second).
    public var publishInterval: Duration
    /// How often today's kWh are read from the trends endpoint.
    public var trendsInterval: Duration
    /// Reconnect delays of the feed (1 s doubling to 60 s; a refused sign-in waits 15 min).
    public var reconnect = ReconnectingStream.Policy()
    /// A feed silent this long (Sense sends two frames a second) is taken as dead and reconnected.
    public var feedTimeout: Duration = .seconds(30)

    public init(
        network: NetworkOptions, realtimeURL: String = "wss://clientrt.sense.com", email: String, password: VendorSecret,
        totpSecret: VendorSecret? = nil, totpFile: String? = nil, monitorIDs: [Int64] = [], publishInterval: Duration = .seconds(1),
        trendsInterval: Duration = .seconds(900)
    ) {
        self.network = network
        self.realtimeURL = realtimeURL
        self.email = email
        self.password = password
        self.totpSecret = totpSecret
        self.totpFile = totpFile
        self.monitorIDs = monitorIDs
        self.publishInterval = publishInterval
        self.trendsInterval = trendsInterval
    }
}

/// `type: sense`: a Sense energy monitor's realtime feed (WebSocket) and daily totals.
public enum SenseVendorFactory: VendorFactory {
    public static let typeName = "sense"

    /// Sense publishes no limits; its clients are asked to sign in at most every 15–20 min, and the trends
    /// (one call every 15 min) are the only polling. 120 calls an hour leave room for renewals and reconnects.
    static let defaults = NetworkOptions.Defaults(
        url: "https://api.sense.com/apiservice/api/v1", urlExample: "https://api.sense.com/apiservice/api/v1", pollInterval: 900, timeout: 20,
        quota: QuotaScheduler.Budgets(perHour: 120)
    )
    public static let network: NetworkOptions.Defaults? = defaults

    public static func parse(_ settings: VendorSettings, reader: inout ConfigReader, environment: [String: String]) -> SenseOptions? {
        let path = settings.path
        let node = settings.options
        reader.rejectUnknownKeys(in: node, at: path, allowed: NetworkOptions.keys + ConfigReader.secretKeys("password") + ConfigReader.secretKeys("totp_secret")
            + ["email", "totp_file", "realtime_url", "monitor_id", "publish_interval"])
        let network = NetworkOptions.parse(settings, defaults: defaults, reader: &reader)
        let email = reader.string(node["email"], at: "\(path).email", required: true)
        let password = reader.secret("password", of: settings, environment: environment)
        let totpSecret = reader.secret("totp_secret", of: settings, environment: environment, required: false)
        if let secret = totpSecret, TOTP.base32Decode(secret.reveal())?.isEmpty != false {
            reader.problem("\(path).totp_secret_file", "the TOTP secret is not base32", fix: "give the secret the authenticator app was set up with (letters A–Z and digits 2–7)")
        }
        let totpFile = reader.string(node["totp_file"], at: "\(path).totp_file").map { ConfigReader.resolve($0, baseDirectory: settings.baseDirectory) }
        if let totpFile { reader.namesFile(totpFile) }
        var realtime = "wss://clientrt.sense.com"
        if let url = reader.string(node["realtime_url"], at: "\(path).realtime_url") {
            let lower = url.lowercased()
            if lower.hasPrefix("wss://") || lower.hasPrefix("ws://") { realtime = NetworkOptions.root(url) } else {
                reader.problem("\(path).realtime_url", "'\(ConfigReader.redactURL(url))' is not a ws:// or wss:// URL", fix: "leave it out for Sense's own feed")
            }
        }
        var monitors: [Int64] = []
        if let text = reader.string(node["monitor_id"], at: "\(path).monitor_id") {
            if let id = Int64(text) { monitors = [id] } else { reader.problem("\(path).monitor_id", "'\(text)' is not a monitor id", fix: "use the number the Sense app shows, or leave it out") }
        }
        let interval = reader.number(node["publish_interval"], at: "\(path).publish_interval", range: 0...3600) ?? 1
        guard let network, let email, !email.isEmpty, let password else { return nil }
        return SenseOptions(
            network: network, realtimeURL: realtime, email: email, password: password, totpSecret: totpSecret, totpFile: totpFile,
            monitorIDs: monitors, publishInterval: .clampedSeconds(interval), trendsInterval: network.pollInterval
        )
    }

    public static func make(_ settings: VendorSettings, options: SenseOptions, sink: VendorEventSink, context: VendorContext) throws -> any Vendor {
        try SenseVendor(instanceID: settings.id, options: options, sink: sink, context: context)
    }
}
