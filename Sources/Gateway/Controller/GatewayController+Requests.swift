import Foundation
import GatewayModel

extension GatewayController {
    /// The request names served on `<base>/bridge/request/<name>`.
    public static let requestNames = ["info", "devices", "device/refresh", "health", "history", "batch", "restart", "options"]

    /// Every `type` published on `<base>/bridge/event` (documented in `mqtt-topics.md`; a test keeps them in step).
    public static let eventTypes = [
        "device_added", "device_removed", "command_failed", "vendor_state_changed", "response_refused",
        "storage_state_changed", "inventory_truncated",
    ]

    /// The longest `transaction` echoed back (it is the requester's tag, not a payload).
    static let maxTransactionBytes = 128

    /// zigbee2mqtt-style request/response: the answer goes to `<base>/bridge/response/<name>`
    /// and echoes the request's `transaction`.
    func handleRequest(_ message: InboundMessage, name: String) {
        var reply = Reply(responseTopic: message.responseTopic, correlationData: message.correlationData, bridgeResponse: topics.bridgeResponse(name))
        let context: JSON = ["topic": .string(message.topic)]
        if message.retain {
            return fail(.retainedCommand(message.topic), device: nil, context: context, reply: reply)
        }
        if message.payload.count > config.mqtt.maxPayloadBytes {
            return fail(.payloadTooLarge(bytes: message.payload.count, limit: config.mqtt.maxPayloadBytes), device: nil, context: context, reply: reply)
        }
        // The payload is a JSON object, empty, or a bare string (`device/refresh` accepts the id alone).
        var body: [String: JSONValue] = [:]
        let text = String(decoding: message.payload, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if !text.isEmpty {
            switch JSONValue.parse(message.payload) {
            case .success(.object(let object)): body = object
            case .success(.string(let bare)): body = ["id": .string(bare)]
            case .success(let other):
                return fail(.invalidPayload("expected a JSON object, got \(other.brief)"), device: nil, context: context, reply: reply)
            case .failure(let error):
                if String(validating: message.payload, as: UTF8.self) == nil || text.hasPrefix("{") || text.hasPrefix("[") {
                    return fail(error, device: nil, context: context, reply: reply)
                }
                body = ["id": .string(text)]
            }
        }
        if let transaction = body["transaction"] {
            switch transaction {
            case .string(let value) where value.utf8.count <= Self.maxTransactionBytes: reply.transaction = .string(value)
            case .string:
                return fail(.invalidPayload("\"transaction\" is longer than \(Self.maxTransactionBytes) bytes"), device: nil, context: context, reply: reply)
            case .number(let value): reply.transaction = .number(value)
            default: break
            }
        }
        switch name {
        case "info":
            respond(reply, status: "ok", data: infoJSON(), error: nil)
        case "devices":
            respond(reply, status: "ok", data: bridgeDevicesJSON(), error: nil)
        case "health":
            respond(reply, status: "ok", data: healthJSON(), error: nil)
        case "device/refresh":
            guard case .string(let raw)? = body["id"] ?? body["device"] else {
                return fail(.invalidPayload("device/refresh needs {\"id\":\"<device_id>\"}"), device: nil, context: context, reply: reply)
            }
            guard let id = DeviceID(validating: raw), devices[id] != nil else {
                return fail(.unknownDevice(raw), device: nil, context: context, reply: reply)
            }
            refresh(id, reply: reply)
        case "history":
            history(body, reply: reply, context: context)
        case "batch":
            batch(body, reply: reply, context: context)
        case "restart":
            restartRequest(reply: reply, context: context)
        case "options":
            optionsRequest(body, reply: reply, context: context)
        default:
            fail(.unknownRequest(name), device: nil, context: context, reply: reply)
        }
    }

    func infoJSON() -> JSON {
        [
            "version": .string(Self.version), "base_topic": .string(topics.base), "log_level": .string(currentLogLevel),
            "vendors": .array(config.vendors.map { ["id": .string($0.id), "type": .string($0.type)] }),
            "devices": .number(Double(devices.count)),
        ]
    }

    func healthJSON() -> JSON {
        let online = availability.values.filter { $0 }.count
        return [
            "uptime_s": .number(now().timeIntervalSince(startedAt).rounded()),
            "devices": ["total": .number(Double(devices.count)), "online": .number(Double(online))],
            "commands": ["executed": .number(Double(counters.commandsExecuted)), "failed": .number(Double(counters.commandsFailed)),
                         "refused": .number(Double(counters.commandsRefused))],
            "messages": ["inbound": .number(Double(counters.inboundMessages)), "states_published": .number(Double(counters.statesPublished)),
                         "counter_dips_held": .number(Double(counters.counterDipsHeld))],
            "dropped": dropsJSON(drops),
            "queues": queuesJSON(),
            "storage": storageJSON(),
            "vendors": .array(vendors.keys.sorted().map { ["id": .string($0), "type": .string(vendorTypes[$0] ?? "")] }),
        ]
    }
}
