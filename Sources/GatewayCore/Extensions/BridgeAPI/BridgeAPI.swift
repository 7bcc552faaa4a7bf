import CommandParsing
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import VendorKit
import Logging

/// The bridge's own topics and zigbee2mqtt-style request/response: `bridge/info`, `bridge/devices`,
/// `bridge/health`, `bridge/request/<name>` → `bridge/response/<name>` (echoing `transaction`).
/// It answers `info`, `devices`, `health`, `restart` and `options` itself and hands other requests to
/// the extension that registered them (`device/refresh` and `batch`: commands; `history`: the cache).
@GatewayActor
package final class BridgeAPI: GatewayExtension {
    package let hub: GatewayHub
    package var controls: BridgeControls?
    private var lastHealth: (digest: Int, at: Date)?
    private var lastReportedDrops: [String: JSON] = [:]
    private var housekeepingStarted = false

    /// How often the health loop looks at the counters, and the longest gap between two health messages.
    package static let healthCheckInterval: Duration = .seconds(3)
    package static let healthMaxInterval: TimeInterval = 60
    /// The longest `transaction` echoed back (it is the requester's tag, not a payload).
    package static let maxTransactionBytes = 128

    package init(hub: GatewayHub) {
        self.hub = hub
    }

    package var subscriptions: [String] { ["\(hub.topics.base)/bridge/request/#"] }
    package var requestNames: [String] { ["info", "devices", "health", "restart", "options"] }

    package func handle(_ event: HubEvent) {
        switch event {
        case .connected:
            publishBridgeInfo()
            publishBridgeDevices()
            startHousekeeping()
        case .inventoryApplied(_, let changed):
            if changed { publishBridgeDevices() }
        case .bridgeInfoChanged:
            publishBridgeInfo()
        default:
            break
        }
    }

    package func receive(_ route: Topics.Inbound, _ message: InboundMessage) -> Bool {
        guard case .request(let name) = route else { return false }
        handleRequest(message, name: name)
        return true
    }

    /// The log level shown in `bridge/info` and the `log_level` select.
    package var currentLogLevel: String { controls?.logLevel.value.rawValue ?? hub.config.logLevel }

    // MARK: - Requests

    private func handleRequest(_ message: InboundMessage, name: String) {
        var reply = Reply(responseTopic: message.responseTopic, correlationData: message.correlationData, bridgeResponse: hub.topics.bridgeResponse(name))
        let context: JSON = ["topic": .string(message.topic)]
        if let refusal = hub.refusal(of: message) { return hub.fail(refusal, device: nil, context: context, reply: reply) }
        // The payload is a JSON object, empty, or a bare string (`device/refresh` accepts the id alone).
        var body: [String: JSONValue] = [:]
        let text = String(decoding: message.payload, as: UTF8.self).trimmingWhitespace()
        if !text.isEmpty {
            switch JSONValue.parse(message.payload) {
            case .success(.object(let object)): body = object
            case .success(.string(let bare)): body = ["id": .string(bare)]
            case .success(let other):
                return hub.fail(.invalidPayload("expected a JSON object, got \(other.brief)"), device: nil, context: context, reply: reply)
            case .failure(let error):
                if String(validating: message.payload, as: UTF8.self) == nil || text.hasPrefix("{") || text.hasPrefix("[") {
                    return hub.fail(error, device: nil, context: context, reply: reply)
                }
                body = ["id": .string(text)]
            }
        }
        if let transaction = body["transaction"] {
            switch transaction {
            case .string(let value) where value.utf8.count <= Self.maxTransactionBytes: reply.transaction = .string(value)
            case .string:
                return hub.fail(.invalidPayload("\"transaction\" is longer than \(Self.maxTransactionBytes) bytes"), device: nil, context: context, reply: reply)
            case .number(let value): reply.transaction = .number(value)
            default: break
            }
        }
        switch name {
        case "info":
            hub.respond(reply, status: "ok", data: infoJSON(), error: nil)
        case "devices":
            hub.respond(reply, status: "ok", data: bridgeDevicesJSON(), error: nil)
        case "health":
            hub.respond(reply, status: "ok", data: healthJSON(), error: nil)
        case "restart":
            restartRequest(reply: reply, context: context)
        case "options":
            optionsRequest(body, reply: reply, context: context)
        default:
            if let owner = hub.requestOwner(name) {
                owner.request(name, body: body, reply: reply, context: context)
            } else if let handlers = vendorHandlers(for: name) {
                vendorRequest(name, body: body, handlers: handlers, reply: reply, context: context)
            } else {
                hub.fail(.unknownRequest(name), device: nil, context: context, reply: reply)
            }
        }
    }

    /// The vendors that answer `name` (`homekit/pair`), or nil when none does.
    private func vendorHandlers(for name: String) -> [any VendorRequestHandling]? {
        let handlers = hub.vendors.values.compactMap { $0 as? any VendorRequestHandling }.filter { $0.requestNames.contains(name) }
        return handlers.isEmpty ? nil : handlers.sorted { $0.instanceID < $1.instanceID }
    }

    /// Hands a vendor's own request to the instance `"vendor"` names (or the only one), and answers with its result.
    private func vendorRequest(_ name: String, body: [String: JSONValue], handlers: [any VendorRequestHandling], reply: Reply, context: JSON) {
        let handler: any VendorRequestHandling
        switch body["vendor"] {
        case .string(let id)?:
            guard let named = handlers.first(where: { $0.instanceID == id }) else {
                return hub.fail(.invalidPayload("no vendor '\(GatewayError.clip(id))' answers \(name); vendors that do: \(handlers.map(\.instanceID).joined(separator: ", "))"),
                                device: nil, context: context, reply: reply)
            }
            handler = named
        case nil where handlers.count == 1:
            handler = handlers[0]
        default:
            return hub.fail(.invalidPayload("\(name) needs \"vendor\": one of \(handlers.map(\.instanceID).joined(separator: ", "))"),
                            device: nil, context: context, reply: reply)
        }
        let hub = self.hub
        hub.tasks.spawn {
            do {
                let data = try await handler.request(name, body: body)
                hub.respond(reply, status: "ok", data: data, error: nil)
            } catch let error as GatewayError {
                hub.fail(error, device: nil, context: context, reply: reply)
            } catch {
                hub.fail(GatewayError(.internal, message: "\(name) failed: \(error)"), device: nil, context: context, reply: reply)
            }
        }
    }

    private func restartRequest(reply: Reply, context: JSON) {
        guard let restart = controls?.restart else {
            return hub.fail(GatewayError(.internal, message: "This process cannot restart itself (it is not the lbs-gateway executable)."),
                            device: nil, context: context, reply: reply)
        }
        hub.logger.notice("restart requested on \(hub.topics.bridgeRequest("restart"))")
        hub.respond(reply, status: "ok", data: ["restart": true], error: nil)
        restart()
    }

    /// `{"log_level":"debug"}` (or zigbee2mqtt's `{"options":{"log_level":"debug"}}`): changes the level at
    /// once, until the next start (the config's `log_level` applies again then).
    private func optionsRequest(_ body: [String: JSONValue], reply: Reply, context: JSON) {
        var options = body
        if case .object(let nested)? = body["options"] { options = nested }
        let levels = BridgeControls.logLevels
        guard let value = options["log_level"] else {
            return hub.fail(.invalidPayload("options needs {\"log_level\":\"<level>\"}; levels: \(levels.joined(separator: ", "))"),
                            device: nil, context: context, reply: reply)
        }
        guard case .string(let word) = value, let level = Logger.Level(rawValue: word), levels.contains(word) else {
            return hub.fail(.invalidPayload("log_level must be one of \(levels.joined(separator: ", ")), got \(value.brief)"),
                            device: nil, context: context, reply: reply)
        }
        guard let controls else {
            return hub.fail(GatewayError(.internal, message: "The log level of this process cannot be changed at runtime."), device: nil, context: context, reply: reply)
        }
        controls.logLevel.value = level
        hub.logger.notice("log level set to \(word)")
        hub.respond(reply, status: "ok", data: ["log_level": .string(word)], error: nil)
        publishBridgeInfo()
    }

    // MARK: - bridge/info and bridge/devices

    private func report() -> BridgeReport {
        var report = BridgeReport()
        let stats = hub.transport.stats
        report.dropped = [
            "inbound_messages": .number(Double(stats.droppedInbound)),
            "vendor_events": .number(Double(hub.eventInbox?.droppedCount ?? 0)),
            "coalesced_vendor_events": .number(Double(hub.eventInbox?.coalescedCount ?? 0)),
            "offline_publishes": .number(Double(stats.droppedOffline)),
            "refused_responses": .number(Double(hub.counters.refusedResponses)),
        ]
        report.queues["vendor_events_waiting"] = .number(Double(hub.eventInbox?.count ?? 0))
        for item in hub.extensions { item.report(into: &report) }
        return report
    }

    package func publishBridgeInfo() {
        let config = hub.config
        let vendorsJSON: [JSON] = config.vendors.map { vendor in
            JSON.object([
                "id": .string(vendor.id), "type": .string(vendor.type),
                "poll_interval": vendor.pollInterval.map(JSON.number) ?? .null,
            ]).compacted
        }
        let report = report()
        let info: JSON = [
            "version": .string(GatewayController.version),
            "base_topic": .string(hub.topics.base), "log_level": .string(currentLogLevel),
            "started_at": .string(ISOTime.format(hub.context.startedAt)),
            "mqtt": ["url": .string(ConfigReader.redactURL(config.mqtt.url)), "version": .string(config.mqtt.version.rawValue),
                     "client_id": .string(config.mqtt.clientID), "retain_state": .bool(config.mqtt.retainState)],
            "homeassistant": ["enabled": .bool(config.homeAssistant.enabled), "discovery_prefix": .string(config.homeAssistant.discoveryPrefix),
                              "discovery_mode": .string(config.homeAssistant.mode.rawValue)],
            "vendors": .array(vendorsJSON),
            "storage": report.storage,
            "dropped": .object(report.dropped),
        ]
        hub.transport.publish(hub.topics.bridgeInfo, info.render(), qos: 1, retain: true)
    }

    private func infoJSON() -> JSON {
        [
            "version": .string(GatewayController.version), "base_topic": .string(hub.topics.base), "log_level": .string(currentLogLevel),
            "vendors": .array(hub.config.vendors.map { ["id": .string($0.id), "type": .string($0.type)] }),
            "devices": .number(Double(hub.devices.count)),
        ]
    }

    package func bridgeDevicesJSON() -> JSON {
        let topics = hub.topics, vendorTypes = hub.vendorTypes
        return .array(hub.devices.values.sorted { $0.id < $1.id }.map { Self.deviceJSON($0, topics: topics, vendorTypes: vendorTypes) })
    }

    /// `bridgeDevicesJSON().render()`, each device built and written on every core (a connect publishes it
    /// before the first state; 1,000 devices took ~130 M instructions on one).
    package func bridgeDevicesText() -> String {
        let topics = hub.topics, vendorTypes = hub.vendorTypes
        let devices = hub.devices.values.sorted { $0.id < $1.id }
        let parts = ParallelMap.map(devices) { Self.deviceJSON($0, topics: topics, vendorTypes: vendorTypes).render() }
        // What rendering the array writes: its items' text between brackets, separated by commas.
        return "[" + parts.joined(separator: ",") + "]"
    }

    private nonisolated static func deviceJSON(_ device: Device, topics: Topics, vendorTypes: [String: String]) -> JSON {
        let capabilities: [JSON] = device.specs.map { spec in
            var entry: [String: JSON] = ["key": .string(spec.name), "writable": .bool(device.isWritable(spec.name)), "label": .string(spec.label)]
            if let unit = spec.unit { entry["unit"] = .string(unit) }
            switch spec.kind {
            case .number(let low, let high):
                entry["type"] = "number"
                if let low { entry["min"] = .number(low) }
                if let high { entry["max"] = .number(high) }
            case .enumeration(let values):
                entry["type"] = "enum"
                entry["values"] = .array(values.map(JSON.string))
                if device.isWritable(spec.name) { entry["commands"] = .array(CommandParser.accepted(spec, values).map(JSON.string)) }
            case .bool: entry["type"] = "bool"
            case .text: entry["type"] = "text"
            case .timestamp: entry["type"] = "timestamp"
            case .color: entry["type"] = "color"
            }
            return .object(entry)
        }
        return JSON.object([
            "id": .string(device.id.rawValue), "name": .string(device.name), "vendor": .string(device.vendorID),
            "vendor_type": .optional(vendorTypes[device.vendorID]), "type": .string(device.type.rawValue),
            "manufacturer": .optional(device.manufacturer), "model": .optional(device.model), "room": .optional(device.room),
            "capabilities": .array(capabilities),
            "event_types": device.eventTypes.map { .array($0.map(JSON.string)) } ?? .null,
            "topics": [
                "state": .string(topics.device(device.id)), "availability": .string(topics.availability(device.id)),
                "set": .string(topics.set(device.id)), "get": .string(topics.get(device.id)),
            ],
        ]).compacted
    }

    private func publishBridgeDevices() {
        hub.transport.publish(hub.topics.bridgeDevices, bridgeDevicesText(), qos: 1, retain: true)
    }

    // MARK: - health and bridge/health

    package func healthJSON() -> JSON {
        let online = hub.availability.values.filter { $0 }.count
        let counters = hub.counters
        let report = report()
        return [
            "uptime_s": .number(hub.now().timeIntervalSince(hub.context.startedAt).rounded()),
            "devices": ["total": .number(Double(hub.devices.count)), "online": .number(Double(online))],
            "commands": ["executed": .number(Double(report.counters["commands_executed"] ?? 0)), "failed": .number(Double(counters.commandsFailed)),
                         "refused": .number(Double(report.counters["commands_refused"] ?? 0))],
            "messages": ["inbound": .number(Double(counters.inboundMessages)), "states_published": .number(Double(report.counters["states_published"] ?? 0)),
                         "counter_dips_held": .number(Double(counters.counterDipsHeld))],
            "dropped": .object(report.dropped),
            "queues": .object(report.queues),
            "storage": report.storage,
            "vendors": .array(hub.vendors.keys.sorted().map { ["id": .string($0), "type": .string(hub.vendorTypes[$0] ?? "")] }),
        ]
    }

    /// Publishes the `health` request's data, retained, every 60 s and when the counters change
    /// (checked every 3 s, so a burst of commands gives one message, not one per command).
    /// Runs as part of the core service until cancelled.
    package func runHealth() async {
        while !Task.isCancelled {
            do { try await hub.clock.sleep(for: Self.healthCheckInterval) } catch { return }
            // The first one goes out from `connected`: nothing is queued for the broker before that.
            if lastHealth != nil { publishBridgeHealth(force: false) }
        }
    }

    package func publishBridgeHealth(force: Bool) {
        var data = healthJSON()
        // Uptime moves every second: it alone is no reason to publish.
        if case .object(var members) = data {
            members["uptime_s"] = nil
            data = .object(members)
        }
        var hasher = Hasher()
        hasher.combine(data.render())
        let digest = hasher.finalize()
        let time = hub.now()
        if !force, let last = lastHealth, last.digest == digest, time.timeIntervalSince(last.at) < Self.healthMaxInterval { return }
        lastHealth = (digest, time)
        hub.transport.publish(hub.topics.bridgeHealth, healthJSON().render(), qos: 1, retain: true)
    }

    // MARK: - Drops and storage: nothing is dropped silently

    /// Starts the periodic self-check once (after the first connect).
    private func startHousekeeping() {
        publishBridgeHealth(force: true)
        guard !housekeepingStarted else { return }
        housekeepingStarted = true
        let clock = hub.clock
        hub.tasks.spawn { [self] in
            while !Task.isCancelled {
                do { try await clock.sleep(for: .seconds(5)) } catch { return }
                housekeeping()
            }
        }
    }

    /// Reports new drops (a log line and `bridge/info`) and storage changes.
    package func housekeeping() {
        hub.emit(.storageHealthChanged)
        let current = report().dropped
        guard current != lastReportedDrops else { return }
        let previous = lastReportedDrops
        lastReportedDrops = current
        let causes: [(key: String, text: String)] = [
            ("inbound_messages", "inbound MQTT message(s) (the gateway fell behind; slow the sender)"),
            ("vendor_events", "vendor event(s) (vendors report faster than the gateway publishes)"),
            ("coalesced_vendor_events", "state update(s) merged into a newer one of the same device while the gateway was behind"),
            ("coalesced_states", "state publish(es) merged per device while the broker connection was behind"),
            ("cache_readings", "history reading(s) (the cache writer fell behind)"),
            ("offline_publishes", "publish(es) while the broker was unreachable"),
            ("refused_responses", "response(s) to refused response topics"),
        ]
        var parts: [String] = []
        for (key, text) in causes {
            let now = Self.count(current[key]), before = Self.count(previous[key])
            if now > before { parts.append("\(Int(now - before)) \(text)") }
        }
        for key in current.keys.sorted() where !causes.contains(where: { $0.key == key }) {
            let now = Self.count(current[key]), before = Self.count(previous[key])
            if now > before { parts.append("\(Int(now - before)) \(key.replacing("_", with: " "))") }
        }
        if !parts.isEmpty { hub.rateLimitedLog("drops", .warning, "dropped " + parts.joined(separator: "; ")) }
        publishBridgeInfo()
    }

    private static func count(_ value: JSON?) -> Double {
        if case .number(let number)? = value { return number }
        return 0
    }
}
