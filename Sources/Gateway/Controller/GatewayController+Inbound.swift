import Foundation
import GatewayModel
import Logging

extension GatewayController {
    /// Drains inbound MQTT messages inside the actor.
    public func consume(_ messages: AsyncStream<InboundMessage>) async {
        for await message in messages {
            handle(message)
        }
    }

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
            break
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

    /// Commands for one device run one at a time, in arrival order; devices run in parallel.
    /// With a cache, every command is first stored in the outbox (one ordered intake, one
    /// transaction per arrival group), so a command waiting behind another survives a kill -9 too.
    func enqueue(_ job: CommandJob) {
        enqueue([job])
    }

    func enqueue(_ jobs: [CommandJob]) {
        guard persistence != nil, jobs.contains(where: { !$0.persisted }) else {
            jobs.forEach(dispatchToLane)
            return
        }
        if outboxIntake == nil {
            let (stream, continuation) = AsyncStream.makeStream(of: [CommandJob].self)
            outboxIntake = continuation
            Task {
                for await group in stream {
                    await self.storeInOutbox(group)
                }
            }
        }
        outboxIntake?.yield(jobs)
    }

    /// Commands that may wait for one device; more are refused with `queue_full` rather than held without bound.
    static let laneCapacity = 256

    func dispatchToLane(_ job: CommandJob) {
        let id = job.command.device
        if let lane = commandLanes[id] {
            if case .dropped = lane.yield(job) {
                Task { await self.settleFailed(job, .queueFull(device: id.rawValue, limit: Self.laneCapacity)) }
            }
            return
        }
        let (stream, continuation) = AsyncStream.makeStream(of: CommandJob.self, bufferingPolicy: .bufferingOldest(Self.laneCapacity))
        commandLanes[id] = continuation
        continuation.yield(job)
        Task {
            for await job in stream {
                await self.runCommand(job)
            }
        }
    }

    func commandContext(_ command: DeviceCommand) -> JSON {
        ["command_id": .string(command.id), "changes": .object(command.changes.mapValues(JSON.init))]
    }

    /// Reports a rejected or failed command: a `command_failed` event, plus an error response
    /// on the v5 response topic or bridge response when the sender gave one.
    func fail(_ error: GatewayError, device: DeviceID?, context: JSON, reply: Reply) {
        counters.commandsFailed += 1
        logger.warning("command failed: \(error.code.rawValue): \(error.message)")
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
        if let topic = reply.responseTopic, !topic.isEmpty, !topic.contains("#"), !topic.contains("+") {
            var payload: [String: JSON] = ["status": .string(status)]
            if let error { payload["error"] = errorJSON(error) }
            if reply.bridgeResponse != nil || error == nil, case .object(let members) = data, !members.isEmpty { payload["data"] = data }
            if let transaction = reply.transaction { payload["transaction"] = transaction }
            transport.publish(topic, JSON.object(payload).render(), qos: 1, retain: false, correlationData: reply.correlationData)
        }
        if let topic = reply.bridgeResponse {
            var payload: [String: JSON] = ["status": .string(status), "data": error == nil ? data : [:]]
            if let error { payload["error"] = .string(error.message) }
            if let transaction = reply.transaction { payload["transaction"] = transaction }
            transport.publish(topic, JSON.object(payload).render(), qos: 1, retain: false)
        }
    }

    // MARK: - /get

    func handleGet(_ message: InboundMessage, rawID: String) {
        let reply = Reply(responseTopic: message.responseTopic, correlationData: message.correlationData)
        guard let id = DeviceID(validating: rawID), devices[id] != nil else {
            return fail(.unknownDevice(rawID), device: nil, context: ["topic": .string(message.topic)], reply: reply)
        }
        refresh(id, reply: reply)
    }

    func refresh(_ id: DeviceID, reply: Reply) {
        guard let device = devices[id], let vendor = vendors[device.vendorID] else {
            return fail(.unknownDevice(id.rawValue), device: nil, context: [:], reply: reply)
        }
        Task {
            do {
                try await vendor.refresh(id)
                self.respond(reply, status: "ok", data: ["id": .string(id.rawValue)], error: nil)
            } catch let error as GatewayError {
                self.fail(error, device: id, context: ["request": "refresh"], reply: reply)
            } catch {
                self.fail(GatewayError(.internal, message: "\(error)"), device: id, context: ["request": "refresh"], reply: reply)
            }
        }
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
