/// MQTT quality of service.
public enum MQTTQoS: Int32, Sendable, Equatable, Comparable, CaseIterable {
    /// Fire and forget (QoS 0).
    case atMostOnce = 0
    /// Acknowledged by PUBACK (QoS 1).
    case atLeastOnce = 1
    /// Exactly once (QoS 2).
    case exactlyOnce = 2

    public static func < (lhs: MQTTQoS, rhs: MQTTQoS) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// An inbound message, copied out of libmosquitto's callback.
public struct MQTTMessage: Sendable, Equatable {
    /// Topic the message was published on.
    public var topic: String
    /// Raw payload bytes.
    public var payload: [UInt8]
    /// Delivered QoS.
    public var qos: MQTTQoS
    /// True when the broker delivered a retained message.
    public var retain: Bool
    /// MQTT 5 Response Topic property, if any.
    public var responseTopic: String?
    /// MQTT 5 Correlation Data property, if any.
    public var correlationData: [UInt8]?

    /// Creates a message value.
    public init(topic: String, payload: [UInt8], qos: MQTTQoS = .atMostOnce, retain: Bool = false,
                responseTopic: String? = nil, correlationData: [UInt8]? = nil) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.responseTopic = responseTopic
        self.correlationData = correlationData
    }

    /// The payload decoded as UTF-8 (invalid bytes repaired).
    public var payloadString: String { String(decoding: payload, as: UTF8.self) }
}

/// MQTT 5 publish properties; ignored when the client speaks MQTT 3.1.1.
public struct MQTTPublishProperties: Sendable, Equatable {
    /// Response Topic for request/response.
    public var responseTopic: String?
    /// Correlation Data echoed back in responses.
    public var correlationData: [UInt8]?
    /// Message Expiry Interval in seconds.
    public var messageExpiryInterval: UInt32?

    /// Creates properties; all nil means "none".
    public init(responseTopic: String? = nil, correlationData: [UInt8]? = nil, messageExpiryInterval: UInt32? = nil) {
        self.responseTopic = responseTopic
        self.correlationData = correlationData
        self.messageExpiryInterval = messageExpiryInterval
    }

    /// True when no property is set (the fast path: no property list is built).
    public var isEmpty: Bool { responseTopic == nil && correlationData == nil && messageExpiryInterval == nil }
}

/// What `publish` did with a message.
public enum MQTTPublishResult: Sendable, Equatable {
    /// Handed to libmosquitto while connected; the network thread sends it.
    case sent
    /// QoS 1/2 while disconnected: libmosquitto keeps it and sends it after reconnect (do not publish it again).
    case queued
    /// QoS 0 while disconnected: libmosquitto dropped it.
    case droppedNotConnected
    /// Rejected before queueing (bad topic, payload too large, client shut down, ...).
    case failed(MQTTError)

    /// True for `.sent` and `.queued`.
    public var isAccepted: Bool {
        switch self {
        case .sent, .queued: true
        case .droppedNotConnected, .failed: false
        }
    }
}

/// Connection state changes, delivered in order on `MQTTClient.connectionEvents`.
public enum MQTTConnectionEvent: Sendable, Equatable {
    /// CONNACK accepted. Sent on every (re)connect: subscribe and re-publish retained state now.
    case connected
    /// An established connection ended (code 0 = our own clean disconnect).
    case disconnected(MQTTError)
    /// A connect attempt failed (broker down, refused, TLS, ...); the next one follows after `retryIn`.
    case connectFailed(MQTTError, retryIn: Duration)
}
