import Foundation
import GatewayModel
import Logging

/// Guards on what vendors report before it reaches the registry: counters never run backwards,
/// inventories stay within `max_devices`, and devices published by an earlier run that nobody owns
/// any more are cleared from the broker even without a cache.
extension GatewayController {
    // MARK: - Counters

    /// Home Assistant reads a `total_increasing` value that drops by less than 10 % as a glitch (it logs
    /// "not strictly increasing" and its statistics go negative), and a larger drop as a meter reset.
    /// So a counter reading slightly below the last known one is held at the last value; a drop of 10 %
    /// or more is a real reset and is published as is.
    static let counterResetRatio = 0.9

    func guardCounters(_ id: DeviceID, _ update: inout [String: StateValue]) {
        guard let current = states[id]?.values else { return }
        for (key, value) in update {
            guard let new = value.number, let old = current[key]?.number, new < old,
                  StateKeys.spec(key)?.series == .counter, new >= old * Self.counterResetRatio else { continue }
            update[key] = .number(old)
            counters.counterDipsHeld += 1
            rateLimitedLog("counter-dip", .info, "\(id) reported \(key) \(JSONText.number(new)) below the last value \(JSONText.number(old)); kept \(JSONText.number(old)) (counters never run backwards)", every: 60)
        }
    }

    // MARK: - Inventory bound

    /// At most `max_devices` devices of one vendor (sorted by id, so the same ones stay); the rest are
    /// refused once with an error, not silently.
    func capped(_ list: [Device], vendorID: String) -> [Device] {
        let limit = config.vendors.first { $0.id == vendorID }?.maxDevices ?? 5000
        guard list.count > limit else {
            cappedVendors.remove(vendorID)
            return list
        }
        if cappedVendors.insert(vendorID).inserted {
            logger.error("vendor \(vendorID) reports \(list.count) devices; only the first \(limit) (by id) are used. Raise vendors[].max_devices if that many are real.")
            publishEvent("inventory_truncated", [
                "vendor": .string(vendorID), "reported": .number(Double(list.count)), "max_devices": .number(Double(limit)),
                "error": errorJSON(GatewayError(
                    .badRequest, message: "Vendor '\(vendorID)' reports \(list.count) devices; max_devices is \(limit).",
                    suggestion: "Raise vendors[].max_devices for this vendor if that many devices are real."
                )),
            ])
        }
        return Array(list.sorted { $0.id < $1.id }.prefix(limit))
    }

    // MARK: - Retained topics of devices nobody owns

    /// What the gateway published in an earlier run is still retained on the broker. Right after the first
    /// connect it subscribes for a moment to its own retained availability and discovery topics: devices
    /// found there that no configured vendor reports any more are cleared (no ghost entities), with or without a cache.
    var sweepFilters: [String] {
        var filters = ["\(topics.base)/device/+/availability"]
        if config.homeAssistant.enabled {
            let prefix = config.homeAssistant.discoveryPrefix
            filters.append(config.homeAssistant.mode == .device ? "\(prefix)/device/+/config" : "\(prefix)/+/+/+/config")
        }
        return filters
    }

    /// How long retained messages are collected after subscribing (the broker sends them at once).
    static let sweepDuration = Duration.seconds(3)

    func startRetainedSweep() {
        guard !sweepDone, !sweepingRetained else { return }
        sweepingRetained = true
        transport.subscribe(sweepFilters)
        let clock = self.clock
        Task {
            try? await clock.sleep(for: Self.sweepDuration)
            self.endRetainedSweep()
        }
    }

    func endRetainedSweep() {
        guard sweepingRetained else { return }
        sweepingRetained = false
        sweepDone = true
        transport.unsubscribe(sweepFilters)
        clearOrphans()
    }

    /// A retained message on a sweep filter: remembers devices that are published but not known.
    /// Only messages that point at this gateway's own device topics count (other bridges share the prefix).
    func noteRetained(_ message: InboundMessage) {
        guard sweepingRetained, message.retain, !message.payload.isEmpty else { return }
        let devicePrefix = "\(topics.base)/device/"
        if message.topic.hasPrefix(devicePrefix), message.topic.hasSuffix("/availability") {
            let raw = message.topic.dropFirst(devicePrefix.count).dropLast("/availability".count)
            if let id = DeviceID(validating: String(raw)), devices[id] == nil {
                orphanCandidates[id, default: []].insert(message.topic)
            }
            return
        }
        // Discovery: `…/<base>_<id>/…` in the topic and our state topic in the payload.
        guard message.topic.contains("/\(Slug.make(topics.base))_"), message.payload.count <= config.mqtt.maxPayloadBytes,
              case .success(let json) = JSONValue.parse(message.payload) else { return }
        var stateTopics: [String] = []
        if let topic = json["state_topic"]?.string { stateTopics.append(topic) }
        if case .object(let components)? = json["components"] {
            for component in components.values { if let topic = component["state_topic"]?.string { stateTopics.append(topic) } }
        }
        for stateTopic in stateTopics where stateTopic.hasPrefix(devicePrefix) {
            let raw = String(stateTopic.dropFirst(devicePrefix.count))
            guard let id = DeviceID(validating: raw), devices[id] == nil else { continue }
            orphanCandidates[id, default: []].insert(message.topic)
        }
    }

    /// Clears the topics of candidates whose vendor is gone from the config, or whose vendor delivered its
    /// inventory without them. Candidates of a vendor that has not answered yet wait (it may be down now).
    func clearOrphans() {
        guard sweepDone else { return }
        var cleared: [String] = []
        for (id, foundTopics) in orphanCandidates {
            if devices[id] != nil {
                orphanCandidates[id] = nil
                continue
            }
            let owner = config.vendors.map(\.id).filter { id.rawValue.hasPrefix(Slug.make($0) + "_") }.max { $0.count < $1.count }
            if let owner, !inventoriedVendors.contains(owner) { continue }
            var clear = foundTopics
            clear.insert(topics.device(id))
            clear.insert(topics.availability(id))
            for topic in clear.sorted() { transport.publish(topic, "", qos: 1, retain: true) }
            orphanCandidates[id] = nil
            cleared.append(id.rawValue)
            publishEvent("device_removed", ["id": .string(id.rawValue), "vendor": .optional(owner), "reason": "no configured vendor reports it"])
        }
        if !cleared.isEmpty {
            logger.notice("cleared \(cleared.count) device(s) an earlier run published that no vendor reports now: \(cleared.sorted().prefix(10).joined(separator: ", "))\(cleared.count > 10 ? ", …" : "")")
        }
    }
}
