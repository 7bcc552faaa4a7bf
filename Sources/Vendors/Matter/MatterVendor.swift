#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import Logging
import Resilience
import Synchronization
import VendorKit
import WSClient

/// Matter devices through a Matter controller's WebSocket API (python-matter-server; matterjs-server).
/// - Connect: the server's `server_info` first (its schema must fit ours), then `start_listening` gives every
///   node and starts the events; each reconnect is a full resync (the inventory replaces what was there).
/// - Devices: one per node `<id>_<node_id>`, one per bridged endpoint `<id>_<node_id>_<endpoint>` (via the
///   bridge); attributes → keys in `MatterMapping`; `attribute_updated` changes the state, `node_updated`/
///   `node_added`/`node_removed` the devices, `node_event` on a Generic Switch is a device event.
/// - Commands: `device_command` and `write_attribute` (`MatterCommands`); the state changes when the node
///   reports it, never optimistically. A request that times out after it was sent is `outcomeUnknown`: the
///   gateway reads the node back instead of sending it again.
public final class MatterVendor: Vendor {
    public let instanceID: String
    public let typeName = "matter"
    /// The API schema this client speaks (python-matter-server 8.1.2 serves 11; matterjs-server 14, accepting 11).
    static let schemaVersion = 11
    private let options: MatterOptions
    private let sink: VendorEventSink
    private let context: VendorContext
    private let stream: ReconnectingStream
    private let known = Mutex(Known())
    /// Moves on every report from a node (see `confirm`).
    private let reports = ChangeSignal()
    /// The vendor's clock, as elapsed time: request timeouts and confirmation windows.
    private let time: TimeSource

    private struct Known {
        var nodes: [UInt64: MatterNode] = [:]
        /// Each node's devices as last announced.
        var plans: [UInt64: [MatterDevicePlan]] = [:]
        var connection: MatterConnection?
    }

    public init(instanceID: String, options: MatterOptions, sink: VendorEventSink, context: VendorContext) {
        self.instanceID = instanceID
        self.options = options
        self.sink = sink
        self.context = context
        time = TimeSource(context.clock)
        stream = ReconnectingStream(vendorID: instanceID, sink: sink, clock: context.clock, now: context.now, policy: options.reconnect)
    }

    public func run() async throws {
        await stream.run { connected in try await self.session(connected) }
    }

    // MARK: Connection

    func session(_ connected: @escaping ReconnectingStream.Connected) async throws {
        var settings = WebSocketClientConfiguration()
        settings.maxFrameSize = options.maxMessageSize
        settings.closeTimeout = .seconds(1)
        // The server pings every 55 s; our own pings find a server that vanished without closing.
        settings.autoPing = .enabled(timePeriod: .seconds(30))
        var quiet = context.logger
        quiet.logLevel = .warning
        let maxSize = options.maxMessageSize
        let url = options.url
        let ending = SessionEnd()
        do {
            try await WebSocketClient.connect(url: url, configuration: settings, logger: quiet) { inbound, outbound, _ in
                let connection = MatterConnection(outbound: outbound, time: self.time)
                // Two tasks: the reader, and the start (server_info, start_listening). Either one ending the
                // session cancels the other; the handler then returns and the socket closes.
                await withTaskGroup(of: Bool.self) { group in
                    group.addTask {
                        do {
                            for try await message in inbound.messages(maxSize: maxSize) {
                                guard case .text(let text) = message else { continue }
                                // A large message (every node at start_listening) is decoded off this task, so a
                                // shutdown or a lost connection never waits for a parse to finish.
                                let decoded = text.utf8.count < Self.inlineDecodeBytes
                                    ? Self.decode(text) : try await Self.decodeUnlessCancelled(text)
                                if let error = self.receive(decoded, connection: connection) {
                                    ending.withLock { $0 = $0 ?? error }
                                    break
                                }
                            }
                        } catch is CancellationError {
                        } catch {
                            ending.withLock { $0 = $0 ?? GatewayError(.vendorUnreachable, message: "The Matter server connection failed: \(error)") }
                        }
                        connection.close(ending.withLock { $0 } ?? GatewayError(.vendorUnreachable, message: "The Matter server closed the connection."))
                        return true
                    }
                    group.addTask {
                        do {
                            try await self.start(connection, connected: connected)
                            return false
                        } catch {
                            let failure = error as? GatewayError ?? GatewayError(.vendorUnreachable, message: "The Matter server session failed: \(error)")
                            ending.withLock { $0 = $0 ?? failure }
                            return true
                        }
                    }
                    while let stop = await group.next() {
                        if stop {
                            group.cancelAll()
                            break
                        }
                    }
                }
            }
        } catch {
            ending.withLock { $0 = $0 ?? GatewayError(.vendorUnreachable, message: "Cannot reach the Matter server at \(url): \(error)") }
        }
        known.withLock { $0.connection = nil }
        markAllOffline()
        throw ending.withLock { $0 } ?? GatewayError(.vendorUnreachable, message: "The Matter server closed the connection.")
    }

    /// Why a session ended: the first reason wins.
    final class SessionEnd: Sendable {
        private let reason = Mutex<GatewayError?>(nil)
        func withLock<T>(_ body: (inout GatewayError?) -> T) -> T { reason.withLock { body(&$0) } }
    }

    /// `server_info` (checked), then `start_listening`: every node, and the events from now on.
    private func start(_ connection: MatterConnection, connected: @escaping ReconnectingStream.Connected) async throws {
        let info = try await connection.serverInfo(timeout: options.requestTimeout)
        try Self.checkSchema(info)
        let result = try await connection.request("start_listening", timeout: options.requestTimeout)
        let nodes = (result.array ?? []).compactMap(MatterNode.init)
        known.withLock { $0.connection = connection }
        connected()
        resync(nodes)
    }

    static func checkSchema(_ info: MatterServerInfo) throws(GatewayError) {
        let lowest = info.min_supported_schema_version ?? info.schema_version
        guard info.schema_version >= schemaVersion, lowest <= schemaVersion else {
            let server = "schema \(info.schema_version) (accepting \(lowest) … \(info.schema_version))"
            let fix = info.schema_version < schemaVersion
                ? "Update the Matter server to python-matter-server 8.1.2 (schema 11) or a newer matterjs-server."
                : "This Matter server no longer accepts schema \(schemaVersion) clients: update lbs-gateway."
            throw GatewayError(.badRequest, message: "The Matter server speaks \(server); lbs-gateway speaks schema \(schemaVersion).", suggestion: fix,
                               retryable: false, countsAgainstVendor: false)
        }
    }

    /// One message; an error to end the session with, or nil.
    func receive(_ text: String, connection: MatterConnection) -> GatewayError? {
        receive(Self.decode(text), connection: connection)
    }

    /// A message and, when it is the server's greeting, its server info.
    struct Decoded: Sendable {
        var message: MatterIncoming?
        var serverInfo: MatterServerInfo?
    }

    /// Messages below this are decoded where they arrive (a task hop costs more than their parse).
    static let inlineDecodeBytes = 64 * 1024

    static func decode(_ text: String) -> Decoded {
        let data = Data(text.utf8)
        guard let message = try? JSONDecoder().decode(MatterIncoming.self, from: data) else { return Decoded() }
        let info = message.schema_version != nil && message.event == nil
            ? try? JSONDecoder().decode(MatterServerInfo.self, from: data) : nil
        return Decoded(message: message, serverInfo: info)
    }

    /// `decode` on a detached task; throws CancellationError as soon as the waiting task is cancelled (the
    /// parse finishes on its own and is dropped).
    static func decodeUnlessCancelled(_ text: String) async throws -> Decoded {
        let waiting = DecodeWaiter()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Decoded, any Error>) in
                waiting.set(continuation)
                if Task.isCancelled { waiting.finish(.failure(CancellationError())) }
                Task.detached { waiting.finish(.success(decode(text))) }
            }
        } onCancel: {
            waiting.finish(.failure(CancellationError()))
        }
    }

    /// The one continuation of a decode, resumed by whichever comes first: the result or the cancellation.
    final class DecodeWaiter: Sendable {
        private let continuation = Mutex<CheckedContinuation<Decoded, any Error>?>(nil)
        func set(_ value: CheckedContinuation<Decoded, any Error>) { continuation.withLock { $0 = value } }
        func finish(_ result: Result<Decoded, any Error>) { continuation.withLock { $0.take() }?.resume(with: result) }
    }

    func receive(_ decoded: Decoded, connection: MatterConnection) -> GatewayError? {
        guard let message = decoded.message else {
            context.logger.debug("matter: a message that is not JSON was ignored")
            return nil
        }
        if connection.deliver(message) { return nil }
        if let event = message.event {
            return handle(event: event, data: message.data ?? .null)
        }
        if let info = decoded.serverInfo { connection.deliver(serverInfo: info) }
        return nil
    }

    func handle(event: String, data: MatterValue) -> GatewayError? {
        defer { reports.signal() }
        switch event {
        case "node_added", "node_updated":
            if let node = MatterNode(data) { update(node) }
        case "node_removed":
            if let id = data.unsigned { remove(nodeID: id) }
        case "attribute_updated":
            guard let parts = data.array, parts.count == 3, let id = parts[0].unsigned, let path = parts[1].string else { return nil }
            attributeUpdated(nodeID: id, path: path, value: parts[2])
        case "node_event":
            if let nodeEvent = MatterNodeEvent(data) { deviceEvent(nodeEvent) }
        case "server_shutdown":
            return GatewayError(.vendorUnreachable, message: "The Matter server is shutting down.", suggestion: "The gateway reconnects when it is back.")
        default:
            break
        }
        return nil
    }

    // MARK: Nodes → devices

    /// After (re)connecting: every node, as the full inventory (devices of nodes that went away are removed).
    func resync(_ nodes: [MatterNode]) {
        let plans = known.withLock { known in
            known.nodes = Dictionary(nodes.map { ($0.node_id, $0) }, uniquingKeysWith: { $1 })
            known.plans = known.nodes.mapValues { MatterMapping.plans(for: $0, vendorID: instanceID) }
            return known.plans.values.flatMap { $0 }
        }
        sink.send(.inventory(vendorID: instanceID, devices: plans.map(\.device)))
        let now = context.now()
        // An offline node's values are not news (the gateway takes a state as a sign of life): they go out when
        // it comes back.
        // An online node's state goes out even when nothing of it maps (a bridge's own node): its state topic then
        // carries `last_seen`, which Home Assistant's stale and last-seen entities read.
        for plan in plans {
            if plan.online { sink.send(.state(plan.device.id, plan.state, observedAt: now)) }
            sink.send(.availability(plan.device.id, online: plan.online))
        }
    }

    /// A node joined or changed (re-interviewed, availability): its devices are announced again where they changed.
    func update(_ node: MatterNode) {
        let (before, after) = known.withLock { known in
            known.nodes[node.node_id] = node
            let after = MatterMapping.plans(for: node, vendorID: instanceID)
            defer { known.plans[node.node_id] = after }
            return (known.plans[node.node_id] ?? [], after)
        }
        announce(before: before, after: after, full: true)
    }

    func remove(nodeID: UInt64) {
        let gone = known.withLock { known in
            known.nodes[nodeID] = nil
            return known.plans.removeValue(forKey: nodeID) ?? []
        }
        for plan in gone { sink.send(.deviceRemoved(plan.device.id)) }
    }

    func attributeUpdated(nodeID: UInt64, path: String, value: MatterValue) {
        let change = known.withLock { known -> ([MatterDevicePlan], [MatterDevicePlan])? in
            guard var node = known.nodes[nodeID] else { return nil }
            node.attributes[path] = value
            known.nodes[nodeID] = node
            let after = MatterMapping.plans(for: node, vendorID: instanceID)
            defer { known.plans[nodeID] = after }
            return (known.plans[nodeID] ?? [], after)
        }
        guard let (before, after) = change else { return }
        announce(before: before, after: after, full: false)
    }

    /// Devices that are new or changed are (re)announced, vanished ones removed; states go out as what changed
    /// (`full`: everything, after a node update).
    private func announce(before: [MatterDevicePlan], after: [MatterDevicePlan], full: Bool) {
        let old = Dictionary(before.map { ($0.device.id, $0) }, uniquingKeysWith: { $1 })
        let now = context.now()
        for plan in after {
            let previous = old[plan.device.id]
            if previous?.device != plan.device { sink.send(.deviceAdded(plan.device)) }
            let cameBack = plan.online && previous?.online != true
            if plan.online {
                let changed = full || cameBack ? plan.state : plan.state.filter { previous?.state[$0.key] != $0.value }
                if !changed.isEmpty || full || cameBack { sink.send(.state(plan.device.id, changed, observedAt: now)) }
            }
            if previous?.online != plan.online || full { sink.send(.availability(plan.device.id, online: plan.online)) }
        }
        let current = Set(after.map(\.device.id))
        for plan in before where !current.contains(plan.device.id) { sink.send(.deviceRemoved(plan.device.id)) }
    }

    /// Generic Switch (cluster 59) events: a one-off device event with the endpoint and positions.
    func deviceEvent(_ event: MatterNodeEvent) {
        guard event.cluster_id == 59, let type = MatterMapping.switchEvents[event.event_id] else { return }
        let plan = known.withLock { known in known.plans[event.node_id]?.first { $0.switchEndpoints.contains(event.endpoint_id) } }
        guard let plan else { return }
        var data: [String: StateValue] = ["endpoint": .number(Double(event.endpoint_id))]
        if case .object(let fields)? = event.data {
            let names = ["newPosition": "new_position", "previousPosition": "previous_position",
                         "currentNumberOfPressesCounted": "presses", "totalNumberOfPressesCounted": "presses"]
            for (field, name) in names { if let value = fields[field]?.number { data[name] = .number(value) } }
        }
        sink.send(.deviceEvent(plan.device.id, type: type, data: data, at: context.now()))
    }

    private func markAllOffline() {
        let ids = known.withLock { known in known.plans.values.flatMap { $0.map(\.device.id) } }
        for id in ids { sink.send(.availability(id, online: false)) }
        known.withLock { known in
            for (node, plans) in known.plans { known.plans[node] = plans.map { var plan = $0; plan.online = false; return plan } }
        }
    }

    // MARK: Commands

    private func target(_ device: DeviceID) throws(GatewayError) -> (MatterNode, MatterDevicePlan, MatterConnection) {
        let found = known.withLock { known -> (MatterNode, MatterDevicePlan, MatterConnection?)? in
            for (id, plans) in known.plans {
                if let plan = plans.first(where: { $0.device.id == device }), let node = known.nodes[id] { return (node, plan, known.connection) }
            }
            return nil
        }
        guard let (node, plan, connection) = found else {
            throw GatewayError(.notFound, message: "\(device) is not a node the Matter server knows (now).")
        }
        guard let connection else {
            throw GatewayError(.vendorUnreachable, message: "The Matter server is not connected.", suggestion: "Check that the Matter server runs at \(options.url).")
        }
        return (node, plan, connection)
    }

    /// How long a fan has to report a change (its motor ramps) before the command fails.
    static let fanConfirmWindow = Duration.seconds(6)

    public func execute(_ command: DeviceCommand) async throws -> CommandOutcome {
        let (node, plan, connection) = try target(command.device)
        let calls = try MatterCommands.calls(for: command.changes, plan: plan, node: node, pinCode: options.pinCode?.reveal())
        let fanTargets = MatterCommands.fanTargets(command.changes, plan: plan, node: node)
        for call in calls {
            let remaining = command.expiresAt.timeIntervalSince(context.now())
            let timeout = Duration.clampedSeconds(max(1, min(options.requestTimeout.inSeconds, remaining)))
            do {
                _ = try await send(call, nodeID: node.node_id, connection: connection, timeout: timeout)
            } catch var error as GatewayError {
                error.message = "\(call.summary) on node \(node.node_id): \(error.message)"
                throw error
            }
        }
        // A fan's change counts once the node reports it (the server answers a write as soon as it is stored).
        if !fanTargets.isEmpty { return try await confirm(fanTargets, nodeID: node.node_id, device: command.device, expiresAt: command.expiresAt) }
        // Nothing is confirmed here: the new state arrives as attribute_updated from the node.
        return CommandOutcome(confirmed: [:])
    }

    /// Waits for the node's reports to show every fan target (at most `fanConfirmWindow`, never past the command's
    /// expiry); the confirmed state is what the node reports.
    private func confirm(_ targets: [MatterCommands.FanTarget], nodeID: UInt64, device: DeviceID, expiresAt: Date) async throws -> CommandOutcome {
        let window = min(Self.fanConfirmWindow.inSeconds, max(0, expiresAt.timeIntervalSince(context.now())))
        let deadline = time.now() + .clampedSeconds(window)
        while true {
            // Taken before the look: a report that comes between the look and the wait still wakes it.
            let seen = reports.version
            let current = known.withLock { known in
                known.nodes[nodeID].map { node in (node, MatterMapping.plans(for: node, vendorID: instanceID).first { $0.device.id == device }) }
            }
            if let (node, plan) = current, targets.allSatisfy({ MatterCommands.reached($0, node) }) {
                let keys = Set(targets.map(\.key))
                return CommandOutcome(confirmed: (plan?.state ?? [:]).filter { keys.contains($0.key) })
            }
            let left = deadline - time.now()
            guard left > .zero else {
                let reported = current.flatMap { $0.1?.state }.map { state in
                    targets.map { "\($0.key) \(state[$0.key]?.description ?? "nothing")" }.joined(separator: ", ")
                } ?? "nothing"
                throw GatewayError(.vendorRejected, message: "The fan took the change but still reports \(reported) after \(Int(window)) s.",
                                   suggestion: "Check the fan itself (its own controls, power, a child lock); the gateway shows what it reports.",
                                   retryable: false, countsAgainstVendor: false)
            }
            // Until the node's next report (or the window's end), then look again.
            await reports.wait(after: seen, timeout: left, clock: context.clock)
            try Task.checkCancellation()
        }
    }

    func send(_ call: MatterCall, nodeID: UInt64, connection: MatterConnection, timeout: Duration) async throws -> MatterValue {
        switch call {
        case .command(let endpoint, let cluster, let name, let payload, let timedMs):
            var args: [String: MatterValue] = [
                "node_id": .uint(nodeID), "endpoint_id": .int(Int64(endpoint)), "cluster_id": .int(Int64(cluster)), "command_name": .string(name),
                "payload": .object(payload.mapValues(\.value)),
            ]
            if let timedMs { args["timed_request_timeout_ms"] = .int(Int64(timedMs)) }
            return try await connection.request("device_command", args: args, timeout: timeout)
        case .write(let endpoint, let cluster, let attribute, let value):
            let args: [String: MatterValue] = ["node_id": .uint(nodeID), "attribute_path": .string("\(endpoint)/\(cluster)/\(attribute)"), "value": value.value]
            return try await connection.request("write_attribute", args: args, timeout: timeout)
        }
    }

    /// The node's state read from the server (`get_node`), for a command whose outcome is unknown.
    public func readState(_ device: DeviceID) async throws -> [String: StateValue] {
        let (node, _, connection) = try target(device)
        let value = try await connection.request("get_node", args: ["node_id": .uint(node.node_id)], timeout: options.requestTimeout)
        guard let fresh = MatterNode(value) else { throw GatewayError(.malformedResponse, message: "get_node gave no node.") }
        update(fresh)
        return MatterMapping.plans(for: fresh, vendorID: instanceID).first { $0.device.id == device }?.state ?? [:]
    }

    public func refresh(_ device: DeviceID) async throws {
        _ = try await readState(device)
    }
}
