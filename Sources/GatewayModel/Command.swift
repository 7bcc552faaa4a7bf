#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A validated, normalized command for one device. Every command gets an idempotency key
/// before it is stored or sent, so a retry after a crash can never run it twice.
public struct DeviceCommand: Sendable, Hashable, Codable {
    public var id: String
    public var device: DeviceID
    public var vendorID: String
    public var vendorDeviceID: String
    /// Normalized key → wanted value; only writable keys of the device, already range-checked.
    public var changes: [String: StateValue]
    public var issuedAt: Date
    /// After this instant the command must not run any more (it is reported `expired`).
    public var expiresAt: Date

    public init(
        id: String, device: DeviceID, vendorID: String, vendorDeviceID: String,
        changes: [String: StateValue], issuedAt: Date, expiresAt: Date
    ) {
        self.id = id
        self.device = device
        self.vendorID = vendorID
        self.vendorDeviceID = vendorDeviceID
        self.changes = changes
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
    }
}

/// What a vendor says after it carried out a command.
public struct CommandOutcome: Sendable, Hashable {
    /// State the vendor confirmed (or that it is known to take); merged into the device state.
    public var confirmed: [String: StateValue]

    public init(confirmed: [String: StateValue]) {
        self.confirmed = confirmed
    }
}
