import GatewayModel
import VendorKit

/// Options of a `type: powerwall` entry (read by `PowerwallVendorFactory`).
public struct PowerwallOptions: Sendable {
    /// `url` (e.g. `https://192.168.91.1`), `timeout`, `poll_interval` (5 s), `quota`, `breaker`, `tls` (`first_use` by default).
    public var network: NetworkOptions
    /// The customer password (`password_file`, `password_env`, or `LBS_<ID>_PASSWORD`).
    public var password: VendorSecret
    /// Sent with the login, as the Tesla app does; optional.
    public var email: String

    public init(network: NetworkOptions, password: VendorSecret, email: String = "") {
        self.network = network
        self.password = password
        self.email = email
    }

    /// The gateway's root without a trailing slash.
    var base: String { network.base }
}
