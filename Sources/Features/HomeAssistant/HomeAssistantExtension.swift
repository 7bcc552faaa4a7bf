import GatewayCore
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import VendorKit
import Logging

/// Home Assistant MQTT discovery: the gateway device, one device (or entity set) per device, the home
/// views; cleared when a device or view goes away; everything again when Home Assistant comes back
/// online (`homeassistant/status` = `online`), after a short random delay.
/// In the extension list only with `homeassistant.enabled`.
@GatewayActor
package final class HomeAssistantExtension: GatewayExtension {
    package let hub: GatewayHub
    package let discovery: HomeAssistantDiscovery
    /// What discovery was last published per device: its topics and a digest of the payloads
    /// (not the payloads themselves: kilobytes per device add up at 1,000 devices), and how many keys its state had
    /// then (nil: it had no state yet). A state only gains keys (until the device is removed, which clears this), so a
    /// state with more keys than that carries a key without its entity.
    private var published: [DeviceID: (topics: [String], digest: Int, reportedKeys: Int?)] = [:]
    /// Home views announced, with the keys their sensors cover.
    private var homeViews: [String: (view: HomeView, keys: [String])] = [:]
    /// Home-view discovery topics the broker holds: announced by this run, or retained from an earlier one (read
    /// during the retained sweep at start). Only these are ever cleared: an empty message for a device Home
    /// Assistant never had makes it warn ("No device components to cleanup").
    private var heldViewTopics: Set<String> = []
    /// The discovery topics of views this run found without readings: an earlier run's retained announcement of
    /// one of them, read later during the sweep, is cleared when it arrives.
    private var emptyViewTopics: Set<String> = []
    private var republishPending = false
    /// Vendors removed from the config whose health sensors Home Assistant is told to remove (this run).
    private var retiredVendors: Set<String> = []

    package init(hub: GatewayHub) {
        self.hub = hub
        let config = hub.config.homeAssistant
        var discovery = HomeAssistantDiscovery(topics: hub.topics, mode: config.mode, version: GatewayController.version)
        discovery.alerts = hub.config.alerts
        self.discovery = discovery
    }

    package var subscriptions: [String] { [hub.config.homeAssistant.statusTopic] }

    package func handle(_ event: HubEvent) {
        switch event {
        case .connected:
            publishGatewayDiscovery()
            // Every device's discovery at once (the bulk of a cold start): built on all cores, published in order.
            let devices = hub.devices.keys.sorted().compactMap { id in hub.devices[id].map { ($0, hub.states[id]) } }
            let built = discovery.messagesInParallel(for: devices)
            for ((device, state), messages) in zip(devices, built) {
                publishDiscovery(device.id, state: state, messages: messages, force: true)
            }
        case .deviceAdded(let device, let restored):
            if !restored { publishDiscovery(device.id, force: false) }
        case .deviceChanged(let device):
            publishDiscovery(device.id, force: false)
        case .stateUpdated(let id, _, _, _, _):
            // A key with its first value (or the device's first state) gets its entity: discovery again, before
            // the state that carries it. Counted, not looked up key by key: this runs for every state.
            guard let index = published.index(forKey: id) else { return }
            if let known = published.values[index].reportedKeys, (hub.states[id]?.values.count ?? 0) <= known { return }
            publishDiscovery(id, force: false)
        case .deviceRemoved(let device):
            for topic in discovery.clearTopics(for: device) { hub.transport.publish(topic, "", qos: 1, retain: true) }
            published[device.id] = nil
        case .homeViewUpdated(let view, let payload):
            homeViewUpdated(view, payload: payload)
        case .bridgeEventPublished(let type, let data, let time):
            if type == "command_failed" { commandError(data, at: time) }
        case .vendorsRetired(let vendors):
            retire(vendors: vendors)
        default:
            break
        }
    }

    package func receive(_ route: Topics.Inbound, _ message: InboundMessage) -> Bool {
        guard case .homeAssistantStatus = route else {
            noteRetainedHomeView(message)
            // Not taken: the retained sweep reads the same messages.
            return false
        }
        birth(message)
        return true
    }

    /// A retained home-view discovery message of an earlier run (the sweep's subscription brings it).
    private func noteRetainedHomeView(_ message: InboundMessage) {
        guard message.retain, !message.payload.isEmpty, message.topic.hasPrefix(hub.config.homeAssistant.discoveryPrefix + "/") else { return }
        let slug = Slug.make(hub.topics.base)
        guard message.topic.contains("/\(slug)_energy_home") || message.topic.contains("/\(slug)_environment_") else { return }
        if emptyViewTopics.contains(message.topic) {
            hub.transport.publish(message.topic, "", qos: 1, retain: true)
        } else {
            heldViewTopics.insert(message.topic)
        }
    }

    /// Discovery goes out at start, on reconnect and when a device's description changes; never with state.
    private func publishDiscovery(_ id: DeviceID, force: Bool) {
        guard let device = hub.devices[id] else { return }
        let state = hub.states[id]
        publishDiscovery(id, state: state, messages: discovery.messages(for: device, reported: .state(state)), force: force)
    }

    private func publishDiscovery(_ id: DeviceID, state: DeviceState?, messages: [HomeAssistantDiscovery.Message], force: Bool) {
        // How many keys have a value; nil until the state topic is published (so the first state, even an empty one, counts).
        let reported = state.map(\.values.count)
        // Over the bytes: String's own hashing normalizes Unicode first, which cost as much as rendering.
        var hasher = Hasher()
        for message in messages {
            Self.combineBytes(of: message.topic, into: &hasher)
            Self.combineBytes(of: message.payload, into: &hasher)
        }
        let digest = hasher.finalize()
        if !force, published[id]?.digest == digest {
            published[id]?.reportedKeys = reported
            return
        }
        // Component mode: entities that disappeared are cleared, not left as ghosts.
        let newTopics = Set(messages.map(\.topic))
        for old in published[id]?.topics ?? [] where !newTopics.contains(old) {
            hub.transport.publish(old, "", qos: 1, retain: true)
        }
        for message in messages { hub.transport.publish(message.topic, message.payload, qos: 1, retain: true) }
        published[id] = (messages.map(\.topic), digest, reported)
    }

    private static func combineBytes(of text: String, into hasher: inout Hasher) {
        var text = text
        text.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        hasher.combine(0xFF as UInt8)
    }

    /// The gateway device; forgets which home views were announced so they go out again with the next
    /// home-view update (after a reconnect the broker may have lost them).
    private func publishGatewayDiscovery() {
        publishBridgeDiscovery()
        homeViews.removeAll()
    }

    private func publishBridgeDiscovery() {
        for message in discovery.bridgeMessages(vendorIDs: hub.config.vendors.map(\.id), removedVendorIDs: retiredVendors) {
            hub.transport.publish(message.topic, message.payload, qos: 1, retain: true)
        }
    }

    /// Vendors an earlier run published that are no longer configured (found by `RetainedSweep`): the gateway
    /// device is announced again with their health sensors as removals.
    private func retire(vendors: Set<String>) {
        let configured = Set(hub.config.vendors.map(\.id))
        let new = vendors.subtracting(configured).subtracting(retiredVendors)
        guard !new.isEmpty else { return }
        retiredVendors.formUnion(new)
        publishBridgeDiscovery()
    }

    /// Called with each fresh home-view payload (nil: the view is gone, e.g. a room without readings).
    /// Discovery changes only when the set of keys changes, never with the values.
    private func homeViewUpdated(_ kind: HomeView, payload: JSON?) {
        var view = kind
        let keys: [String]
        if case .object(let members)? = payload {
            keys = HomeAssistantDiscovery.homeViewKeys(members)
            if case .environment(let room, _) = kind, case .string(let name)? = members["room"] { view = .environment(room: room, name: name) }
        } else {
            keys = []
        }
        let id = view.slug
        let previous = homeViews[id]
        if keys.isEmpty {
            // A room is a device only once it has a reading. Cleared where the broker holds an announcement: this
            // run's, or the previous run's (a room emptied by devices removed at start-up, its vendor gone).
            let possible = if case .energy = view { HomeViews.energyKeys } else { HomeViews.environmentKeys }
            let gone = previous ?? (view, possible.sorted())
            let topics = discovery.homeViewClearTopics(gone.view, keys: gone.keys)
            for topic in topics where heldViewTopics.remove(topic) != nil { hub.transport.publish(topic, "", qos: 1, retain: true) }
            emptyViewTopics.formUnion(topics)
            homeViews[id] = nil
            return
        }
        if let previous, previous.keys == keys, previous.view == view { return }
        let messages = discovery.homeViewMessages(view, keys: keys)
        let kept = Set(messages.map(\.topic))
        if let previous {
            for topic in discovery.homeViewClearTopics(previous.view, keys: previous.keys) where !kept.contains(topic) && heldViewTopics.remove(topic) != nil {
                hub.transport.publish(topic, "", qos: 1, retain: true)
            }
        }
        emptyViewTopics.subtract(kept)
        for message in messages { hub.transport.publish(message.topic, message.payload, qos: 1, retain: true) }
        heldViewTopics.formUnion(kept)
        homeViews[id] = (view, keys)
    }

    /// A refused or failed command of a known device, for its "Command error" event entity: `event_type`, the error's
    /// `code`, `message` and `suggestion`, and the command's `changes` where known. A superseded command is no error.
    private func commandError(_ data: JSON, at time: Date) {
        guard case .object(let fields) = data, case .string(let raw)? = fields["device"], let id = DeviceID(validating: raw),
              hub.devices[id] != nil, case .object(let error)? = fields["error"], case .string(let code)? = error["code"],
              code != GatewayError.Code.superseded.rawValue else { return }
        var payload = error
        payload["event_type"] = .string(HomeAssistantDiscovery.commandErrorType(code))
        payload["time"] = .string(ISOTime.format(time))
        if let changes = fields["changes"] { payload["changes"] = changes }
        if let command = fields["command_id"] { payload["command_id"] = command }
        hub.transport.publish(hub.topics.commandError(id), JSON.object(payload).render(), qos: 1, retain: false)
    }

    /// Home Assistant came (back) online: after a short random delay (so a restart of HA does not
    /// meet a burst from every bridge at once) availability and states go out again.
    private func birth(_ message: InboundMessage) {
        guard String(decoding: message.payload, as: UTF8.self) == "online", !republishPending else { return }
        republishPending = true
        let maxDelay = max(0, hub.config.homeAssistant.republishDelayMax)
        let delay = Double.random(in: (maxDelay / 4)...max(maxDelay / 4, maxDelay))
        let clock = hub.clock
        hub.tasks.spawn { [self] in
            try? await clock.sleep(for: .milliseconds(Int64(delay * 1000)))
            republishPending = false
            // Before the connect's announcements (the first connect's sweep) they are about to go out anyway, and
            // states now would overtake their devices' discovery.
            guard hub.announcing else { return }
            hub.publishBridgeOnline()
            hub.emit(.homeAssistantBirth)
            hub.logger.info("re-published states after Home Assistant came online")
        }
    }
}
