/// What can go wrong speaking HAP, with a reason a user can read. The vendor turns these into `GatewayError`s.
public enum HAPError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Bytes that do not follow the protocol (TLV8, HTTP, JSON, frame lengths).
    case malformed(String)
    /// The accessory answered a pairing step with TLV error `code` (`step`: "pair-setup M2", …).
    case refused(TLVError, step: String, retryDelay: Int?)
    /// A proof or signature did not check: the other side is not who it claims, or the setup code is wrong.
    case authentication(String)
    /// A frame failed to decrypt (wrong key, tampering, or lost frames): the session cannot go on.
    case decryption(String)

    public var description: String {
        switch self {
        case .malformed(let reason): "malformed HAP message: \(reason)"
        case .refused(let error, let step, let delay):
            "\(step): \(error.reason)" + (delay.map { " (retry in \($0) s)" } ?? "")
        case .authentication(let reason): reason
        case .decryption(let reason): reason
        }
    }
}

/// HAP status codes in `"status"` of characteristic reads and writes (HAP §6.7.1.4).
public enum HAPStatus {
    public static let success = 0
    public static let insufficientPrivileges = -70401
    public static let communicationFailure = -70402
    public static let busy = -70403
    public static let readOnly = -70404
    public static let writeOnly = -70405
    public static let notificationNotSupported = -70406
    public static let outOfResources = -70407
    public static let timedOut = -70408
    public static let noSuchResource = -70409
    public static let invalidValue = -70410
    public static let insufficientAuthorization = -70411
    public static let notAllowedInCurrentState = -70412

    public static func reason(_ status: Int) -> String {
        switch status {
        case success: "success"
        case insufficientPrivileges: "insufficient privileges (-70401)"
        case communicationFailure: "the accessory cannot reach the device or service (-70402)"
        case busy: "the accessory is busy (-70403)"
        case readOnly: "the characteristic is read-only (-70404)"
        case writeOnly: "the characteristic is write-only (-70405)"
        case notificationNotSupported: "the characteristic sends no notifications (-70406)"
        case outOfResources: "the accessory is out of resources (-70407)"
        case timedOut: "the accessory timed out (-70408)"
        case noSuchResource: "no such accessory or characteristic (-70409)"
        case invalidValue: "the accessory refused the value as invalid (-70410)"
        case insufficientAuthorization: "insufficient authorization (-70411)"
        case notAllowedInCurrentState: "not allowed in the accessory's current state (-70412)"
        default: "HAP status \(status)"
        }
    }
}
