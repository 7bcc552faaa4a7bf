/// A received MQTT message, as the controller needs it.
public struct InboundMessage: Sendable, Hashable {
    public var topic: String
    public var payload: [UInt8]
    /// Set when the broker delivered a stored (retained) message, e.g. at subscribe time.
    public var retain: Bool
    /// MQTT v5 request/response properties.
    public var responseTopic: String?
    public var correlationData: [UInt8]?

    public init(topic: String, payload: [UInt8], retain: Bool = false, responseTopic: String? = nil, correlationData: [UInt8]? = nil) {
        self.topic = topic
        self.payload = payload
        self.retain = retain
        self.responseTopic = responseTopic
        self.correlationData = correlationData
    }
}

/// What the controller needs from an MQTT connection. `MQTTTransport` implements it over
/// libmosquitto; unit tests use a recording one.
public protocol MessageTransport: Sendable {
    /// Queues a message; never blocks. QoS 0 messages may be dropped while disconnected.
    func publish(_ topic: String, _ payload: String, qos: Int, retain: Bool, correlationData: [UInt8]?)
    /// The same with a UTF-8 payload in bytes: the state publisher renders every state into one reused buffer,
    /// which the connection copies into its packet, so no `String` is made per state.
    func publish(_ topic: String, utf8 payload: [UInt8], qos: Int, retain: Bool)
    /// Publishes at QoS 1 and waits (bounded) for the broker's acknowledgement.
    func publishAndWait(_ topic: String, _ payload: String, retain: Bool, timeout: Duration) async -> Bool
    func subscribe(_ filters: [String])
    /// Subscribes and waits (bounded) for the broker's SUBACK: retained messages on the filters follow it.
    /// False when it was not acknowledged in time.
    func subscribeAndWait(_ filters: [String], timeout: Duration) async -> Bool
    func unsubscribe(_ filters: [String])
    /// What the connection had to drop (reported in `health` and `bridge/info`).
    var stats: TransportStats { get }
    /// Messages handed to the connection and not yet written to the socket. Telemetry holds back
    /// (coalescing per device) while this is high, so commands and replies never queue behind it.
    var outgoingBacklog: Int { get }
    /// QoS 1 messages handed to the connection so far, counted, and how many of the first of them the broker has all
    /// acknowledged (`MQTTClient.acknowledgementMarks`). A message can only overtake an earlier one while that one
    /// is unacknowledged: QoS 0 goes out at once, QoS 1 waits its turn in the in-flight window.
    var acknowledgementMarks: (handedOver: UInt64, acknowledged: UInt64) { get }
    /// True between CONNACK (after the offline queue went out) and the connection's loss.
    var isConnected: Bool { get }
    /// A message published on a topic the connection subscribes to comes back to it (a broker does; a recording
    /// transport does not). Only then can a fence message mark the end of what the broker retains.
    var loopsBack: Bool { get }
    /// Runs `body`, whose publishes may leave together (as few TCP segments) when it ends: for a batch published at
    /// once. Nothing is delayed beyond `body`'s end.
    func coalescingWrites(_ body: () -> Void)
}

/// Drop counters of a transport.
public struct TransportStats: Sendable, Equatable {
    /// Inbound messages dropped because the gateway fell behind.
    public var droppedInbound = 0
    /// Publishes dropped while the broker could not be reached.
    public var droppedOffline = 0

    public init(droppedInbound: Int = 0, droppedOffline: Int = 0) {
        self.droppedInbound = droppedInbound
        self.droppedOffline = droppedOffline
    }
}

extension MessageTransport {
    /// A transport that takes only text (a recording one in unit tests) gets the payload as a `String`.
    public func publish(_ topic: String, utf8 payload: [UInt8], qos: Int, retain: Bool) {
        publish(topic, String(decoding: payload, as: UTF8.self), qos: qos, retain: retain, correlationData: nil)
    }
    public func unsubscribe(_ filters: [String]) {}
    /// A transport without acknowledgements (a recording one in unit tests) only subscribes.
    public func subscribeAndWait(_ filters: [String], timeout: Duration) async -> Bool {
        subscribe(filters)
        return true
    }
    public var stats: TransportStats { TransportStats() }
    public var outgoingBacklog: Int { 0 }
    /// Without acknowledgements, nothing a transport took can be overtaken.
    public var acknowledgementMarks: (handedOver: UInt64, acknowledged: UInt64) { (0, 0) }
    public var isConnected: Bool { true }
    public var loopsBack: Bool { false }
    public func coalescingWrites(_ body: () -> Void) { body() }

    package func publish(_ topic: String, _ payload: String, qos: Int = 0, retain: Bool = false) {
        publish(topic, payload, qos: qos, retain: retain, correlationData: nil)
    }
}
