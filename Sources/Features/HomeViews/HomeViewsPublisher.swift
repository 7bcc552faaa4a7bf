import GatewayCore
import Cache
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import Logging
import VendorKit

/// The home-level views: `<base>/energy/home` (power sums of the energy devices, counters accumulated from
/// their increments: `EnergyAccumulator`) and `<base>/environment/<room>` (a room's readings). Coalesced: a
/// burst of readings gives one update.
///
/// The counters continue across restarts: from the cache (`storage:`) and from the gateway's own retained
/// `energy/home`, read back right after the first connect; `energy/home` goes out only once that read-back is
/// done, so a restart never publishes a total below the one the broker holds.
@GatewayActor
package final class HomeViewsPublisher: GatewayExtension {
    package let hub: GatewayHub
    private let store: CacheStore?
    private var counters = EnergyAccumulator()
    /// The read-back of the retained `energy/home`: not started, running, done.
    private enum ReadBack { case waiting, reading, done }
    private var readBack = ReadBack.waiting
    /// Counters changed since they were last written to the cache.
    private var countersUnsaved = false
    private var saveScheduled = false
    /// How long the retained `energy/home` is waited for after the SUBACK, and the SUBACK at most.
    /// How often accumulated counters are written to the cache (the broker's retained copy is the newer one
    /// after a crash; the larger of the two wins at start).
    package static let saveInterval = Duration.seconds(60)
    /// The cache's key for the counters (`vendor_value`, owner `_energy_home`).
    package nonisolated static let storeOwner = "_energy_home"
    package nonisolated static let storeKey = "counters"
    /// Devices that feed `energy/home`, and each room's environment devices, so the views never scan all devices.
    private var energyDevices: Set<DeviceID> = []
    private var roomMembers: [String: Set<DeviceID>] = [:]
    private var deviceInfo: [DeviceID: (feedsEnergy: Bool, feedsEnvironment: Bool, room: String?)] = [:]
    private var dirtyRooms: Set<String> = []
    private var energyDirty = false
    private var pending = false
    /// How long readings are gathered before the views go out.
    package static let coalesceWindow = Duration.milliseconds(200)

    /// `energy_home` per vendor id: the keys its devices add to `energy/home`.
    package let allowedEnergyKeys: [String: Set<String>]

    package init(hub: GatewayHub, store: CacheStore? = nil) {
        self.hub = hub
        self.store = store
        allowedEnergyKeys = hub.config.energyHomeKeys
        if let store {
            do {
                if let text = try store.storedValue(Self.storeKey, vendorID: Self.storeOwner) { counters.restore(Self.counterValues(Array(text.utf8))) }
            } catch {
                hub.logger.error("cannot read the home energy counters from the cache: \(error); they continue from the broker's retained energy/home")
            }
        }
    }

    package func handle(_ event: HubEvent) {
        switch event {
        case .connected:
            startReadBack()
            publishAll()
        case .homeAssistantBirth:
            publishAll()
        case .deviceAdded(let device, _), .deviceChanged(let device):
            index(device)
        case .deviceRemoved(let device):
            let old = deviceInfo.removeValue(forKey: device.id)
            energyDevices.remove(device.id)
            counters.forget(source: device.id.rawValue)
            if let room = old?.room ?? device.roomSlug { roomMembers[room]?.remove(device.id); dirtyRooms.insert(room) }
            energyDirty = true
            schedule()
        case .stateUpdated(let id, _, let changed, _, _):
            guard changed, let info = deviceInfo[id] else { return }
            if info.feedsEnergy {
                energyDirty = true
                observeCounters(of: id)
            }
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

    /// The device's counter keys (those its vendor may add to the home) into the accumulator.
    private func observeCounters(of id: DeviceID) {
        guard let device = hub.devices[id], let state = hub.states[id] else { return }
        // Cached values are not readings: a source starts counting with its first fresh one.
        if state.stale { return }
        let permitted = allowedEnergyKeys[device.vendorID]
        for key in HomeViews.counterKeys where permitted?.contains(key) ?? true {
            guard let value = state[key]?.number else { continue }
            if counters.observe(source: id.rawValue, key: key, value: value) > 0 { countersUnsaved = true }
        }
        scheduleSave()
    }

    package func receive(_ route: Topics.Inbound, _ message: InboundMessage) -> Bool {
        guard message.topic == hub.topics.energyHome else { return false }
        // Only the broker's retained copy from an earlier run restores; our own live messages are not news.
        if readBack == .reading, message.retain, !message.payload.isEmpty, message.payload.count <= hub.config.mqtt.maxPayloadBytes {
            counters.restore(Self.counterValues(message.payload))
        }
        return true
    }

    /// Right after the first connect: the retained `energy/home` of an earlier run. The broker sends it right
    /// after the SUBACK; it is waited for `GatewayHub.retainedReadGrace` longer (it reaches this extension through the inbox).
    private func startReadBack() {
        guard readBack == .waiting else { return }
        readBack = .reading
        hub.tasks.spawn { [self] in
            guard await hub.readRetained([hub.topics.energyHome]) else {
                // energy/home stays back until the next connect rather than publish totals below the broker's.
                readBack = .waiting
                return
            }
            readBack = .done
            energyDirty = true
            countersUnsaved = true
            flush()
            scheduleSave()
        }
    }

    /// The counter keys of an `energy/home` payload.
    package static func counterValues(_ payload: [UInt8]) -> [String: Double] {
        guard case .success(.object(let fields)) = JSONValue.parse(payload) else { return [:] }
        var values: [String: Double] = [:]
        for key in HomeViews.counterKeys { if case .number(let value)? = fields[key] { values[key] = value } }
        return values
    }

    private func scheduleSave() {
        guard store != nil, countersUnsaved, !saveScheduled, readBack == .done else { return }
        saveScheduled = true
        let clock = hub.clock
        hub.tasks.spawn { [self] in
            try? await clock.sleep(for: Self.saveInterval)
            saveScheduled = false
            await saveCounters()
        }
    }

    private func saveCounters() async {
        guard let store, countersUnsaved, readBack == .done else { return }
        countersUnsaved = false
        let text = JSON.object(counters.totals.mapValues(JSON.number)).render()
        do {
            try await store.run { try $0.storeValue(text, key: Self.storeKey, vendorID: Self.storeOwner) }
        } catch {
            hub.logger.error("cannot store the home energy counters: \(error)")
        }
    }

    package func shutdown() async {
        await saveCounters()
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
        // energy/home waits for the read-back: its counters must continue from what the broker holds.
        if energyDirty, readBack == .done {
            energyDirty = false
            let energy = HomeViews.energy(devices: devices(in: energyDevices), states: hub.states, allowed: allowedEnergyKeys,
                                          counters: counters.totals)
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
