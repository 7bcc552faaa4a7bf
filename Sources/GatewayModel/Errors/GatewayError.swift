#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The one error type for every failure that reaches a user: MQTT `command_failed` events,
/// v5 error responses and vendor health. Messages and suggestions are written for people and
/// never contain secrets: callers pass only sanitized details.
public struct GatewayError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Stable, snake_case codes that scripts can match on.
    public enum Code: String, Sendable, Codable, CaseIterable {
        // Input validation (MQTT router); never the vendor's fault.
        case invalidJSON = "invalid_json"
        case invalidUTF8 = "invalid_utf8"
        /// Valid JSON of the wrong type or shape.
        case invalidPayload = "invalid_payload"
        case unknownDevice = "unknown_device"
        case unknownKey = "unknown_key"
        case readOnlyKey = "read_only_key"
        case outOfRange = "out_of_range"
        case payloadTooLarge = "payload_too_large"
        case retainedCommand = "retained_command"
        case expired
        case unknownRequest = "unknown_request"
        case queueFull = "queue_full"
        /// A request would grow something the gateway keeps (scenes) past its documented limit.
        case limitReached = "limit_reached"
        /// A newer command for the same device and key replaced this one before it was carried out.
        case superseded
        /// The command could not be stored in the outbox (disk full, read-only or broken cache) and was not sent.
        case storageUnavailable = "storage_unavailable"
        /// A v5 Response Topic inside the gateway's own namespace or Home Assistant's was refused.
        case responseTopicRefused = "response_topic_refused"
        // Vendor and transport.
        /// Connect or DNS failure.
        case vendorUnreachable = "vendor_unreachable"
        case vendorTimeout = "vendor_timeout"
        /// HTTP 5xx.
        case vendorServerError = "vendor_server_error"
        /// The vendor's device answers but is not serving data now (a Powerwall whose sitemaster is stopped
        /// answers 502 with an empty body; an Envoy at night): last state stays, the gateway retries.
        case vendorUnavailable = "vendor_unavailable"
        /// HTTP 429.
        case rateLimited = "rate_limited"
        /// HTTP 401/403, still failing after one re-login.
        case authFailed = "auth_failed"
        /// Any other 4xx caused by our request.
        case badRequest = "bad_request"
        /// HTTP 404 (or a redirect away from a missing endpoint).
        case notFound = "not_found"
        /// Bad JSON, an HTML error page or an unexpected shape.
        case malformedResponse = "malformed_response"
        case tlsError = "tls_error"
        case tlsPinMismatch = "tls_pin_mismatch"
        // Gateway protection.
        case breakerOpen = "breaker_open"
        case quotaExhausted = "quota_exhausted"
        /// The vendor understood the command and refused it.
        case vendorRejected = "vendor_rejected"
        /// A command whose outcome is unknown (the gateway stopped while it ran).
        case interrupted
        case `internal`

        /// True for codes that say the vendor itself is unhealthy (they feed the circuit breaker).
        public var defaultCountsAgainstVendor: Bool {
            switch self {
            case .vendorUnreachable, .vendorTimeout, .vendorServerError, .vendorUnavailable, .rateLimited,
                 .malformedResponse, .tlsError, .tlsPinMismatch:
                true
            default:
                false
            }
        }

        /// True for transient failures where trying again later can succeed.
        public var defaultRetryable: Bool {
            switch self {
            case .vendorUnreachable, .vendorTimeout, .vendorServerError, .vendorUnavailable, .rateLimited,
                 .malformedResponse, .breakerOpen, .quotaExhausted:
                true
            default:
                false
            }
        }

        public var defaultSeverity: Severity {
            switch self {
            case .retainedCommand, .expired, .superseded, .responseTopicRefused, .vendorUnreachable, .vendorTimeout, .vendorServerError,
                 .vendorUnavailable, .rateLimited, .breakerOpen, .quotaExhausted, .interrupted:
                .warning
            case .tlsPinMismatch:
                .critical
            default:
                .error
            }
        }

        /// What a user can do about it, when the constructor has nothing more specific.
        public var defaultSuggestion: String {
            switch self {
            case .invalidJSON: "Send a JSON object, for example {\"state\":\"ON\"}."
            case .invalidUTF8: "Send the payload as UTF-8 encoded JSON."
            case .invalidPayload: "Send a JSON object whose keys are state keys of the device, for example {\"brightness\":50}."
            case .unknownDevice: "Check the device id in <base>/bridge/devices; ids are lower-case <vendor>_<device>."
            case .unknownKey: "Use one of the keys listed for the device in <base>/bridge/devices."
            case .readOnlyKey: "Only writable keys can be set; read this one from the device's state topic."
            case .outOfRange: "Send a value inside the key's range."
            case .payloadTooLarge: "Send a smaller payload; commands only need the keys that change."
            case .retainedCommand: "Send commands as messages that are not kept for later, and clear the one that was kept."
            case .expired: "Send the command again if it is still wanted."
            case .unknownRequest: "Use one of the bridge requests listed in the topic documentation."
            case .limitReached: "Remove entries that are no longer used before adding more."
            case .queueFull: "Wait for the device's queued commands to finish (or expire) before sending more."
            case .superseded: "Nothing to do: the newer command for this key is carried out instead."
            case .storageUnavailable: "Free disk space or fix the cache file (storage.path); or set commands.when_storage_fails: send to send unstored commands."
            case .responseTopicRefused: "Use a response topic under replies/ (or under one of mqtt.response_topic_prefixes), outside the gateway's base topic and the Home Assistant discovery prefix."
            case .vendorUnreachable: "Check that the vendor's device or cloud is online and reachable from the gateway; the gateway keeps retrying."
            case .vendorTimeout: "The vendor is slow or overloaded; the gateway retries automatically."
            case .vendorServerError: "The vendor has a problem on its side; the gateway retries automatically."
            case .vendorUnavailable: "The vendor's device is up but not serving data right now; the gateway keeps the last state and retries."
            case .rateLimited: "The vendor asked the gateway to slow down; it waits and retries. Consider a longer poll interval."
            case .authFailed: "Check the vendor credentials in the gateway configuration."
            case .badRequest: "The vendor did not accept the request; check the command and the vendor configuration."
            case .notFound: "Check the vendor configuration (site id, device id, endpoint); the vendor does not know this resource."
            case .malformedResponse: "The vendor answered with something unexpected; if this persists, its API may have changed."
            case .tlsError: "Check the vendor's certificate, the system time and the CA bundle on the gateway."
            case .tlsPinMismatch: "The vendor's certificate does not match the pinned one; verify the device before updating the pin."
            case .breakerOpen: "The gateway paused calls to this vendor after repeated failures; it tries again automatically."
            case .quotaExhausted: "The vendor's request budget is used up for now; wait for it to reset or raise the configured budget."
            case .vendorRejected: "The vendor refused the command; check the device's state and capabilities."
            case .interrupted: "Check the device's state, then send the command again if needed."
            case .internal: "This is a gateway bug; please report it with the gateway log."
            }
        }
    }

    public enum Severity: String, Sendable, Codable {
        case info, warning, error, critical
    }

    public var code: Code
    public var severity: Severity
    public var message: String
    public var suggestion: String
    /// Trying again later can succeed.
    public var retryable: Bool
    /// How long the vendor asked us to wait (already capped), if it said so.
    public var retryAfter: Duration?
    public var httpStatus: Int?
    /// True only for failures that say the vendor is unhealthy (timeouts, connection errors, 5xx, 429,
    /// malformed answers, TLS failures); only these feed the circuit breaker.
    public var countsAgainstVendor: Bool
    /// The credentials were refused: the caller logs in again ONCE and repeats the call.
    public var requiresReauthentication: Bool
    /// The request may have reached the vendor and been carried out (e.g. a timeout after it was sent):
    /// a command must not be sent again blindly; its outcome is settled by reading the device's state back.
    public var outcomeUnknown: Bool = false

    /// Builds an error; anything left nil takes the code's default.
    public init(
        _ code: Code, message: String, suggestion: String? = nil, severity: Severity? = nil,
        retryable: Bool? = nil, retryAfter: Duration? = nil, httpStatus: Int? = nil,
        countsAgainstVendor: Bool? = nil, requiresReauthentication: Bool = false
    ) {
        self.code = code
        self.message = message
        self.suggestion = suggestion ?? code.defaultSuggestion
        self.severity = severity ?? code.defaultSeverity
        self.retryable = retryable ?? code.defaultRetryable
        self.retryAfter = retryAfter
        self.httpStatus = httpStatus
        self.countsAgainstVendor = countsAgainstVendor ?? code.defaultCountsAgainstVendor
        self.requiresReauthentication = requiresReauthentication
    }

    public var description: String { "\(code.rawValue): \(message)" }

    /// `{"code","message","severity","suggestion"}` for event and response payloads.
    public var jsonObject: [String: String] {
        ["code": code.rawValue, "message": message, "severity": severity.rawValue, "suggestion": suggestion]
    }

    /// `jsonObject` as compact JSON text with sorted keys.
    public var jsonText: String {
        "{\"code\":\(JSONText.quoted(code.rawValue)),\"message\":\(JSONText.quoted(message)),"
            + "\"severity\":\(JSONText.quoted(severity.rawValue)),\"suggestion\":\(JSONText.quoted(suggestion))}"
    }

    /// The same failure after the one re-login did not help: final, with a credentials hint.
    public func afterReauthentication() -> GatewayError {
        var copy = self
        copy.requiresReauthentication = false
        copy.retryable = false
        copy.message += " (still refused after logging in again)"
        return copy
    }
}

// MARK: - Input validation (used by the MQTT router)

extension GatewayError {
    public static func invalidJSON(_ detail: String) -> GatewayError {
        GatewayError(.invalidJSON, message: "The payload is not valid JSON: \(clip(detail)).")
    }

    public static func invalidUTF8() -> GatewayError {
        GatewayError(.invalidUTF8, message: "The payload is not valid UTF-8 text.")
    }

    /// Valid JSON of the wrong type or shape (`detail` says what was expected).
    public static func invalidPayload(_ detail: String) -> GatewayError {
        GatewayError(.invalidPayload, message: "The payload has the wrong shape: \(clip(detail)).")
    }

    /// A value of the wrong type or word for a key, e.g. `state` = "MAYBE".
    public static func invalidValue(key: String, value: String, expected: String) -> GatewayError {
        GatewayError(
            .invalidPayload, message: "\(clip(key)) cannot be \(clip(value)).",
            suggestion: "Send \(clip(key)) as \(expected)."
        )
    }

    public static func unknownDevice(_ id: String) -> GatewayError {
        GatewayError(.unknownDevice, message: "No device with id '\(clip(id))' is known.")
    }

    /// `accepted` lists the keys the device does accept, for the suggestion.
    public static func unknownKey(_ key: String, device: String, accepted: [String] = []) -> GatewayError {
        GatewayError(
            .unknownKey, message: "Device '\(clip(device))' has no key '\(clip(key))'.",
            suggestion: accepted.isEmpty ? nil : "Keys this device accepts: \(accepted.joined(separator: ", "))."
        )
    }

    public static func readOnlyKey(_ key: String, device: String) -> GatewayError {
        GatewayError(.readOnlyKey, message: "'\(clip(key))' is read-only on device '\(clip(device))'.")
    }

    public static func outOfRange(key: String, value: Double, min: Double?, max: Double?) -> GatewayError {
        let range: String
        switch (min, max) {
        case let (low?, high?): range = "between \(JSONText.number(low)) and \(JSONText.number(high))"
        case let (low?, nil): range = "at least \(JSONText.number(low))"
        case let (nil, high?): range = "at most \(JSONText.number(high))"
        case (nil, nil): range = "a finite number"
        }
        return GatewayError(
            .outOfRange, message: "\(clip(key)) = \(JSONText.number(value)) is out of range.",
            suggestion: "Send \(clip(key)) \(range)."
        )
    }

    public static func payloadTooLarge(bytes: Int, limit: Int) -> GatewayError {
        GatewayError(.payloadTooLarge, message: "The payload has \(bytes) bytes; at most \(limit) are accepted.")
    }

    public static func expired(commandID: String, expiredAt: Date) -> GatewayError {
        GatewayError(
            .expired,
            message: "Command \(clip(commandID)) expired at \(ISOTime.format(expiredAt)) before it could be carried out."
        )
    }

    public static func superseded(commandID: String) -> GatewayError {
        GatewayError(
            .superseded,
            message: "Command \(clip(commandID)) was not carried out: a newer command sets the same keys of the device."
        )
    }

    public static func queueFull(device: String, limit: Int) -> GatewayError {
        GatewayError(.queueFull, message: "Device '\(clip(device))' already has \(limit) commands waiting; this one was not queued.")
    }

    public static func unknownRequest(_ name: String) -> GatewayError {
        GatewayError(.unknownRequest, message: "Unknown bridge request '\(clip(name))'.")
    }
}

// MARK: - Vendor and gateway protection

extension GatewayError {
    public static func vendorUnreachable(vendor: String, detail: String) -> GatewayError {
        GatewayError(.vendorUnreachable, message: "Cannot reach vendor '\(vendor)': \(clip(detail)).")
    }

    public static func vendorTimeout(vendor: String, after: Duration? = nil) -> GatewayError {
        let limit = after.map { " after \(readable($0))" } ?? ""
        return GatewayError(.vendorTimeout, message: "Vendor '\(vendor)' did not answer\(limit).")
    }

    /// The vendor understood and refused (`detail` is its sanitized reason).
    public static func vendorRejected(vendor: String, detail: String) -> GatewayError {
        GatewayError(.vendorRejected, message: "Vendor '\(vendor)' refused the command: \(clip(detail)).")
    }

    public static func breakerOpen(vendor: String, retryIn: Duration?) -> GatewayError {
        let next = retryIn.map { "; next try in \(readable($0))" } ?? "; a test call is already running"
        return GatewayError(
            .breakerOpen, message: "Calls to vendor '\(vendor)' are paused after repeated failures\(next).",
            retryAfter: retryIn
        )
    }

    /// `window` names the exhausted budget ("hour", "day", …).
    public static func quotaExhausted(vendor: String, window: String, resetsIn: Duration?) -> GatewayError {
        let reset = resetsIn.map { "; it resets in \(readable($0))" } ?? ""
        return GatewayError(
            .quotaExhausted, message: "The \(window) request budget of vendor '\(vendor)' is used up\(reset).",
            retryAfter: resetsIn
        )
    }

    public static func interrupted(commandID: String) -> GatewayError {
        GatewayError(
            .interrupted,
            message: "Command \(clip(commandID)) was running when the gateway stopped; whether it took effect is unknown."
        )
    }

    public static func `internal`(_ detail: String) -> GatewayError {
        GatewayError(.internal, message: "Internal gateway error: \(clip(detail)).")
    }
}

// MARK: - Text helpers

extension GatewayError {
    /// Longest user-supplied fragment quoted in a message (topics and ids can be huge).
    public static let maxDetailLength = 200

    /// Shortens user- or vendor-supplied text for messages and drops control characters.
    public static func clip(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            if out.unicodeScalars.count >= maxDetailLength {
                out += "…"
                break
            }
            out.unicodeScalars.append(scalar.value < 0x20 || scalar.value == 0x7F ? " " : scalar)
        }
        return out
    }

    /// "450 ms", "25 s", "3 min", "2 h" for messages.
    public static func readable(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let total = Double(seconds) + Double(attoseconds) / 1e18
        if total < 1 { return "\(Int((total * 1000).rounded())) ms" }
        if total < 120 { return "\(Int(total.rounded())) s" }
        if total < 7200 { return "\(Int((total / 60).rounded())) min" }
        if total < 172_800 { return "\(Int((total / 3600).rounded())) h" }
        return "\(Int((total / 86_400).rounded())) d"
    }
}
