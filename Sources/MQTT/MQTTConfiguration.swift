/// Where the broker is: host, port and whether to use TLS (`mqtt://` or `mqtts://`).
public struct MQTTBrokerAddress: Sendable, Equatable, CustomStringConvertible {
    /// Host name or IP address (IPv6 without brackets).
    public var host: String
    /// TCP port, 1...65535.
    public var port: Int
    /// True for `mqtts://`.
    public var usesTLS: Bool

    /// Creates an address from its parts.
    public init(host: String, port: Int, usesTLS: Bool) {
        self.host = host
        self.port = port
        self.usesTLS = usesTLS
    }

    /// Parses `mqtt://host[:port]` or `mqtts://host[:port]` (defaults 1883 / 8883).
    /// Errors never echo the URL, because a malformed one may carry credentials.
    public static func parse(_ url: String) throws(MQTTError) -> MQTTBrokerAddress {
        func invalid(_ why: String) -> MQTTError { MQTTError(kind: .invalidURL, message: why) }
        guard let schemeEnd = url.firstRange(of: "://") else {
            throw invalid("broker URL must start with mqtt:// or mqtts://")
        }
        let usesTLS: Bool
        switch url[..<schemeEnd.lowerBound].lowercased() {
        case "mqtt", "tcp": usesTLS = false
        case "mqtts", "ssl": usesTLS = true
        default: throw invalid("unsupported broker URL scheme (use mqtt:// or mqtts://)")
        }
        var rest = Substring(url[schemeEnd.upperBound...])
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.contains("@") else {
            throw invalid("broker URL must not contain credentials; set username/password instead")
        }
        guard !rest.contains(where: { $0 == "/" || $0 == "?" || $0 == "#" }) else {
            throw invalid("broker URL must not have a path, query or fragment")
        }
        var host: Substring
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw invalid("unterminated IPv6 address in broker URL") }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw invalid("unexpected text after IPv6 address in broker URL") }
                portText = after.dropFirst()
            }
        } else if let colon = rest.firstIndex(of: ":") {
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        } else {
            host = rest
        }
        guard !host.isEmpty, !host.contains(where: { $0 == " " || $0 == "\t" }) else {
            throw invalid("broker URL has no valid host")
        }
        var port = usesTLS ? 8883 : 1883
        if let portText {
            guard let value = Int(portText), (1...65535).contains(value) else {
                throw invalid("broker URL port must be a number from 1 to 65535")
            }
            port = value
        }
        return MQTTBrokerAddress(host: String(host), port: port, usesTLS: usesTLS)
    }

    public var description: String {
        let shownHost = host.contains(":") ? "[\(host)]" : host
        return "\(usesTLS ? "mqtts" : "mqtt")://\(shownHost):\(port)"
    }
}

/// The MQTT protocol revision spoken to the broker.
public enum MQTTProtocolVersion: Sendable, Equatable {
    /// MQTT 5 (default): properties such as Response Topic and Correlation Data.
    case v5
    /// MQTT 3.1.1: publish properties are ignored.
    case v311
}

/// TLS settings for `mqtts://`; without a CA file the OS CA directory is used.
public struct MQTTTLSOptions: Sendable, Equatable {
    /// The OS CA directory on Debian/Ubuntu (hashed by `update-ca-certificates`).
    public static let defaultCADirectory = "/etc/ssl/certs"

    /// PEM file with the CA certificate(s) that sign the broker's certificate.
    public var caFile: String?
    /// Directory of CA certificates hashed with `openssl rehash` / `c_rehash`. Without `caFile` it defaults to
    /// `defaultCADirectory` (plus OpenSSL's default bundle); set it for other layouts (e.g. `/etc/pki/tls/certs`).
    public var caPath: String?
    /// PEM client certificate for mutual TLS (needs `keyFile`).
    public var certificateFile: String?
    /// PEM private key for `certificateFile`.
    public var keyFile: String?

    /// Creates TLS options; all-nil means "verify against the OS CA store, no client certificate".
    public init(caFile: String? = nil, caPath: String? = nil, certificateFile: String? = nil, keyFile: String? = nil) {
        self.caFile = caFile
        self.caPath = caPath
        self.certificateFile = certificateFile
        self.keyFile = keyFile
    }
}

/// The Last Will the broker publishes when this client vanishes without a clean disconnect.
public struct MQTTWill: Sendable, Equatable {
    /// Will topic, e.g. `<base>/bridge/state`.
    public var topic: String
    /// Will payload, e.g. `{"state":"offline"}`.
    public var payload: [UInt8]
    /// Will QoS.
    public var qos: MQTTQoS
    /// Whether the broker retains the will message.
    public var retain: Bool
    /// MQTT 5 Will Delay Interval: the broker waits this long, and drops the will if the session is resumed
    /// meanwhile (a standby taking over the same client id). nil: published at once.
    public var delay: Duration?

    /// Creates a will with a binary payload.
    public init(topic: String, payload: [UInt8], qos: MQTTQoS = .atLeastOnce, retain: Bool = true) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
    }

    /// Creates a will with a UTF-8 payload.
    public init(topic: String, payload: String, qos: MQTTQoS = .atLeastOnce, retain: Bool = true) {
        self.init(topic: topic, payload: Array(payload.utf8), qos: qos, retain: retain)
    }
}

/// Reconnect back-off bounds: decorrelated jitter between `minDelay` and `maxDelay`, reset after a successful connect.
public struct MQTTReconnectPolicy: Sendable, Equatable {
    /// Smallest delay before a reconnect attempt.
    public var minDelay: Duration
    /// Largest delay before a reconnect attempt.
    public var maxDelay: Duration

    /// Creates a policy; defaults 0.25 s ... 30 s.
    public init(minDelay: Duration = .milliseconds(250), maxDelay: Duration = .seconds(30)) {
        self.minDelay = minDelay
        self.maxDelay = maxDelay
    }
}

/// Everything `MQTTClient` needs to connect; `password` never appears in descriptions.
public struct MQTTConfiguration: Sendable {
    /// Broker host/port/TLS.
    public var broker: MQTTBrokerAddress
    /// MQTT client identifier chosen by the caller (must be unique on the broker).
    public var clientID: String
    /// Protocol revision; MQTT 5 by default.
    public var protocolVersion: MQTTProtocolVersion = .v5
    /// Keepalive interval, 5 s ... 65535 s (libmosquitto 2.0.11 rejects less than 5 s).
    public var keepAlive: Duration = .seconds(30)
    /// Optional user name.
    public var username: String?
    /// Optional password; never logged or described.
    public var password: String?
    /// TLS settings used with `mqtts://` (nil means OS CA store, no client certificate).
    public var tls: MQTTTLSOptions?
    /// Optional Last Will.
    public var will: MQTTWill?
    /// False to resume the broker's session for this client id (its subscriptions and the QoS 1 messages queued
    /// while disconnected); with MQTT 5 the session lasts `sessionExpiry` after a disconnect.
    public var cleanStart = true
    /// MQTT 5 Session Expiry Interval, sent on every CONNECT; nil: the session ends with the connection.
    public var sessionExpiry: Duration?
    /// Reconnect back-off.
    public var reconnect = MQTTReconnectPolicy()
    /// Inbound messages buffered for the consumer; further messages are dropped and counted.
    public var inboundBufferSize = 1024
    /// Topic filters whose inbound messages get a buffer of their own (`MQTTClient.messages`), apart from all
    /// others (`MQTTClient.bulkMessages`); empty: one buffer for everything.
    public var priorityFilters: [String] = []
    /// Outgoing QoS 1/2 messages in flight at once (`MOSQ_OPT_SEND_MAXIMUM`); the broker's Receive Maximum wins if lower.
    public var maxInflight = 64
    /// How long shutdown waits for the DISCONNECT to be written before it stops the network thread anyway.
    public var disconnectTimeout: Duration = .seconds(2)
    /// A connection on which no QoS 1 message is acknowledged for this long while some wait (QoS 0 traffic does not
    /// count) is ended cleanly and made again; libmosquitto then sends what was not acknowledged again. A broker whose
    /// queue to this client is full drops every packet to it, acknowledgements included (mosquitto past its
    /// `max_queued_messages`): without this the in-flight window stays full for good and no QoS 1 message,
    /// reply or state, goes out again.
    public var acknowledgementTimeout: Duration = .seconds(20)
    /// Publishes held while not connected (sent in order after CONNACK). Retained messages are coalesced per
    /// topic; when full, the oldest message is dropped and counted. Non-retained QoS 0 is never held.
    public var offlineQueueLimit = 10_000

    /// Creates a configuration for an already parsed broker address.
    public init(broker: MQTTBrokerAddress, clientID: String) {
        self.broker = broker
        self.clientID = clientID
    }

    /// Creates a configuration from an `mqtt://` / `mqtts://` URL.
    public init(url: String, clientID: String) throws(MQTTError) {
        self.init(broker: try MQTTBrokerAddress.parse(url), clientID: clientID)
    }

    /// Checks ranges and consistency; `MQTTClient.init` calls this.
    public func validate() throws(MQTTError) {
        func invalid(_ why: String) -> MQTTError { MQTTError(kind: .invalidConfiguration, message: why) }
        guard !broker.host.isEmpty, (1...65535).contains(broker.port) else { throw invalid("broker host/port is invalid") }
        guard !clientID.isEmpty, clientID.utf8.count <= 65535 else { throw invalid("client id must be 1...65535 bytes") }
        guard (5...65535).contains(keepAlive.wholeSeconds) else { throw invalid("keepalive must be 5...65535 seconds") }
        guard reconnect.minDelay > .zero, reconnect.maxDelay >= reconnect.minDelay else {
            throw invalid("reconnect delays need 0 < min <= max")
        }
        guard inboundBufferSize >= 1 else { throw invalid("inbound buffer size must be at least 1") }
        guard (1...65535).contains(maxInflight) else { throw invalid("max in-flight must be 1...65535") }
        guard acknowledgementTimeout >= .milliseconds(100) else { throw invalid("the acknowledgement timeout must be at least 100 ms") }
        guard disconnectTimeout >= .zero else { throw invalid("disconnect timeout must not be negative") }
        guard offlineQueueLimit >= 0 else { throw invalid("offline queue limit must not be negative") }
        if password != nil, username == nil { throw invalid("a password needs a username") }
        if let tls {
            guard broker.usesTLS else { throw invalid("TLS options need an mqtts:// broker URL") }
            guard (tls.certificateFile == nil) == (tls.keyFile == nil) else {
                throw invalid("client certificate and key must be given together")
            }
        }
        if let will, will.topic.isEmpty || will.topic.contains(where: { $0 == "+" || $0 == "#" }) {
            throw invalid("will topic must be non-empty and without wildcards")
        }
    }
}

extension MQTTConfiguration: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String {
        var parts = ["broker: \(broker)", "clientID: \(clientID)", "protocol: \(protocolVersion)",
                     "keepAlive: \(keepAlive)"]
        if let username { parts.append("username: \(username)") }
        if password != nil { parts.append("password: <redacted>") }
        if let will { parts.append("will: \(will.topic)") }
        return "MQTTConfiguration(\(parts.joined(separator: ", ")))"
    }

    public var debugDescription: String { description }

    // Keeps `dump()` and reflection from printing the password.
    public var customMirror: Mirror {
        Mirror(self, children: ["description": description])
    }
}

extension Duration {
    /// Whole seconds, rounding toward zero.
    var wholeSeconds: Int64 { components.seconds }

    /// Total nanoseconds, saturating at Int64.max.
    var totalNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        return scaled.addingReportingOverflow(attoseconds / 1_000_000_000).partialValue
    }
}
