import Foundation
import GatewayModel

/// Device topics: `<base>/device/<id>` (state snapshot), `/availability`, and the vendors' health on
/// `<base>/bridge/vendors/<id>`. Publishes on change, everything again after a (re)connect or a
/// Home Assistant birth.
@GatewayActor
final class StatePublisher: GatewayExtension {
    let hub: GatewayHub
    /// Per device, what a publish needs, computed once (copying a whole `Device` per update would retain each of its strings).
    private var hot: [DeviceID: (topic: String, type: DeviceType)] = [:]
    /// A tick of a polling vendor stamps many devices with one time: format it once.
    private var lastSeenCache: (Date, String)?

    init(hub: GatewayHub) {
        self.hub = hub
    }

    func handle(_ event: HubEvent) {
        switch event {
        case .connected:
            for health in hub.vendorHealth.values.sorted(by: { $0.vendorID < $1.vendorID }) { publishVendorHealth(health) }
            publishAll()
        case .homeAssistantBirth:
            publishAll()
        case .deviceAdded(let device, let restored):
            hot[device.id] = (hub.topics.device(device.id), device.type)
            if !restored { publishAvailability(device.id) }
        case .deviceChanged(let device):
            hot[device.id] = (hub.topics.device(device.id), device.type)
        case .deviceRemoved(let device):
            hot[device.id] = nil
            hub.transport.publish(hub.topics.device(device.id), "", qos: 1, retain: true)
            hub.transport.publish(hub.topics.availability(device.id), "", qos: 1, retain: true)
        case .stateUpdated(let id, _, _, _, _):
            publishState(id)
        case .availabilityChanged(let id, _):
            publishAvailability(id)
        case .vendorHealthChanged(let health, _):
            publishVendorHealth(health)
        default:
            break
        }
    }

    /// Availability before state for each device, so a consumer never sees values of a device it thinks offline.
    private func publishAll() {
        for id in hub.devices.keys.sorted() {
            publishAvailability(id)
            publishState(id)
        }
    }

    private func publishState(_ id: DeviceID) {
        guard let info = hot[id], let state = hub.states[id] else { return }
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
        hub.transport.publish(info.topic, StateSnapshot.render(type: info.type, state: state, lastSeenText: lastSeenText),
                              qos: 0, retain: hub.config.mqtt.retainState)
        hub.counters.statesPublished += 1
    }

    private func publishAvailability(_ id: DeviceID) {
        let online = hub.availability[id] ?? false
        hub.transport.publish(hub.topics.availability(id), online ? #"{"state":"online"}"# : #"{"state":"offline"}"#, qos: 1, retain: true)
    }

    private func publishVendorHealth(_ health: VendorHealth) {
        hub.transport.publish(hub.topics.vendor(health.vendorID), hub.vendorHealthJSON(health).render(), qos: 1, retain: true)
    }
}
