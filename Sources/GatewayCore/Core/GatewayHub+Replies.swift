#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import Logging

/// Answers and bridge events: every extension reports failures the same way, so they live in the core.
extension GatewayHub {
    package func publishEvent(_ type: BridgeEventType, _ data: JSON) {
        let moment = now()
        let event: JSON = ["type": .string(type.rawValue), "data": data, "time": .string(ISOTime.format(moment))]
        transport.publish(topics.bridgeEvent, event.render(), qos: 1, retain: false)
        emit(.bridgeEventPublished(type: type.rawValue, data: data, time: moment))
    }

    package static func errorJSON(_ error: GatewayError) -> JSON {
        .object(error.jsonObject.mapValues(JSON.string))
    }

    package static func commandContext(_ command: DeviceCommand) -> JSON {
        ["command_id": .string(command.id), "changes": .object(command.changes.mapValues(JSON.init))]
    }

    /// Reports a rejected or failed command or request: a `command_failed` event, plus an error response
    /// on the v5 response topic or bridge response when the sender gave one.
    package func fail(_ error: GatewayError, device: DeviceID?, context: JSON, reply: Reply) {
        counters.commandsFailed += 1
        // A flood of bad messages must not flood the log too: one line per code and 10 s.
        rateLimitedLog("command_failed." + error.code.rawValue, .warning, "command failed: \(error.code.rawValue): \(error.message)")
        var data: [String: JSON] = ["error": Self.errorJSON(error)]
        if let device { data["device"] = .string(device.rawValue) }
        if case .object(let extra) = context { data.merge(extra) { current, _ in current } }
        publishEvent(.commandFailed, .object(data))
        respond(reply, status: "error", data: [:], error: error)
    }

    /// v5 response topics get `{"status":"ok"}` or `{"status":"error","error":{code,message,…}}`;
    /// bridge responses follow zigbee2mqtt: `{"status","data","error","transaction"}`.
    package func respond(_ reply: Reply, status: String, data: JSON, error: GatewayError?) {
        if let topic = reply.responseTopic {
            if let refusal = responseTopicRefusal(topic) {
                counters.refusedResponses += 1
                rateLimitedLog("response_topic_refused", .warning, refusal.message)
                publishEvent(.responseRefused, ["response_topic": .string(GatewayError.clip(topic)), "error": Self.errorJSON(refusal)])
            } else {
                var payload: [String: JSON] = ["status": .string(status)]
                if let error { payload["error"] = Self.errorJSON(error) }
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
    package static let maxResponseTopicBytes = 256

    /// Why the gateway will not publish a reply on `topic`, or nil when it may: only under
    /// `mqtt.response_topic_prefixes` (`replies/` by default). A requester must never make
    /// the gateway write into its own namespace (`<base>/…`: bridge state, devices, availability) or into
    /// Home Assistant's (discovery, `homeassistant/status`): with broker ACLs that would let a client that may
    /// only send commands publish where it may not.
    package func responseTopicRefusal(_ topic: String) -> GatewayError? {
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
        // `replies/` unless configured: otherwise a request could aim the reply at another system's command topic.
        let allowed = config.mqtt.responseTopicPrefixes
        if !allowed.isEmpty, !allowed.contains(where: { topic.hasPrefix($0) }) {
            return refused("it is not under one of mqtt.response_topic_prefixes (\(allowed.joined(separator: ", ")))")
        }
        return nil
    }

    /// The checks every command-carrying message passes first (a `/set` or a bridge request): never run a
    /// retained one (an old UNLOCK replayed by the broker hours later), never parse an oversized one.
    package func refusal(of message: InboundMessage) -> GatewayError? {
        if message.retain { return .retainedCommand(message.topic) }
        if message.payload.count > config.mqtt.maxPayloadBytes {
            return .payloadTooLarge(bytes: message.payload.count, limit: config.mqtt.maxPayloadBytes)
        }
        return nil
    }

    /// Turns validated changes into a command with its deadline (`/set` and `batch` items alike).
    /// `receivedAt`: when the command reached the gateway, if it waited before this (its TTL counts from then).
    package func makeCommand(for device: Device, changes: [String: StateValue], receivedAt: Date? = nil) -> DeviceCommand {
        let issued = receivedAt ?? now()
        return DeviceCommand(
            id: UUID.randomText(), device: device.id, vendorID: device.vendorID, vendorDeviceID: device.vendorDeviceID,
            changes: changes, issuedAt: issued, expiresAt: issued.addingTimeInterval(config.commands.ttl(for: device.type))
        )
    }
}
