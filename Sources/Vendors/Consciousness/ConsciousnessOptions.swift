import GatewayModel
import Resilience
import VendorKit

/// Options of a `type: consciousness` vendor entry (read by `ConsciousnessVendorFactory`).
public struct ConsciousnessOptions: Sendable {
    /// The server root, e.g. `http://localhost:8000` (a trailing `/api/v1` is accepted and ignored).
    public var url: String
    public var username: String
    /// Never logged: `VendorSecret` redacts itself everywhere.
    public var password: VendorSecret
    /// Requested time between polls; a quota may stretch it.
    public var pollInterval: Duration
    /// Limit for one HTTP exchange.
    public var timeout: Duration
    /// Declared request budgets; nil means unlimited.
    public var quota: QuotaScheduler.Budgets?
    public var breaker: CircuitBreaker.Settings
    public var retry: RetryPolicy
    /// How the server's certificate is checked (`https://` only): system CA store, first-use pin or a given pin.
    public var tls: TLSPolicy
    /// The unit of the backend's thermostat readings (`temperature_unit`).
    public var temperatureUnit: TemperatureUnit

    /// `temperature_unit: auto|celsius|fahrenheit`. The served contract has no settings endpoint naming a unit, so
    /// `auto` uses a device's own `temperature_unit`/`unit` property when it has one, else a heuristic: a thermostat
    /// reading above 45 (no room is 45 °C; 45 °F is 7 °C) means Fahrenheit.
    public enum TemperatureUnit: String, Sendable, CaseIterable {
        case auto, celsius, fahrenheit
    }

    public init(
        url: String, username: String, password: VendorSecret, pollInterval: Duration = .seconds(30),
        timeout: Duration = .seconds(10), quota: QuotaScheduler.Budgets? = nil, breaker: CircuitBreaker.Settings = .init(),
        retry: RetryPolicy = ConsciousnessOptions.defaultRetry, tls: TLSPolicy = .system, temperatureUnit: TemperatureUnit = .auto
    ) {
        self.temperatureUnit = temperatureUnit
        self.url = url
        self.username = username
        self.password = password
        self.pollInterval = pollInterval
        self.timeout = timeout
        self.quota = quota
        self.breaker = breaker
        self.retry = retry
        self.tls = tls
    }

    /// Three attempts with up to 10 s of jitter; a `Retry-After` is honoured up to 2 min, and a call gives
    /// up rather than wait past a minute (the next poll comes anyway).
    public static let defaultRetry = RetryPolicy(
        maxAttempts: 3, baseDelay: .seconds(1), maxDelay: .seconds(10), retryAfterCap: .seconds(120), maxElapsed: .seconds(60)
    )

    /// `<root>/api/v1` without a trailing slash.
    public var apiBase: String {
        var root = NetworkOptions.root(url)
        if root.hasSuffix("/api/v1") { root.removeLast("/api/v1".count) }
        return root + "/api/v1"
    }
}
