import Foundation
import GatewayModel
import Logging

extension GatewayController {
    /// Every inbound message ends in an action, or in a `command_failed` event (and an error
    /// response where the sender asked for one). Nothing here throws or blocks.
    public func handle(_ message: InboundMessage) {
        counters.inboundMessages += 1
        let route = topics.parse(message.topic)
        switch route {
        case .homeAssistantStatus:
            handleHomeAssistantStatus(message)
        case .set(let rawID, let key):
            handleSet(message, rawID: rawID, key: key)
        case .get(let rawID):
            handleGet(message, rawID: rawID)
        case .request(let name):
            handleRequest(message, name: name)
        case .other:
            noteRetained(message)
        }
    }

    // MARK: - Commands

    func handleSet(_ message: InboundMessage, rawID: String, key: String?) {
        var reply = Reply(responseTopic: message.responseTopic, correlationData: message.correlationData)
        let context: JSON = ["topic": .string(message.topic)]
        // A retained /set is a stored command the broker replays (often at start-up). It must never
        // run: an old UNLOCK must not open the door hours later.
        if message.retain {
            return fail(.retainedCommand(message.topic), device: DeviceID(validating: rawID), context: context, reply: reply)
        }
        if message.payload.count > config.mqtt.maxPayloadBytes {
            return fail(.payloadTooLarge(bytes: message.payload.count, limit: config.mqtt.maxPayloadBytes), device: nil, context: context, reply: reply)
        }
        guard let id = DeviceID(validating: rawID), let device = devices[id] else {
            return fail(.unknownDevice(rawID), device: nil, context: context, reply: reply)
        }
        let current = states[id] ?? DeviceState()
        switch CommandParser.parse(payload: message.payload, key: key, device: device, current: current) {
        case .failure(let error):
            fail(error, device: id, context: context, reply: reply)
        case .success(let changes):
            let issued = now()
            let command = DeviceCommand(
                id: UUID().uuidString.lowercased(), device: id, vendorID: device.vendorID, vendorDeviceID: device.vendorDeviceID,
                changes: changes, issuedAt: issued, expiresAt: issued.addingTimeInterval(config.commands.ttl(for: device.type))
            )
            reply.bridgeResponse = nil
            enqueue(CommandJob(command: command, reply: reply))
        }
    }

    func commandContext(_ command: DeviceCommand) -> JSON {
        ["command_id": .string(command.id), "changes": .object(command.changes.mapValues(JSON.init))]
    }

    /// Reports a rejected or failed command: a `command_failed` event, plus an error response
    /// on the v5 response topic or bridge response when the sender gave one.
    func fail(_ error: GatewayError, device: DeviceID?, context: JSON, reply: Reply) {
        counters.commandsFailed += 1
        // A flood of bad messages must not flood the log too: one line per code and 10 s.
        rateLimitedLog("command_failed." + error.code.rawValue, .warning, "command failed: \(error.code.rawValue): \(error.message)")
        var data: [String: JSON] = ["error": errorJSON(error)]
        if let device { data["device"] = .string(device.rawValue) }
        if case .object(let extra) = context { data.merge(extra) { current, _ in current } }
        publishEvent("command_failed", .object(data))
        respond(reply, status: "error", data: [:], error: error)
    }

    func errorJSON(_ error: GatewayError) -> JSON {
        .object(error.jsonObject.mapValues(JSON.string))
    }

    /// v5 response topics get `{"status":"ok"}` or `{"status":"error","error":{code,message,…}}`;
    /// bridge responses follow zigbee2mqtt: `{"status","data","error","transaction"}`.
    func respond(_ reply: Reply, status: String, data: JSON, error: GatewayError?) {
        if let topic = reply.responseTopic {
            if let refusal = responseTopicRefusal(topic) {
                counters.refusedResponses += 1
                rateLimitedLog("response_topic_refused", .warning, refusal.message)
                publishEvent("response_refused", ["response_topic": .string(GatewayError.clip(topic)), "error": errorJSON(refusal)])
            } else {
                var payload: [String: JSON] = ["status": .string(status)]
                if let error { payload["error"] = errorJSON(error) }
                if reply.bridgeResponse != nil || error == nil, case .object(let members) = data, !members.isEmpty { payload["data"] = data }
                if let transaction = reply.transaction { payload["transaction"] = transaction }
                transport.publish(topic, JSON.object(payload).render(), qos: 1, retain: false, correlationData: reply.correlationData)
            }
        }
        if let topic = reply.bridgeResponse {
            var payload: [String: JSON] = ["status": .string(status), "data": error == nil ? data : [:]]
            if let error { payload["error"] = .string(error.message) }
            if let transaction = reply.transaction { payload["transaction"] = transaction }
            transport.publish(topic, JSON.object(payload).render(), qos: 1, retain: false)
        }
    }

    /// Longest response topic the gateway answers on.
    static let maxResponseTopicBytes = 256

    /// Why the gateway will not publish a reply on `topic`, or nil when it may. A requester must never make
    /// the gateway write into its own namespace (`<base>/…`: bridge state, devices, availability) or into
    /// Home Assistant's (discovery, `homeassistant/status`): with broker ACLs that would let a client that may
    /// only send commands publish where it may not.
    func responseTopicRefusal(_ topic: String) -> GatewayError? {
        func refused(_ why: String) -> GatewayError {
            GatewayError(.responseTopicRefused, message: "Not answering on response topic '\(GatewayError.clip(topic))': \(why).")
        }
        if topic.isEmpty { return refused("it is empty") }
        if topic.utf8.count > Self.maxResponseTopicBytes { return refused("it is longer than \(Self.maxResponseTopicBytes) bytes") }
        if topic.contains("#") || topic.contains("+") { return refused("it contains a wildcard") }
        if topic.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) { return refused("it contains control characters") }
        let own = [topics.base + "/", config.homeAssistant.discoveryPrefix + "/", "homeassistant/"]
        if topic == topics.base || topic == config.homeAssistant.statusTopic || own.contains(where: { topic.hasPrefix($0) }) {
            return refused("it is inside the gateway's or Home Assistant's namespace")
        }
        let allowed = config.mqtt.responseTopicPrefixes
        if !allowed.isEmpty, !allowed.contains(where: { topic.hasPrefix($0) }) {
            return refused("it is not under one of mqtt.response_topic_prefixes (\(allowed.joined(separator: ", ")))")
        }
        return nil
    }

    // MARK: - /get

    func handleGet(_ message: InboundMessage, rawID: String) {
        let reply = Reply(responseTopic: message.responseTopic, correlationData: message.correlationData)
        guard let id = DeviceID(validating: rawID), devices[id] != nil else {
            return fail(.unknownDevice(rawID), device: nil, context: ["topic": .string(message.topic)], reply: reply)
        }
        refresh(id, reply: reply)
    }

    /// Refreshes, coalesced per device (per vendor when one vendor call reads all its devices): while one
    /// runs, later requests wait for it; a new call starts no sooner than `minimumRefreshInterval` after the
    /// previous one. 2,000 `/get`s in a second are a few vendor calls, not 2,000.
    struct RefreshState {
        var running = false
        var scheduled = false
        var lastStarted: Date?
        /// The requests the next call answers.
        var waiters: [(device: DeviceID, reply: Reply)] = []
    }

    static let minimumRefreshInterval: TimeInterval = 1
    /// Requests that may wait for one refresh; more are refused with `queue_full`.
    static let maxRefreshWaiters = 256

    func refresh(_ id: DeviceID, reply: Reply) {
        guard let device = devices[id], let vendor = vendors[device.vendorID] else {
            return fail(.unknownDevice(id.rawValue), device: nil, context: [:], reply: reply)
        }
        let key = vendor.refreshesAllDevices ? "vendor:" + device.vendorID : "device:" + id.rawValue
        var state = refreshes[key] ?? RefreshState()
        guard state.waiters.count < Self.maxRefreshWaiters else {
            return fail(GatewayError(.queueFull, message: "\(Self.maxRefreshWaiters) refreshes already wait for '\(id)'; this one was not queued.",
                                     suggestion: "Wait for the running refresh; its fresh state is published on the device topic."),
                        device: id, context: ["request": "refresh"], reply: reply)
        }
        state.waiters.append((id, reply))
        refreshes[key] = state
        scheduleRefresh(key)
    }

    private func scheduleRefresh(_ key: String) {
        guard var state = refreshes[key], !state.running, !state.scheduled, !state.waiters.isEmpty else { return }
        let wait = state.lastStarted.map { Self.minimumRefreshInterval - now().timeIntervalSince($0) } ?? 0
        state.scheduled = true
        refreshes[key] = state
        let clock = self.clock
        Task {
            if wait > 0 { try? await clock.sleep(for: .seconds(wait)) }
            await self.runRefresh(key)
        }
    }

    private func runRefresh(_ key: String) async {
        guard var state = refreshes[key], let first = state.waiters.first?.device else { return }
        let waiters = state.waiters
        state = RefreshState(running: true, scheduled: false, lastStarted: now(), waiters: [])
        refreshes[key] = state
        var failure: GatewayError?
        if let device = devices[first], let vendor = vendors[device.vendorID] {
            do {
                try await vendor.refresh(first)
            } catch let error as GatewayError {
                failure = error
            } catch {
                failure = GatewayError(.internal, message: "\(error)")
            }
        } else {
            failure = .unknownDevice(first.rawValue)
        }
        for (id, reply) in waiters {
            if let failure {
                fail(failure, device: id, context: ["request": "refresh"], reply: reply)
            } else if devices[id] == nil {
                fail(.unknownDevice(id.rawValue), device: nil, context: ["request": "refresh"], reply: reply)
            } else {
                respond(reply, status: "ok", data: ["id": .string(id.rawValue)], error: nil)
            }
        }
        // The entry stays (with its start time) so the minimum interval holds for the next request too.
        refreshes[key]?.running = false
        scheduleRefresh(key)
    }

    // MARK: - Home Assistant birth

    /// Home Assistant came (back) online: after a short random delay (so a restart of HA does not
    /// meet a burst from every bridge at once) re-publish availability and states.
    func handleHomeAssistantStatus(_ message: InboundMessage) {
        guard config.homeAssistant.enabled, String(decoding: message.payload, as: UTF8.self) == "online", !haRepublishPending else { return }
        haRepublishPending = true
        let maxDelay = max(0, config.homeAssistant.republishDelayMax)
        let delay = Double.random(in: (maxDelay / 4)...max(maxDelay / 4, maxDelay))
        let clock = self.clock
        Task {
            try? await clock.sleep(for: .milliseconds(Int64(delay * 1000)))
            self.republishAfterBirth()
        }
    }

    func republishAfterBirth() {
        haRepublishPending = false
        transport.publish(topics.bridgeState, #"{"state":"online"}"#, qos: 1, retain: true)
        republishAllStates()
        publishAggregates()
        logger.info("re-published states after Home Assistant came online")
    }
}
