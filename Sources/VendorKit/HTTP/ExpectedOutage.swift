#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel

/// A daily stretch of local time when a device is known to stop answering: an Enphase Envoy resets itself
/// shortly after 23:00 every night. A failure to reach it then is `vendor_unavailable` with the last state kept,
/// not a fault: it does not count against the breaker, does not mark the vendor `down` and its devices stay online.
public struct ExpectedOutage: Sendable, Equatable {
    public var window: DailyWindow
    /// Why the device is dark then, for the error a user sees.
    public var reason: String

    public init(window: DailyWindow, reason: String) {
        self.window = window
        self.reason = reason
    }

    /// `error` as the expected outage it is, when it is a failure to reach the device inside the window.
    public func explain(_ error: GatewayError, at date: Date) -> GatewayError? {
        guard error.code == .vendorUnreachable || error.code == .vendorTimeout, window.contains(date) else { return nil }
        var quiet = GatewayError(
            .vendorUnavailable, message: "\(reason) It does not answer now (\(error.message)); the last state is kept.",
            suggestion: "Nothing to do: this is expected between \(window.text) local time and the gateway keeps polling.",
            severity: .info, retryable: false, countsAgainstVendor: false
        )
        quiet.outcomeUnknown = error.outcomeUnknown
        return quiet
    }
}
