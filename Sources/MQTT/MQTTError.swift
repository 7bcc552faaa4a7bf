import CMosquitto

/// A failure of the MQTT wrapper: a kind, the libmosquitto/MQTT code and a readable message (never secrets).
public struct MQTTError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, independent of the numeric code.
    public enum Kind: Sendable, Equatable {
        /// The broker URL could not be parsed.
        case invalidURL
        /// A configuration value is out of range or inconsistent.
        case invalidConfiguration
        /// A libmosquitto call failed; `code` is a `MOSQ_ERR_*` value.
        case library
        /// The broker refused or rejected something; `code` is an MQTT reason code.
        case rejected
        /// The operation needs a connection and there is none.
        case notConnected
        /// A bounded wait ran out.
        case timeout
        /// The client was shut down.
        case shutDown
        /// The TLS handshake failed; `tlsFailure` says why (unknown CA, host name mismatch, expired, ...).
        case tls
        /// A message waiting in the offline queue was dropped (queue full) or replaced by a newer retained value.
        case dropped
    }

    /// What went wrong.
    public let kind: Kind
    /// `MOSQ_ERR_*` for `.library`, the MQTT reason code for `.rejected`, otherwise 0.
    public let code: Int32
    /// A human-readable explanation.
    public let message: String
    /// For `.tls`: what the handshake found wrong.
    public let tlsFailure: MQTTTLSFailure?

    /// Creates an error; prefer the static factories.
    public init(kind: Kind, code: Int32 = 0, message: String, tlsFailure: MQTTTLSFailure? = nil) {
        self.kind = kind
        self.code = code
        self.message = message
        self.tlsFailure = tlsFailure
    }

    public var description: String {
        code == 0 ? "MQTT \(kind): \(message)" : "MQTT \(kind) (\(code)): \(message)"
    }

    /// A libmosquitto return code turned into an error, with `mosquitto_strerror` text.
    static func library(_ rc: Int32, _ context: String) -> MQTTError {
        MQTTError(kind: .library, code: rc, message: "\(context): \(libraryMessage(rc))")
    }

    /// An MQTT reason code (CONNACK/PUBACK/SUBACK/DISCONNECT) turned into an error.
    static func rejected(_ reason: Int32, _ context: String) -> MQTTError {
        MQTTError(kind: .rejected, code: reason, message: "\(context): \(reasonMessage(reason))")
    }

    static func libraryMessage(_ rc: Int32) -> String {
        guard let text = mosquitto_strerror(rc) else { return "error \(rc)" }
        return String(cString: text)
    }

    static func reasonMessage(_ reason: Int32) -> String {
        guard let text = mosquitto_reason_string(reason) else { return "reason \(reason)" }
        return String(cString: text)
    }
}

/// Why a TLS connection to the broker failed, as far as OpenSSL told libmosquitto.
public enum MQTTTLSFailure: Sendable, Equatable {
    /// The broker's certificate is not signed by a trusted CA (`ca_file` / `ca_path` / the OS store).
    case unknownCA
    /// The certificate is valid but not for the host name or address in the broker URL.
    case hostnameMismatch
    /// The broker's certificate (or one in its chain) has expired.
    case expiredCertificate
    /// The broker's certificate is not valid yet (check the clock).
    case certificateNotYetValid
    /// The CA file or directory could not be loaded.
    case caUnreadable
    /// Another certificate problem; OpenSSL's text.
    case verificationFailed(String)
    /// Another handshake failure (e.g. the port does not speak TLS); OpenSSL's text.
    case handshakeFailed(String)

    /// One line for logs and events: what failed and what to check.
    public var reason: String {
        switch self {
        case .unknownCA:
            "unknown CA: the broker's certificate is not signed by a trusted CA (set mqtt.ca_file, or mqtt.ca_path to a hashed CA directory)"
        case .hostnameMismatch:
            "host name mismatch: the broker's certificate is not valid for the host in mqtt.url"
        case .expiredCertificate: "expired certificate: the broker's certificate has expired"
        case .certificateNotYetValid: "certificate not yet valid: check the clock of this host"
        case .caUnreadable: "the CA file or directory could not be loaded (check mqtt.ca_file / mqtt.ca_path)"
        case .verificationFailed(let text): "certificate verification failed: \(text)"
        case .handshakeFailed(let text): "TLS handshake failed: \(text)"
        }
    }
}

extension Int32 {
    static let mosqSuccess = Int32(MOSQ_ERR_SUCCESS.rawValue)
    static let mosqNoConnection = Int32(MOSQ_ERR_NO_CONN.rawValue)
    static let mosqInvalid = Int32(MOSQ_ERR_INVAL.rawValue)
    static let mosqNotSupported = Int32(MOSQ_ERR_NOT_SUPPORTED.rawValue)
    static let mosqTLS = Int32(MOSQ_ERR_TLS.rawValue)
}
