#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel

/// Device topics: `<base>/device/<id>` (state snapshot), `/availability`, and the vendors' health on
/// `<base>/bridge/vendors/<id>`. Publishes on change, everything again after a (re)connect or a
/// Home Assistant birth.
///
/// A state never overtakes what was published before it. The MQTT client sends QoS 0 at once but holds QoS 1
/// behind its in-flight window, so in a burst a QoS 0 state would reach the broker before the device's
/// discovery, availability and `bridge/devices` (all QoS 1). A state therefore goes at QoS 1 when the device
/// was announced (or its availability or description changed) since its last state, so a QoS 1 subscriber gets
/// it behind those too, and while the device's last QoS 1 state is not yet acknowledged by the broker. While the
/// connection is down, vendor states are not queued: the connect's republish sends them, in order.
@GatewayActor
package final class StatePublisher: GatewayExtension {
    package let hub: GatewayHub
    /// Per device, everything a state's publish reads and writes, found with one lookup (it runs for every update).
    private var published: [DeviceID: Published] = [:]
    /// Every state is rendered into this one buffer (the connection copies it), so its storage is reused.
    private var snapshot: [UInt8] = []
    /// A tick of a polling vendor stamps many devices with one time: format it once.
    private var lastSeenCache: (Date, String)?
    /// Devices whose state is held back while the connection cannot keep up: latest wins, so memory is
    /// bounded by the number of devices, not by the update rate.
    private var heldBack: Set<DeviceID> = []
    private var drainScheduled = false
    /// States held back since start (each a state superseded by a newer one before it went out, or delayed).
    package private(set) var coalescedStates = 0
    /// Device states published (for `bridge/health` and metrics).
    package private(set) var statesPublished = 0

    private struct Published {
        var topic: String
        var type: DeviceType
        /// The state's keys in the order its snapshot lists them (see `StateSnapshot.render`).
        var keyOrder: [String] = []
        /// How many keys its last published state had; nil when its next state follows a fresh announcement
        /// (discovery, availability, `bridge/devices`) and must go at QoS 1. A key's first value brings its
        /// discovery again, so a state with more keys counts as following one too.
        var keysPublished: Int?
        /// When its last state went at QoS 1: the connection's count of QoS 1 hand-overs right after it. Until the
        /// broker acknowledged that many, the device's next state goes at QoS 1 too, so it cannot overtake it (or
        /// what went before it). A burst of states therefore goes at QoS 0 once each device's announcements are
        /// acknowledged, instead of at QoS 1 as long as anything at all waits in the connection.
        var unacknowledgedMark: UInt64?
    }
    /// Devices restored from the cache with counters, held back at the first connect until the broker's retained
    /// copy of their state was read (`floorRestoredCounters`): the cache may be older than the broker.
    private var awaitingFloor: Set<DeviceID> = []
    private var floorRead = FloorRead.notStarted
    private enum FloorRead { case notStarted, reading, done }

    /// Above this many messages waiting in the connection, vendor states are held back per device
    /// (`mqtt.max_backlog`); they go out again once it is below a quarter of that.
    package let backlogLimit: Int
    package var backlogResume: Int { backlogLimit / 4 }
    /// How often held-back states are looked at: often enough that the connection never runs dry between two
    /// looks (at most 3/4 of `backlogLimit` go out per tick: 75,000/s with the default 500), only while some wait.
    package static let drainTick = Duration.milliseconds(5)

    package init(hub: GatewayHub) {
        self.hub = hub
        backlogLimit = hub.config.mqtt.maxBacklog
    }

    package func handle(_ event: HubEvent) {
        switch event {
        case .connected:
            for health in hub.vendorHealth.values.sorted(by: { $0.vendorID < $1.vendorID }) { publishVendorHealth(health) }
            startFloorRead()
            publishAll()
        case .homeAssistantBirth:
            publishAll()
        case .deviceAdded(let device, let restored):
            describe(device)
            if !restored { publishAvailability(device.id) }
        case .deviceChanged(let device):
            describe(device)
        case .deviceRemoved(let device):
            awaitingFloor.remove(device.id)
            published[device.id] = nil
            heldBack.remove(device.id)
            hub.transport.publish(hub.topics.device(device.id), "", qos: 1, retain: true)
            hub.transport.publish(hub.topics.availability(device.id), "", qos: 1, retain: true)
        case .stateUpdated(let id, _, _, _, let source):
            // A fresh reading is newer than the cache and the broker: it goes out as usual.
            if !awaitingFloor.isEmpty { awaitingFloor.remove(id) }
            // A command's confirmed state never waits behind telemetry, and goes out even while disconnected:
            // its reply (queued until the reconnect) must not arrive before it.
            if source == .vendor, !hub.announcing {
                return
            } else if source == .vendor, !heldBack.isEmpty || hub.transport.outgoingBacklog > backlogLimit {
                holdBack(id)
            } else {
                publishState(id)
            }
        case .availabilityChanged(let id, _):
            if let index = published.index(forKey: id) { published.values[index].keysPublished = nil }
            publishAvailability(id)
        case .vendorHealthChanged(let health, _):
            publishVendorHealth(health)
        case .deviceEvent(let id, let type, let data, let time):
            // Home Assistant's `event` entity reads `event_type`; the rest are its attributes.
            var payload: [String: JSON] = data.mapValues(JSON.init)
            payload["event_type"] = .string(type)
            payload["time"] = .string(ISOTime.format(time))
            hub.transport.publish(hub.topics.deviceEvent(id), JSON.object(payload).render(), qos: 1, retain: false)
        default:
            break
        }
    }

    package func receive(_ route: Topics.Inbound, _ message: InboundMessage) -> Bool {
        guard floorRead == .reading, case .other = route else { return false }
        let prefix = hub.topics.base + "/device/"
        guard message.topic.hasPrefix(prefix), let id = DeviceID(validating: String(message.topic.dropFirst(prefix.count))),
              awaitingFloor.contains(id) else { return false }
        // Only the broker's retained copy from an earlier run counts; our own live messages are not news.
        guard message.retain, !message.payload.isEmpty, message.payload.count <= hub.config.mqtt.maxPayloadBytes,
              case .success(.object(let fields)) = JSONValue.parse(message.payload) else { return true }
        var numbers: [String: Double] = [:]
        for (key, value) in fields { if case .number(let number) = value { numbers[key] = number } }
        hub.floorRestoredCounters(id, atRetained: numbers)
        return true
    }

    /// At the first connect, the broker's retained states of restored devices that have counters are read before
    /// those devices are published (see `GatewayHub.floorRestoredCounters`). Without retained states there is
    /// nothing to read.
    private func startFloorRead() {
        guard floorRead == .notStarted else { return }
        guard hub.config.mqtt.retainState else {
            floorRead = .done
            return
        }
        let restored = hub.states.filter { id, state in
            published[id] != nil && state.stale && state.values.keys.contains { StateKeys.spec($0)?.series == .counter }
        }.map(\.key)
        guard !restored.isEmpty else {
            floorRead = .done
            return
        }
        awaitingFloor.formUnion(restored)
        floorRead = .reading
        let topics = awaitingFloor.sorted().map { hub.topics.device($0) }
        hub.tasks.spawn { [self] in
            // Without a SUBACK the devices stay back until the next connect (a vendor's fresh reading still goes out).
            guard await hub.readRetained(topics) else {
                floorRead = .notStarted
                return
            }
            floorRead = .done
            let held = awaitingFloor
            awaitingFloor.removeAll()
            guard hub.announcing else { return }
            for id in held.sorted() { publishState(id) }
        }
    }

    package func report(into report: inout BridgeReport) {
        report.queues["states_held_back"] = .number(Double(heldBack.count))
        report.dropped["coalesced_states"] = .number(Double(coalescedStates))
        report.counters["states_published"] = statesPublished
    }

    private func holdBack(_ id: DeviceID) {
        if !heldBack.insert(id).inserted { coalescedStates += 1 }
        guard !drainScheduled else { return }
        drainScheduled = true
        let clock = hub.clock
        hub.tasks.spawn { [self] in
            while !Task.isCancelled, !heldBack.isEmpty {
                try? await clock.sleep(for: Self.drainTick)
                drainHeldBack()
            }
            drainScheduled = false
        }
    }

    /// Once the connection drained, publishes each held-back device's latest state, as many as fit.
    private func drainHeldBack() {
        let backlog = hub.transport.outgoingBacklog
        guard backlog <= backlogResume else { return }
        var room = backlogLimit - backlog
        while room > 0, let id = heldBack.popFirst() {
            publishState(id)
            room -= 1
        }
    }

    /// Availability before state for each device, so a consumer never sees values of a device it thinks offline.
    private func publishAll() {
        heldBack.removeAll()
        for index in published.indices { published.values[index].keysPublished = nil }
        for id in hub.devices.keys.sorted() {
            publishAvailability(id)
            if !awaitingFloor.contains(id) { publishState(id) }
        }
    }

    /// A device added or changed: its topic and type; its next state follows a fresh announcement.
    private func describe(_ device: Device) {
        let topic = hub.topics.device(device.id)
        guard let index = published.index(forKey: device.id) else {
            published[device.id] = Published(topic: topic, type: device.type)
            return
        }
        published.values[index].topic = topic
        published.values[index].type = device.type
        published.values[index].keysPublished = nil
    }

    private func publishState(_ id: DeviceID) {
        guard let index = published.index(forKey: id), let state = hub.states[id] else { return }
        var lastSeenText: String?
        if let lastSeen = state.lastSeen {
            if let cached = lastSeenCache, cached.0 == lastSeen {
                lastSeenText = cached.1
            } else {
                let text = ISOTime.format(lastSeen)
                lastSeenCache = (lastSeen, text)
                lastSeenText = text
            }
        }
        // `index` stays valid: nothing here adds or removes a device. The record is changed in place (one access,
        // not a copy of it per field read).
        publish(state, lastSeenText: lastSeenText, record: &published.values[index])
        statesPublished += 1
    }

    private func publish(_ state: DeviceState, lastSeenText: String?, record: inout Published) {
        // QoS 1 joins the client's queue behind every QoS 1 message before it; QoS 0 goes out at once, so only once
        // the device's announcements and its own last QoS 1 state were acknowledged.
        let transport = hub.transport
        let announced = record.keysPublished.map { state.values.count > $0 } ?? true
        let mark = record.unacknowledgedMark
        let behindUnacknowledged = mark.map { $0 > transport.acknowledgementMarks.acknowledged } ?? false
        let qos = announced || behindUnacknowledged ? 1 : 0
        record.keysPublished = state.values.count
        StateSnapshot.render(type: record.type, state: state, lastSeenText: lastSeenText, keyOrder: &record.keyOrder, into: &snapshot)
        transport.publish(record.topic, utf8: snapshot, qos: qos, retain: hub.config.mqtt.retainState)
        if qos == 1 {
            record.unacknowledgedMark = transport.acknowledgementMarks.handedOver
        } else if mark != nil {
            record.unacknowledgedMark = nil
        }
    }

    private func publishAvailability(_ id: DeviceID) {
        // Unknown (a device restored from the cache whose vendor has not answered yet): the broker keeps what
        // the previous run left.
        guard let online = hub.availability[id] else { return }
        hub.transport.publish(hub.topics.availability(id), online ? #"{"state":"online"}"# : #"{"state":"offline"}"#, qos: 1, retain: true)
    }

    private func publishVendorHealth(_ health: VendorHealth) {
        hub.transport.publish(hub.topics.vendor(health.vendorID), hub.vendorHealthJSON(health).render(), qos: 1, retain: true)
    }
}
