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
    }

    /// What went wrong.
    public let kind: Kind
    /// `MOSQ_ERR_*` for `.library`, the MQTT reason code for `.rejected`, otherwise 0.
    public let code: Int32
    /// A human-readable explanation.
    public let message: String

    /// Creates an error; prefer the static factories.
    public init(kind: Kind, code: Int32 = 0, message: String) {
        self.kind = kind
        self.code = code
        self.message = message
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

extension Int32 {
    static let mosqSuccess = Int32(MOSQ_ERR_SUCCESS.rawValue)
    static let mosqNoConnection = Int32(MOSQ_ERR_NO_CONN.rawValue)
    static let mosqInvalid = Int32(MOSQ_ERR_INVAL.rawValue)
    static let mosqNotSupported = Int32(MOSQ_ERR_NOT_SUPPORTED.rawValue)
}
