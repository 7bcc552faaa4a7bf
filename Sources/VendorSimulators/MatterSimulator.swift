import FlyingFox
import Foundation
import SimulatorKit
import Synchronization

/// A Matter controller on loopback, speaking python-matter-server's WebSocket API (`/ws`, schema 11): the
/// first frame `server_info`; requests `{message_id, command, args}` answered `{message_id, result}` or
/// `{message_id, error_code, details}`; `start_listening` (every node, then events), `get_nodes`, `get_node`,
/// `device_command`, `write_attribute`, `read_attribute`, `ping_node`. Commands change the node's attributes
/// as a device would and the change comes back as `attribute_updated`, as from a real node; locks and EV chargers
/// (Energy EVSE EnableCharging/Disable) refuse a command without `timed_request_timeout_ms`, as the SDK does. Controls for tests: nodes added, removed,
/// made unavailable, attributes changed, button presses, `server_shutdown`, dropped connections, a schema the
/// gateway does not speak, and commands left unanswered.
public final class MatterSimulator: Sendable {
    struct Node: Sendable {
        var id: UInt64
        var available: Bool
        var isBridge: Bool
        /// Each attribute's value as JSON text.
        var attributes: [String: String]

        func json() -> String {
            let list = attributes.sorted { $0.key < $1.key }.map { #""\#($0.key)":\#($0.value)"# }.joined(separator: ",")
            return #"{"node_id":\#(id),"date_commissioned":"2025-01-01T00:00:00","last_interview":"2025-01-01T00:00:00","interview_version":6,"available":\#(available),"is_bridge":\#(isBridge),"attributes":{\#(list)},"attribute_subscriptions":[]}"#
        }
    }

    private struct State {
        var nodes: [UInt64: Node] = [:]
        /// Open connections and whether they called `start_listening`.
        var clients: [UUID: (continuation: AsyncStream<WSMessage>.Continuation, listening: Bool)] = [:]
        var commands: [String] = []
        var connections = 0
        var unanswered = false
        var schema = (version: 11, minimum: 9)
        /// Nodes whose fan takes writes but never moves (PercentCurrent and FanMode stay), like a test node of the
        /// real server.
        var stuckFans: Set<UInt64> = []
    }

    private let server: SimServer
    private let state = Mutex(State())

    /// `nodes`: node dumps as python-matter-server serves them (Home Assistant's fixture files).
    public init(nodes: [Data], port: UInt16 = 0) throws {
        server = SimServer(port: port)
        for data in nodes { try add(data, announce: false) }
    }

    @discardableResult
    public func start() async throws(SimulatorError) -> UInt16 {
        try await server.start { [self] request in await handle(request) }
    }

    public func stop() async {
        dropConnections()
        await server.stop()
    }

    public var url: String { get async { await server.baseURL.replacingOccurrences(of: "http://", with: "ws://") + "/ws" } }

    // MARK: Test controls

    /// Every `device_command` / `write_attribute` received, as `<command> <node>/<endpoint>/<cluster> <name or attribute>`.
    public var commands: [String] { state.withLock { $0.commands } }
    public var connections: Int { state.withLock { $0.connections } }
    public var nodeIDs: [UInt64] { state.withLock { $0.nodes.keys.sorted() } }

    /// The server answers `schema_version` / `min_supported_schema_version` with these.
    public func setSchema(version: Int, minimum: Int) { state.withLock { $0.schema = (version, minimum) } }

    /// Commands are received but never answered (a node that does not respond).
    public func leaveCommandsUnanswered(_ on: Bool = true) { state.withLock { $0.unanswered = on } }

    /// The node's fan accepts FanControl writes but does not move: only the written attribute changes.
    public func setFanStuck(node id: UInt64, _ stuck: Bool = true) {
        state.withLock { if stuck { $0.stuckFans.insert(id) } else { $0.stuckFans.remove(id) } }
    }

    /// A node dump joins (`node_added`).
    public func add(_ data: Data, announce: Bool = true) throws {
        guard let object = try JSONSerialization.jsonObject(with: data) as? [String: Any], let id = (object["node_id"] as? NSNumber)?.uint64Value,
              let attributes = object["attributes"] as? [String: Any] else {
            throw SimulatorError(code: "sim.invalid_fixture", message: "not a Matter node dump")
        }
        var texts: [String: String] = [:]
        for (path, value) in attributes {
            if let data = try? JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed]), let text = String(data: data, encoding: .utf8) {
                texts[path] = text
            }
        }
        let node = Node(id: id, available: object["available"] as? Bool ?? true, isBridge: object["is_bridge"] as? Bool ?? false, attributes: texts)
        state.withLock { $0.nodes[id] = node }
        if announce { broadcast(#"{"event":"node_added","data":\#(node.json())}"#) }
    }

    public func remove(node id: UInt64) {
        state.withLock { _ = $0.nodes.removeValue(forKey: id) }
        broadcast(#"{"event":"node_removed","data":\#(id)}"#)
    }

    /// The node goes offline or comes back (`node_updated` with the whole node).
    public func setAvailable(node id: UInt64, _ available: Bool) {
        let json = state.withLock { state -> String? in
            state.nodes[id]?.available = available
            return state.nodes[id]?.json()
        }
        if let json { broadcast(#"{"event":"node_updated","data":\#(json)}"#) }
    }

    /// A node reports a new value (`attribute_updated`); `json` is the value as JSON text.
    public func report(node id: UInt64, path: String, json: String) {
        state.withLock { $0.nodes[id]?.attributes[path] = json }
        broadcast(#"{"event":"attribute_updated","data":[\#(id),"\#(path)",\#(json)]}"#)
    }

    /// The value the node holds at `path`, as JSON text.
    public func attribute(node id: UInt64, path: String) -> String? { state.withLock { $0.nodes[id]?.attributes[path] } }

    /// A Generic Switch event (cluster 59), e.g. 1 InitialPress with `{"newPosition":1}`.
    public func switchEvent(node id: UInt64, endpoint: Int, event: Int, data: String) {
        broadcast(#"{"event":"node_event","data":{"node_id":\#(id),"endpoint_id":\#(endpoint),"cluster_id":59,"event_id":\#(event),"event_number":1,"priority":1,"timestamp":1700000000000,"timestamp_type":1,"data":\#(data)}}"#)
    }

    /// `server_shutdown` to every client, then their connections close.
    public func shutdown() {
        broadcast(#"{"event":"server_shutdown","data":null}"#)
        dropConnections()
    }

    public func dropConnections() {
        let clients = state.withLock { state in
            defer { state.clients = [:] }
            return Array(state.clients.values)
        }
        for client in clients {
            client.continuation.yield(.close(.goingAway))
            client.continuation.finish()
        }
    }

    private func broadcast(_ text: String) {
        let listeners = state.withLock { $0.clients.values.filter(\.listening).map(\.continuation) }
        for listener in listeners { listener.yield(.text(text)) }
    }

    // MARK: Protocol

    private func handle(_ request: FlyingFox.HTTPRequest) async -> FlyingFox.HTTPResponse {
        guard request.path == "/ws" else { return SimResponse.text("Not found", status: .notFound) }
        return (try? await WebSocketHTTPHandler(handler: MessageFrameWSHandler(handler: Connection(simulator: self))).handleRequest(request))
            ?? SimResponse.text("", status: .badRequest)
    }

    private struct Connection: WSMessageHandler {
        let simulator: MatterSimulator

        func makeMessages(for client: AsyncStream<WSMessage>) async throws -> AsyncStream<WSMessage> {
            let simulator = self.simulator
            let id = UUID()
            let (outgoing, continuation) = AsyncStream<WSMessage>.makeStream()
            let schema = simulator.state.withLock { state in
                state.clients[id] = (continuation, false)
                state.connections += 1
                return state.schema
            }
            continuation.yield(.text(#"{"fabric_id":1,"compressed_fabric_id":1234567890123456789,"schema_version":\#(schema.version),"min_supported_schema_version":\#(schema.minimum),"sdk_version":"2025.7.0","wifi_credentials_set":false,"thread_credentials_set":false,"bluetooth_enabled":false}"#))
            let reader = Task {
                for await message in client {
                    guard case .text(let text) = message else { continue }
                    if let answer = simulator.answer(text, client: id) { continuation.yield(.text(answer)) }
                }
                simulator.state.withLock { _ = $0.clients.removeValue(forKey: id) }
                continuation.finish()
            }
            continuation.onTermination = { _ in reader.cancel() }
            return outgoing
        }
    }

    /// The answer to one request (nil: none, as for a command left unanswered).
    func answer(_ text: String, client: UUID) -> String? {
        guard let message = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] else { return nil }
        // The real server closes the connection on a non-string message_id; here it is refused loudly.
        guard let id = message["message_id"] as? String else { return #"{"message_id":"?","error_code":0,"details":"message_id must be a string"}"# }
        let args = message["args"] as? [String: Any] ?? [:]
        func error(_ code: Int, _ details: String) -> String { #"{"message_id":"\#(id)","error_code":\#(code),"details":"\#(details)"}"# }
        func result(_ json: String) -> String { #"{"message_id":"\#(id)","result":\#(json)}"# }
        let nodeID = (args["node_id"] as? NSNumber)?.uint64Value
        switch message["command"] as? String {
        case "start_listening":
            let list = state.withLock { state -> String in
                state.clients[client]?.listening = true
                return state.nodes.values.sorted { $0.id < $1.id }.map { $0.json() }.joined(separator: ",")
            }
            return result("[\(list)]")
        case "get_nodes":
            return result("[" + state.withLock { $0.nodes.values.sorted { $0.id < $1.id }.map { $0.json() } }.joined(separator: ",") + "]")
        case "get_node":
            guard let nodeID, let node = state.withLock({ $0.nodes[nodeID] }) else { return error(5, "Node \(nodeID ?? 0) does not exist or is not yet interviewed") }
            return result(node.json())
        case "server_info":
            let schema = state.withLock { $0.schema }
            return result(#"{"fabric_id":1,"compressed_fabric_id":1234567890123456789,"schema_version":\#(schema.version),"min_supported_schema_version":\#(schema.minimum),"sdk_version":"2025.7.0","wifi_credentials_set":false,"thread_credentials_set":false,"bluetooth_enabled":false}"#)
        case "ping_node":
            return result(#"{"0.0.0.0":true}"#)
        case "read_attribute":
            guard let nodeID, let path = args["attribute_path"] as? String, let node = state.withLock({ $0.nodes[nodeID] }) else { return error(8, "Missing arguments") }
            return result(#"{"\#(path)":\#(node.attributes[path] ?? "null")}"#)
        case "device_command", "write_attribute":
            guard let nodeID else { return error(8, "Missing node_id") }
            let (node, unanswered) = state.withLock { ($0.nodes[nodeID], $0.unanswered) }
            guard let node else { return error(5, "Node \(nodeID) does not exist or is not yet interviewed") }
            guard node.available else { return error(3, "Node \(nodeID) is not (yet) available.") }
            let outcome = message["command"] as? String == "device_command" ? command(nodeID, args) : write(nodeID, args)
            if unanswered { return nil }
            switch outcome {
            case .failure(let failure): return error(failure.code, failure.details)
            case .success(let changes):
                for (path, json) in changes { report(node: nodeID, path: path, json: json) }
                return result("null")
            }
        default:
            return error(9, "Invalid command: \(message["command"] as? String ?? "?")")
        }
    }

    struct Failure: Error {
        var code: Int
        var details: String
    }

    /// What a device does with a command: the attributes that change (path → JSON).
    private func command(_ node: UInt64, _ args: [String: Any]) -> Result<[(String, String)], Failure> {
        guard let endpoint = (args["endpoint_id"] as? NSNumber)?.intValue, let cluster = (args["cluster_id"] as? NSNumber)?.intValue,
              let name = args["command_name"] as? String else { return .failure(Failure(code: 8, details: "Missing arguments")) }
        let payload = args["payload"] as? [String: Any] ?? [:]
        state.withLock { $0.commands.append("device_command \(node)/\(endpoint)/\(cluster) \(name)") }
        func current(_ attribute: Int) -> String? { self.attribute(node: node, path: "\(endpoint)/\(cluster)/\(attribute)") }
        guard current(65533) != nil || state.withLock({ $0.nodes[node]?.attributes.keys.contains { $0.hasPrefix("\(endpoint)/\(cluster)/") } ?? false }) else {
            return .failure(Failure(code: 0, details: "Cluster \(cluster) does not exist on endpoint \(endpoint)"))
        }
        let path = { (attribute: Int) in "\(endpoint)/\(cluster)/\(attribute)" }
        switch (cluster, name) {
        case (6, "On"): return .success([(path(0), "true")])
        case (6, "Off"): return .success([(path(0), "false")])
        case (6, "Toggle"): return .success([(path(0), current(0) == "true" ? "false" : "true")])
        case (8, "MoveToLevelWithOnOff"), (8, "MoveToLevel"):
            guard let level = (payload["level"] as? NSNumber)?.intValue, (0...254).contains(level) else { return .failure(Failure(code: 0, details: "level")) }
            var changes = [(path(0), String(level))]
            if name == "MoveToLevelWithOnOff" { changes.append(("\(endpoint)/6/0", level > 0 ? "true" : "false")) }
            return .success(changes)
        case (768, "MoveToColorTemperature"):
            guard let mireds = (payload["colorTemperatureMireds"] as? NSNumber)?.intValue else { return .failure(Failure(code: 0, details: "colorTemperatureMireds")) }
            return .success([(path(7), String(mireds)), (path(8), "2")])
        case (768, "MoveToHueAndSaturation"):
            guard let hue = (payload["hue"] as? NSNumber)?.intValue, let saturation = (payload["saturation"] as? NSNumber)?.intValue,
                  (0...254).contains(hue), (0...254).contains(saturation) else { return .failure(Failure(code: 0, details: "hue/saturation")) }
            return .success([(path(0), String(hue)), (path(1), String(saturation)), (path(8), "0")])
        case (768, "MoveToColor"):
            guard let x = (payload["colorX"] as? NSNumber)?.intValue, let y = (payload["colorY"] as? NSNumber)?.intValue else {
                return .failure(Failure(code: 0, details: "colorX/colorY"))
            }
            return .success([(path(3), String(x)), (path(4), String(y)), (path(8), "1")])
        case (257, "LockDoor"), (257, "UnlockDoor"):
            guard args["timed_request_timeout_ms"] is NSNumber else {
                return .failure(Failure(code: 0, details: "InteractionModelError: NeedsTimedInteraction (0xc6)"))
            }
            return .success([(path(0), name == "LockDoor" ? "1" : "2")])
        case (153, "EnableCharging"), (153, "Disable"):
            // Energy EVSE: timed invokes only; EnableCharging within the EVSE's limits. A car that wants energy
            // starts charging once enabled and stops (still wanting) when disabled.
            guard args["timed_request_timeout_ms"] is NSNumber else {
                return .failure(Failure(code: 0, details: "InteractionModelError: NeedsTimedInteraction (0xc6)"))
            }
            let state = current(0).flatMap { Int($0) }
            if name == "Disable" { return .success([(path(1), "0")] + (state == 3 ? [(path(0), "2")] : [])) }
            guard let minimum = (payload["minimumChargeCurrent"] as? NSNumber)?.intValue, let maximum = (payload["maximumChargeCurrent"] as? NSNumber)?.intValue,
                  minimum >= 0, minimum <= maximum, payload["chargingEnabledUntil"] is NSNull || (payload["chargingEnabledUntil"] as? NSNumber) != nil else {
                return .failure(Failure(code: 0, details: "InteractionModelError: ConstraintError (0x87)"))
            }
            // MaximumChargeCurrent becomes the lesser of the command's, CircuitCapacity and UserMaximumChargeCurrent.
            let caps = [current(5), current(9)].compactMap { $0.flatMap { Int($0) } }.filter { $0 > 0 }
            let offered = ([maximum] + caps).min() ?? maximum
            return .success([(path(1), "1"), (path(6), String(minimum)), (path(7), String(offered))] + (state == 2 ? [(path(0), "3")] : []))
        case (258, "UpOrOpen"): return .success([(path(14), "0"), (path(10), "0")])
        case (258, "DownOrClose"): return .success([(path(14), "10000"), (path(10), "0")])
        case (258, "StopMotion"): return .success([])
        case (258, "GoToLiftPercentage"):
            guard let value = (payload["liftPercent100thsValue"] as? NSNumber)?.intValue, (0...10000).contains(value) else {
                return .failure(Failure(code: 0, details: "liftPercent100thsValue"))
            }
            return .success([(path(14), String(value))])
        default:
            return .failure(Failure(code: 0, details: "Command \(name) is not supported on cluster \(cluster) by this device"))
        }
    }

    private func write(_ node: UInt64, _ args: [String: Any]) -> Result<[(String, String)], Failure> {
        guard let path = args["attribute_path"] as? String, path.split(separator: "/").count == 3, let value = args["value"],
              let data = try? JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed]), let json = String(data: data, encoding: .utf8) else {
            return .failure(Failure(code: 8, details: "attribute_path and value are required"))
        }
        state.withLock { $0.commands.append("write_attribute \(node)/\(path) \(json)") }
        guard attribute(node: node, path: path) != nil else { return .failure(Failure(code: 0, details: "UnsupportedAttribute \(path)")) }
        let parts = path.split(separator: "/").map(String.init)
        guard parts[1] == "514", !state.withLock({ $0.stuckFans.contains(node) }), let number = Int(json) else { return .success([(path, json)]) }
        // A fan (FanControl): the motor follows PercentSetting, FanMode follows the speed and sets it.
        let base = "\(parts[0])/514/"
        switch parts[2] {
        case "2":
            let mode = number == 0 ? 0 : number <= 33 ? 1 : number <= 66 ? 2 : 3
            return .success([(path, json), (base + "3", json), (base + "0", String(mode))])
        case "0":
            // Off, Low, Medium, High; On is High; Auto keeps the speed.
            let speeds = [0: 0, 1: 33, 2: 66, 3: 100, 4: 100]
            guard let speed = speeds[number] else { return .success([(path, json)]) }
            return .success([(path, String(number == 4 ? 3 : number)), (base + "2", String(speed)), (base + "3", String(speed))])
        default:
            return .success([(path, json)])
        }
    }
}
