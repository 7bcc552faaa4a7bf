import GatewayModel

/// One feature of the gateway. The hub owns the registry, states, availability and vendor health;
/// an extension reacts to the hub's events, keeps its own state, and may take MQTT messages and
/// bridge requests. A feature is on when its extension is in the list, not through branches in the core.
@GatewayActor
protocol GatewayExtension: AnyObject {
    /// Topic filters to subscribe to on every (re)connect.
    var subscriptions: [String] { get }
    /// Bridge request names (`<base>/bridge/request/<name>`) this extension answers.
    var requestNames: [String] { get }

    func handle(_ event: HubEvent)
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
    var subscriptions: [String] { [] }
    var requestNames: [String] { [] }
    func handle(_ event: HubEvent) {}
    func receive(_ route: Topics.Inbound, _ message: InboundMessage) -> Bool { false }
    func request(_ name: String, body: [String: JSONValue], reply: Reply, context: JSON) {}
    func report(into report: inout BridgeReport) {}
    func shutdown() async {}
}

/// The parts of `health` and `bridge/info` that extensions fill in.
struct BridgeReport {
    /// `{"state":"none"}` unless a cache is configured.
    var storage: JSON = ["state": "none"]
    var dropped: [String: JSON] = [:]
    var queues: [String: JSON] = [:]
}

/// Where to answer a command or request: the v5 response topic, and/or a bridge response.
struct Reply: Sendable {
    var responseTopic: String?
    var correlationData: [UInt8]?
    var bridgeResponse: String?
    var transaction: JSON?
}
