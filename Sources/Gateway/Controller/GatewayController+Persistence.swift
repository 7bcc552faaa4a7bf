import Cache
import Foundation
import GatewayModel
import Logging

extension GatewayController {
    /// Puts the previous run's devices and last states back before any vendor answers, flagged
    /// `stale`, so Home Assistant has values (and entities) at once after a reboot or in an outage.
    /// Devices of vendors that are no longer configured are removed, with their topics.
    public func restoreFromCache() async {
        guard let persistence else { return }
        // Read on a Dispatch thread, not on the actor's executor: a large cache must not hold the core.
        let snapshot = await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: persistence.loadSnapshot()) }
        }
        let configured = Set(config.vendors.map(\.id))
        for device in snapshot.devices {
            guard configured.contains(device.vendorID) else {
                store(device)
                removeDevice(device)
                continue
            }
            store(device)
            // Offline until its vendor answers: the cached values are shown (stale), not claimed live.
            availability[device.id] = false
            if var state = snapshot.states[device.id] {
                state.stale = true
                states[device.id] = state
            }
        }
        logger.info("restored \(devices.count) device(s) from the cache")
    }

    /// Coalesces cache writes: at most one batch a second (sooner when many readings wait).
    func schedulePersist() {
        if pendingWrites.readings.count >= 20_000 { return flushPersistence() }
        guard !persistPending else { return }
        persistPending = true
        let clock = self.clock
        Task {
            try? await clock.sleep(for: .seconds(1))
            self.flushPersistence()
        }
    }

    func flushPersistence() {
        persistPending = false
        guard let persistence else { return }
        var batch = pendingWrites
        pendingWrites = WriteBatch()
        let stamp = now().timeIntervalSince1970
        for id in dirtyStates {
            guard let state = states[id] else { continue }
            batch.states.append(StoredState(deviceID: id.rawValue, json: JSONText.object(state.values),
                                            sourceTime: state.lastSeen?.timeIntervalSince1970, updatedAt: stamp))
        }
        dirtyStates.removeAll()
        persistence.submit(batch)
    }

    /// Writes what is pending; used at shutdown.
    public func flushForShutdown() {
        flushPersistence()
    }
}
