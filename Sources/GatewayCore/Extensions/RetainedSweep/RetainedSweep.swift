#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import VendorKit
import Logging

/// Devices published by an earlier run that nobody owns any more are cleared from the broker, even without
/// a cache: right after the first connect the gateway subscribes for a moment to its own retained availability
/// and discovery topics, and clears devices found there once their vendor's inventory lacks them (or their
/// vendor is gone from the config). Candidates of a vendor that has not answered yet wait: it may be down now.
/// A vendor removed from the config (its retained `bridge/vendors/<id>`, or its health sensor in the gateway's
/// retained discovery) has that topic cleared and its health sensor removed from Home Assistant.
@GatewayActor
package final class RetainedSweep: GatewayExtension {
    package let hub: GatewayHub
    /// Retained discovery/availability topics of devices the gateway published before but does not know
    /// now (learned from the broker at start), by device id.
    private var orphanCandidates: [DeviceID: Set<String>] = [:]
    /// Vendors an earlier run published health for that are no longer configured.
    private var removedVendors: Set<String> = []
    private var sweepingRetained = false
    private var sweepDone = false
    /// Marks the end of the broker's retained copies on the sweep's filters (see `holdConnect`).
    private let fence: String

    package init(hub: GatewayHub) {
        self.hub = hub
        fence = hub.topics.bridgeFence(UInt64.random(in: 0 ... .max))
    }

    /// The sweep's filters go with the first connect's subscriptions, before anything is published: the broker
    /// then answers with what the previous run left, not with this run's first messages (the gateway device's
    /// discovery, published next, would otherwise replace a removed vendor's health sensor before it is read).
    /// The fence's filter goes last, in the same SUBSCRIBE (over a broker: see `holdsConnect`).
    package var subscriptions: [String] { sweepDone ? [] : sweepFilters + (hub.transport.loopsBack ? [fence] : []) }

    /// The first connect's announcements wait for the sweep (over a broker, which sends the fence back): once the
    /// fence is back, every retained copy is in and the sweep's filters are unsubscribed before the announcements,
    /// so the broker does not echo this run's thousands of discovery and availability messages back (with 5,000
    /// devices that echo overran mosquitto's queue for the gateway and stalled the connection). Costs one round trip.
    package var holdsConnect: Bool { !sweepDone && !sweepingRetained && hub.transport.loopsBack }

    package func holdConnect() async {
        guard holdsConnect else { return }
        sweepingRetained = true
        if await hub.sendFence(fence) {
            endRetainedSweep()
        } else {
            // No fence (a broker or ACL that drops it, or a huge retained set): the sweep collects on for its
            // usual time beside the announcements, as without the hold.
            hub.logger.debug("the retained sweep's fence did not come back within \(GatewayHub.retainedReadGrace); sweeping on")
            scheduleSweepEnd()
        }
    }

    package func handle(_ event: HubEvent) {
        switch event {
        case .connected: startRetainedSweep()
        case .inventoryApplied: if !orphanCandidates.isEmpty { clearOrphans() }
        default: break
        }
    }

    package func receive(_ route: Topics.Inbound, _ message: InboundMessage) -> Bool {
        guard case .other = route else { return false }
        noteRetained(message)
        return true
    }

    /// What the gateway published in an earlier run is still retained on the broker. Right after the first
    /// connect it subscribes for a moment to its own retained availability and discovery topics: devices
    /// found there that no configured vendor reports any more are cleared (no ghost entities), with or without a cache.
    package var sweepFilters: [String] {
        var filters = ["\(hub.topics.base)/device/+/availability", "\(hub.topics.base)/alert/+", hub.topics.vendor("+")]
        if hub.config.homeAssistant.enabled {
            let prefix = hub.config.homeAssistant.discoveryPrefix
            if hub.topics.discoveryNodeID != nil {
                // Both layouts: what an earlier run published without the node level is cleared (see noteRetained).
                filters += ["\(prefix)/+/+/config", "\(prefix)/+/+/+/config"]
            } else {
                filters.append(hub.config.homeAssistant.mode == .device ? "\(prefix)/device/+/config" : "\(prefix)/+/+/+/config")
            }
        }
        return filters
    }

    /// With `homeassistant.node_id` set, a retained discovery message of this gateway under the old layout
    /// (no node level): it would stay at Home Assistant (and at a central broker) beside the new one.
    package func isOldLayoutDiscovery(_ message: InboundMessage) -> Bool {
        guard let node = hub.topics.discoveryNodeID else { return false }
        let prefix = hub.config.homeAssistant.discoveryPrefix + "/"
        guard message.topic.hasPrefix(prefix) else { return false }
        let levels = message.topic.dropFirst(prefix.count).split(separator: "/", omittingEmptySubsequences: false)
        guard levels.count == 3 || levels.count == 4, levels.last == "config", levels[1] != node,
              levels[1].hasPrefix(Slug.make(hub.topics.base) + "_") else { return false }
        // Ours only if it points at our topics (another gateway may share the slug's start).
        return String(decoding: message.payload, as: UTF8.self).contains("\"\(hub.topics.base)/")
    }

    /// How long retained messages are collected after subscribing (the broker sends them at once).
    package static let sweepDuration = Duration.seconds(3)

    package func startRetainedSweep() {
        guard !sweepDone, !sweepingRetained else { return }
        sweepingRetained = true
        scheduleSweepEnd()
    }

    private func scheduleSweepEnd() {
        let clock = hub.clock
        hub.tasks.spawn { [self] in
            try? await clock.sleep(for: Self.sweepDuration)
            endRetainedSweep()
        }
    }

    package func endRetainedSweep() {
        guard sweepingRetained else { return }
        sweepingRetained = false
        sweepDone = true
        hub.transport.unsubscribe(sweepFilters + [fence])
        clearOrphans()
        retireRemovedVendors()
    }

    /// Vendors gone from the config: their retained health is cleared, and Home Assistant is told to remove their
    /// health sensors (`HubEvent.vendorsRetired`). Once cleared, a later start finds nothing to retire.
    package func retireRemovedVendors() {
        guard !removedVendors.isEmpty else { return }
        for vendor in removedVendors.sorted() { hub.transport.publish(hub.topics.vendor(vendor), "", qos: 1, retain: true) }
        hub.emit(.vendorsRetired(removedVendors))
        hub.logger.notice("cleared the health of vendor(s) no longer configured: \(removedVendors.sorted().joined(separator: ", "))")
        removedVendors.removeAll()
    }

    /// A vendor id from `<base>/bridge/vendors/<id>` when that vendor is not configured now.
    package func removedVendor(healthTopic topic: String) -> String? {
        let prefix = hub.topics.vendor("")
        guard topic.hasPrefix(prefix) else { return nil }
        let id = String(topic.dropFirst(prefix.count))
        guard !id.isEmpty, !id.contains("/"), !hub.config.vendors.contains(where: { $0.id == id }) else { return nil }
        return id
    }

    /// A retained message on a sweep filter: remembers devices that are published but not known.
    /// Only messages that point at this gateway's own device topics count (other bridges share the prefix).
    package func noteRetained(_ message: InboundMessage) {
        guard sweepingRetained, message.retain, !message.payload.isEmpty else { return }
        let devicePrefix = "\(hub.topics.base)/device/"
        if message.topic.hasPrefix(hub.topics.vendor("")) {
            if let vendor = removedVendor(healthTopic: message.topic) { removedVendors.insert(vendor) }
            return
        }
        if message.topic.hasPrefix(devicePrefix), message.topic.hasSuffix("/availability") {
            let raw = message.topic.dropFirst(devicePrefix.count).dropLast("/availability".count)
            if let id = DeviceID(validating: String(raw)), hub.devices[id] == nil {
                orphanCandidates[id, default: []].insert(message.topic)
            }
            return
        }
        // An alert's retained state names its device.
        if message.topic.hasPrefix("\(hub.topics.base)/alert/") {
            if message.payload.count <= hub.config.mqtt.maxPayloadBytes, case .success(let json) = JSONValue.parse(message.payload),
               let raw = json["device"]?.string, let id = DeviceID(validating: raw), hub.devices[id] == nil {
                orphanCandidates[id, default: []].insert(message.topic)
            }
            return
        }
        if isOldLayoutDiscovery(message) {
            hub.transport.publish(message.topic, "", qos: 1, retain: true)
            hub.logger.notice("cleared discovery of an earlier run without homeassistant.node_id: \(message.topic)")
            return
        }
        // Discovery: `…/<base>_<id>/…` in the topic and our state topic in the payload.
        guard message.topic.contains("/\(Slug.make(hub.topics.base))_"), message.payload.count <= hub.config.mqtt.maxPayloadBytes,
              case .success(let json) = JSONValue.parse(message.payload) else { return }
        var stateTopics: [String] = []
        if let topic = json["state_topic"]?.string { stateTopics.append(topic) }
        if case .object(let components)? = json["components"] {
            for component in components.values { if let topic = component["state_topic"]?.string { stateTopics.append(topic) } }
        }
        // The gateway device's discovery: a health sensor of a vendor no longer configured.
        for stateTopic in stateTopics { if let vendor = removedVendor(healthTopic: stateTopic) { removedVendors.insert(vendor) } }
        for stateTopic in stateTopics where stateTopic.hasPrefix(devicePrefix) {
            let raw = String(stateTopic.dropFirst(devicePrefix.count))
            guard let id = DeviceID(validating: raw), hub.devices[id] == nil else { continue }
            orphanCandidates[id, default: []].insert(message.topic)
        }
    }

    /// Clears the topics of candidates whose vendor is gone from the config, or whose vendor delivered its
    /// inventory without them. Candidates of a vendor that has not answered yet wait (it may be down now).
    package func clearOrphans() {
        guard sweepDone else { return }
        var cleared: [String] = []
        for (id, foundTopics) in orphanCandidates {
            if hub.devices[id] != nil {
                orphanCandidates[id] = nil
                continue
            }
            let owner = hub.configuredVendor(owning: id.rawValue)
            if let owner, !hub.inventoriedVendors.contains(owner) { continue }
            var clear = foundTopics
            clear.insert(hub.topics.device(id))
            clear.insert(hub.topics.availability(id))
            for topic in clear.sorted() { hub.transport.publish(topic, "", qos: 1, retain: true) }
            orphanCandidates[id] = nil
            cleared.append(id.rawValue)
            hub.publishEvent(.deviceRemoved, ["id": .string(id.rawValue), "vendor": .optional(owner), "reason": "no configured vendor reports it"])
        }
        if !cleared.isEmpty {
            hub.logger.notice("cleared \(cleared.count) device(s) an earlier run published that no vendor reports now: \(cleared.sorted().prefix(10).joined(separator: ", "))\(cleared.count > 10 ? ", …" : "")")
        }
    }
}
