#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// How a vendor instance is doing, as published on `<base>/bridge/vendors/<vendor_id>`.
/// Its devices' availability follows `state`.
public struct VendorHealth: Sendable, Hashable {
    public enum State: String, Sendable, Hashable, Codable {
        /// Calls succeed.
        case ok
        /// Some calls fail, or the breaker is probing; devices stay available.
        case degraded
        /// The breaker is open or the vendor cannot be reached; devices are offline.
        case down

        /// 0 for ok, 1 for degraded, 2 for down: a lower rank is better.
        public var rank: Int {
            switch self {
            case .ok: 0
            case .degraded: 1
            case .down: 2
            }
        }
    }

    public var vendorID: String
    public var state: State
    /// `closed`, `open` or `half_open`; nil for a vendor without a breaker (a push stream that reconnects
    /// on its own, `ReconnectingStream`).
    public var breaker: String?
    public var lastSuccess: Date?
    public var lastError: GatewayError?
    /// When the gateway will next try the vendor (breaker open), if known.
    public var nextAttempt: Date?
    /// Budget use per window, e.g. `["day": ["used": 12, "limit": 300, "resets_at": <unix s>]]`.
    public var quota: [String: [String: Double]]
    /// The vendor reports each device's availability itself (`VendorEvent.availability`): a vendor of several
    /// independent connections (HomeKit accessories) is `degraded` while one is away, and that one's devices
    /// stay offline. Only `down` then takes every device offline.
    public var devicesReportAvailability = false

    public init(
        vendorID: String, state: State, breaker: String? = "closed", lastSuccess: Date? = nil,
        lastError: GatewayError? = nil, nextAttempt: Date? = nil, quota: [String: [String: Double]] = [:]
    ) {
        self.vendorID = vendorID
        self.state = state
        self.breaker = breaker
        self.lastSuccess = lastSuccess
        self.lastError = lastError
        self.nextAttempt = nextAttempt
        self.quota = quota
    }
}
