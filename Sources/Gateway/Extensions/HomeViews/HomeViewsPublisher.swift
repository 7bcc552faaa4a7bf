import Foundation
import GatewayModel
import VendorKit

/// The home-level views: `<base>/energy/home` (sums of the energy devices) and
/// `<base>/environment/<room>` (a room's readings). Coalesced: a burst of readings gives one update.
@GatewayActor
final class HomeViewsPublisher: GatewayExtension {
    let hub: GatewayHub
    /// Devices that feed `energy/home`, and each room's environment devices, so the views never scan all devices.
    private var energyDevices: Set<DeviceID> = []
    private var roomMembers: [String: Set<DeviceID>] = [:]
    private var deviceInfo: [DeviceID: (feedsEnergy: Bool, feedsEnvironment: Bool, room: String?)] = [:]
    private var dirtyRooms: Set<String> = []
    private var energyDirty = false
    private var pending = false
    /// How long readings are gathered before the views go out.
    static let coalesceWindow = Duration.milliseconds(200)

    /// `energy_home` per vendor id: the keys its devices add to `energy/home`.
    let allowedEnergyKeys: [String: Set<String>]

    init(hub: GatewayHub) {
        self.hub = hub
        var allowed: [String: Set<String>] = [:]
        for vendor in hub.config.vendors { if let keys = vendor.energyHome { allowed[vendor.id] = keys } }
        allowedEnergyKeys = allowed
    }

    func handle(_ event: HubEvent) {
        switch event {
        case .connected, .homeAssistantBirth:
            publishAll()
        case .deviceAdded(let device, _), .deviceChanged(let device):
            index(device)
        case .deviceRemoved(let device):
            let old = deviceInfo.removeValue(forKey: device.id)
            energyDevices.remove(device.id)
            if let room = old?.room ?? device.roomSlug { roomMembers[room]?.remove(device.id); dirtyRooms.insert(room) }
            energyDirty = true
            schedule()
        case .stateUpdated(let id, _, let changed, _, _):
            guard changed, let info = deviceInfo[id] else { return }
            if info.feedsEnergy { energyDirty = true }
            if info.feedsEnvironment, let room = info.room { dirtyRooms.insert(room) }
            if energyDirty || !dirtyRooms.isEmpty { schedule() }
        default:
            break
        }
    }

    private func index(_ device: Device) {
        if let old = deviceInfo[device.id]?.room, old != device.roomSlug { roomMembers[old]?.remove(device.id) }
        let permitted = allowedEnergyKeys[device.vendorID]
        let info = (feedsEnergy: device.keys.contains { HomeViews.energyKeys.contains($0) && (permitted?.contains($0) ?? true) },
                    feedsEnvironment: device.keys.contains(where: HomeViews.environmentKeys.contains), room: device.roomSlug)
        deviceInfo[device.id] = info
        if info.feedsEnergy { energyDevices.insert(device.id) } else { energyDevices.remove(device.id) }
        if let room = info.room { roomMembers[room, default: []].insert(device.id) }
    }

    private func schedule() {
        guard !pending else { return }
        pending = true
        let clock = hub.clock
        hub.tasks.spawn { [self] in
            try? await clock.sleep(for: Self.coalesceWindow)
            flush()
        }
    }

    private func flush() {
        pending = false
        let topics = hub.topics
        if energyDirty {
            energyDirty = false
            let energy = HomeViews.energy(devices: devices(in: energyDevices), states: hub.states, allowed: allowedEnergyKeys)
            if let payload = energy {
                hub.transport.publish(topics.energyHome, payload.render(), qos: 0, retain: true)
            }
            hub.emit(.homeViewUpdated(.energy, payload: energy))
        }
        let rooms = dirtyRooms
        dirtyRooms.removeAll()
        for room in rooms.sorted() {
            let payload = HomeViews.environment(room: room, devices: devices(in: roomMembers[room] ?? []), states: hub.states)
            hub.transport.publish(topics.environment(room: room), payload?.render() ?? "", qos: 0, retain: true)
            hub.emit(.homeViewUpdated(.environment(room: room, name: room), payload: payload))
        }
    }

    private func devices(in ids: Set<DeviceID>) -> [DeviceID: Device] {
        var subset: [DeviceID: Device] = [:]
        subset.reserveCapacity(ids.count)
        for id in ids { subset[id] = hub.devices[id] }
        return subset
    }

    private func publishAll() {
        energyDirty = true
        dirtyRooms.formUnion(hub.devices.values.compactMap(\.roomSlug))
        flush()
    }
}
