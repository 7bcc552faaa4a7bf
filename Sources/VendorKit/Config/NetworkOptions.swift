import GatewayModel
import Resilience

/// The options every network vendor has, read by one parser so they mean the same everywhere:
/// `url`, `timeout`, `poll_interval`, `quota`, `breaker` and `tls`. A vendor's factory reads these
/// with `NetworkOptions.parse` and its own keys (and secrets, `ConfigReader.secret`) beside them.
public struct NetworkOptions: Sendable {
    /// The base URL: the vendor's own by default, overridable for simulators and proxies.
    public var url: String
    /// Limit for one HTTP exchange.
    public var timeout: Duration
    /// Requested time between polls; a quota may stretch it.
    public var pollInterval: Duration
    /// Declared request budgets; nil means unlimited.
    public var quota: QuotaScheduler.Budgets?
    public var breaker: CircuitBreaker.Settings
    /// How the server's certificate is checked (`https://` only).
    public var tls: TLSPolicy

    public init(
        url: String, timeout: Duration = .seconds(10), pollInterval: Duration = .seconds(30),
        quota: QuotaScheduler.Budgets? = nil, breaker: CircuitBreaker.Settings = .init(), tls: TLSPolicy = .system
    ) {
        self.url = url
        self.timeout = timeout
        self.pollInterval = pollInterval
        self.quota = quota
        self.breaker = breaker
        self.tls = tls
    }

    /// `url` without trailing slashes, to put paths after.
    public var base: String { Self.root(url) }

    /// `url` without trailing slashes.
    public static func root(_ url: String) -> String {
        var root = Substring(url)
        while root.hasSuffix("/") { root.removeLast() }
        return String(root)
    }

    /// The keys `parse` reads (with the common ones), for `rejectUnknownKeys`.
    public static let keys = VendorSettings.commonKeys + ["url", "timeout", "quota", "breaker", "tls"]

    /// What a vendor says about its own defaults.
    public struct Defaults: Sendable {
        /// nil: `url` is required (a local device has no default address).
        public var url: String?
        /// Shown in the fix of a bad `url`.
        public var urlExample: String
        public var pollInterval: Double
        public var timeout: Double
        /// The `tls` policy of an `https://` URL without a `tls` key: `system` for cloud APIs,
        /// `first_use` for local devices with self-signed certificates.
        public var tls: TLSPolicy
        /// The vendor's published limits, used when the entry has no `quota`.
        public var quota: QuotaScheduler.Budgets?

        public init(
            url: String? = nil, urlExample: String, pollInterval: Double, timeout: Double = 10,
            tls: TLSPolicy = .system, quota: QuotaScheduler.Budgets? = nil
        ) {
            self.url = url
            self.urlExample = urlExample
            self.pollInterval = pollInterval
            self.timeout = timeout
            self.tls = tls
            self.quota = quota
        }
    }

    /// Reads the shared keys of `settings`; problems go to `reader` with their key path.
    /// Returns nil when the entry cannot be used (no or bad `url`).
    public static func parse(_ settings: VendorSettings, defaults: Defaults, reader: inout ConfigReader) -> NetworkOptions? {
        let path = settings.path
        let node = settings.options
        let url = reader.string(node["url"], at: "\(path).url", required: defaults.url == nil) ?? defaults.url
        var usable = url.map { !$0.isEmpty } ?? false
        if let url, !url.isEmpty, !isValidURL(url) {
            reader.problem("\(path).url", "'\(ConfigReader.redactURL(url))' is not an http:// or https:// URL", fix: "e.g. \(defaults.urlExample)")
            usable = false
        }
        let tls = tlsPolicy(node["tls"], at: "\(path).tls", url: url, default: defaults.tls, reader: &reader)
        let timeout = reader.number(node["timeout"], at: "\(path).timeout", range: 0.1...300) ?? defaults.timeout
        let quota = budgets(node["quota"], at: "\(path).quota", reader: &reader) ?? defaults.quota
        let breaker = breakerSettings(node["breaker"], at: "\(path).breaker", reader: &reader)
        guard usable, let url else { return nil }
        return NetworkOptions(
            url: url, timeout: .clampedSeconds(timeout), pollInterval: settings.pollInterval(default: defaults.pollInterval),
            quota: quota, breaker: breaker, tls: tls
        )
    }

    /// True for an absolute `http://` or `https://` URL with a host and no credentials in it.
    public static func isValidURL(_ url: String) -> Bool {
        let lower = url.lowercased()
        for scheme in ["http://", "https://"] where lower.hasPrefix(scheme) {
            let rest = lower.dropFirst(scheme.count)
            let host = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
            return !host.isEmpty && !host.contains("@") && !rest.contains(" ")
        }
        return false
    }

    /// `quota: {per_minute, per_hour, per_day, per_month}`; nil when absent or empty.
    static func budgets(_ node: ConfigNode?, at path: String, reader: inout ConfigReader) -> QuotaScheduler.Budgets? {
        guard let quota = reader.mapping(node, at: path) else { return nil }
        reader.rejectUnknownKeys(in: quota, at: path, allowed: ["per_minute", "per_hour", "per_day", "per_month"])
        func limit(_ key: String) -> Int? {
            reader.number(quota[key], at: "\(path).\(key)", range: 1...10_000_000).map { Int($0) }
        }
        return QuotaScheduler.Budgets(perMinute: limit("per_minute"), perHour: limit("per_hour"), perDay: limit("per_day"), perMonth: limit("per_month"))
    }

    /// `breaker: {minimum_calls, failure_ratio, window, open_duration, max_open_duration}`, each optional.
    static func breakerSettings(_ node: ConfigNode?, at path: String, reader: inout ConfigReader) -> CircuitBreaker.Settings {
        let breaker = CircuitBreaker.Settings()
        guard let node = reader.mapping(node, at: path) else { return breaker }
        reader.rejectUnknownKeys(in: node, at: path, allowed: ["minimum_calls", "failure_ratio", "window", "open_duration", "max_open_duration"])
        func seconds(_ key: String, _ range: ClosedRange<Double>) -> Duration? {
            reader.number(node[key], at: "\(path).\(key)", range: range).map { .clampedSeconds($0) }
        }
        // Older configs' `max_open_duration` is still checked but has no effect: the wait stops at `open_duration`.
        _ = seconds("max_open_duration", 1...604_800)
        return CircuitBreaker.Settings(
            window: seconds("window", 1...86_400) ?? breaker.window,
            minimumCalls: reader.number(node["minimum_calls"], at: "\(path).minimum_calls", range: 1...10_000).map { Int($0) } ?? breaker.minimumCalls,
            failureRatio: reader.number(node["failure_ratio"], at: "\(path).failure_ratio", range: 0.01...1) ?? breaker.failureRatio,
            openDuration: seconds("open_duration", 1...86_400) ?? breaker.openDuration
        )
    }

    static let tlsFix = "use tls: system (CA store), tls: first_use (pin the key seen first), or tls: {pin: \"<base64 SPKI SHA-256>\"}"

    /// Reads a `tls` value: `system`, `first_use`, or `{pin: "<base64 SPKI SHA-256>"}`. Without the key an
    /// `https://` URL gets the vendor's default and a plain `http://` one `system` (nothing to check).
    public static func tlsPolicy(
        _ node: ConfigNode?, at path: String, url: String?, default fallback: TLSPolicy = .system, reader: inout ConfigReader
    ) -> TLSPolicy {
        let policy: TLSPolicy
        switch node {
        case .none, .null?:
            guard let url, TLSTrustResolver.isHTTPS(url) else { return .system }
            return fallback
        case .scalar(let text, _)?:
            switch text {
            case "system": policy = .system
            case "first_use": policy = .firstUse
            default:
                let hint = TLSPolicy.normalizedPin(text) != nil ? "write it as tls: {pin: \"\(text)\"}" : tlsFix
                reader.problem(path, "'\(GatewayError.clip(text))' is not supported", fix: hint)
                return .system
            }
        case .mapping?:
            reader.rejectUnknownKeys(in: node, at: path, allowed: ["pin"])
            guard let text = reader.string(node?["pin"], at: "\(path).pin", required: true), !text.isEmpty else { return .system }
            guard let pin = TLSPolicy.normalizedPin(text) else {
                reader.problem(
                    "\(path).pin", "'\(GatewayError.clip(text))' is not a SHA-256 public-key pin",
                    fix: "give the base64 SHA-256 of the server's SubjectPublicKeyInfo (44 characters ending in '=', optionally "
                        + "prefixed sha256//); 'lbs-gateway tls-pin' prints the key a server presents"
                )
                return .system
            }
            policy = .pinned(pin)
        case let other?:
            reader.problem(path, "expected a value or a mapping, found \(other.kindName)", fix: tlsFix)
            return .system
        }
        if policy != .system, let url, !url.isEmpty, !TLSTrustResolver.isHTTPS(url) {
            reader.problem(
                path, "tls: \(policy == .firstUse ? "first_use" : "pin") needs an https:// url (plain http has no certificate to pin)",
                fix: "use https:// in url, or remove tls"
            )
        }
        return policy
    }
}

extension VendorHTTP.Settings {
    /// The HTTP layer's settings for an entry's shared options: its breaker, quota and TLS policy.
    public init(_ network: NetworkOptions, retry: RetryPolicy = RetryPolicy()) {
        self.init(breaker: network.breaker, retry: retry, quota: network.quota.map { QuotaScheduler.Settings(budgets: $0) }, tls: network.tls)
    }
}
