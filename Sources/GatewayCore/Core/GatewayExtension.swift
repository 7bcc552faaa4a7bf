import GatewayModel

/// One feature of the gateway. The hub owns the registry, states, availability and vendor health;
/// an extension reacts to the hub's events, keeps its own state, and may take MQTT messages and
/// bridge requests. A feature is on when its extension is in the list, not through branches in the core.
@GatewayActor
package protocol GatewayExtension: AnyObject {
    /// Topic filters to subscribe to on every (re)connect.
    var subscriptions: [String] { get }
    /// Bridge request names (`<base>/bridge/request/<name>`) this extension answers.
    var requestNames: [String] { get }

    func handle(_ event: HubEvent)
    /// True when this extension must finish something (`holdConnect`) after a connect's subscriptions and before
    /// its announcements (`HubEvent.connected`) go out.
    var holdsConnect: Bool { get }
    /// Returns when the announcements may go out (bounded: it never waits on the broker without a timeout).
    func holdConnect() async
    /// An MQTT message on one of the gateway's topics; true when this extension took it.
    func receive(_ route: Topics.Inbound, _ message: InboundMessage) -> Bool
    /// A bridge request whose envelope (size, JSON, `transaction`) was checked.
    func request(_ name: String, body: [String: JSONValue], reply: Reply, context: JSON)
    /// What this extension adds to `health` and `bridge/info`.
    func report(into report: inout BridgeReport)
    /// Called at shutdown, after vendors stopped: hand over what is pending.
    func shutdown() async
}

extension GatewayExtension {
    package var subscriptions: [String] { [] }
    package var requestNames: [String] { [] }
    package func handle(_ event: HubEvent) {}
    package var holdsConnect: Bool { false }
    package func holdConnect() async {}
    package func receive(_ route: Topics.Inbound, _ message: InboundMessage) -> Bool { false }
    package func request(_ name: String, body: [String: JSONValue], reply: Reply, context: JSON) {}
    package func report(into report: inout BridgeReport) {}
    package func shutdown() async {}
}

/// The parts of `health` and `bridge/info` that extensions fill in.
package struct BridgeReport {
    /// `{"state":"none"}` unless a cache is configured.
    package var storage: JSON = ["state": "none"]
    package var dropped: [String: JSON] = [:]
    package var queues: [String: JSON] = [:]
    /// Running totals an extension owns (`commands_executed`, `states_published`), for `bridge/health` and metrics.
    package var counters: [String: Int] = [:]

    package init() {}
}

/// Where to answer a command or request: the v5 response topic, and/or a bridge response.
package struct Reply: Sendable {
    package var responseTopic: String?
    package var correlationData: [UInt8]?
    package var bridgeResponse: String?
    package var transaction: JSON?

    package init(responseTopic: String? = nil, correlationData: [UInt8]? = nil, bridgeResponse: String? = nil, transaction: JSON? = nil) {
        self.responseTopic = responseTopic
        self.correlationData = correlationData
        self.bridgeResponse = bridgeResponse
        self.transaction = transaction
    }
}
