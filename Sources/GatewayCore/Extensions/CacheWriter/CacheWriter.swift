import Cache
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import Logging

/// The SQLite cache, behind the core: devices, last states, readings and vendor health are written
/// behind (coalesced, off the core's executor); at start the previous run's devices and states are put
/// back (flagged stale); `history` is answered from it; its writability is reported.
/// In the extension list only with `storage:`.
@GatewayActor
package final class CacheWriter: GatewayExtension {
    package let hub: GatewayHub
    package let persistence: CacheLink
    private var pendingWrites = TelemetryBatch()
    private var dirtyStates: Set<DeviceID> = []
    private var pending = false
    private var lastReportedOK = true

    /// At most one batch a second, sooner when many readings wait.
    package static let flushInterval = Duration.seconds(1)
    package static let readingsPerBatch = 20_000

    package init(hub: GatewayHub, persistence: CacheLink) {
        self.hub = hub
        self.persistence = persistence
    }

    package var requestNames: [String] { ["history"] }

    package func handle(_ event: HubEvent) {
        switch event {
        case .deviceAdded(let device, let restored):
            if !restored { upsert(device) }
        case .deviceChanged(let device):
            upsert(device)
        case .deviceRemoved(let device):
            pendingWrites.removals.append(device.id.rawValue)
            dirtyStates.remove(device.id)
            schedule()
        case .inventoryApplied(_, let changed):
            // The registry is what a restart recovers from (stale states, queued commands): write it now.
            if changed { flush() }
        case .stateUpdated(let id, let update, _, let observedAt, let source):
            if source == .vendor { CacheLink.readings(for: id, values: update, at: observedAt, into: &pendingWrites.readings) }
            dirtyStates.insert(id)
            schedule()
        case .historyReported(let id, let readings):
            pendingWrites.readings += readings.compactMap { CacheLink.reading(for: id, key: $0.key, value: $0.value, at: $0.at) }
            schedule()
        case .vendorHealthChanged(let health, _):
            pendingWrites.health.append((health.vendorID, hub.vendorHealthJSON(health).render()))
            schedule()
        case .storageHealthChanged:
            noteStorageChange()
        default:
            break
        }
    }

    private func upsert(_ device: Device) {
        guard let stored = CacheLink.storedDevice(device, now: hub.now()) else { return }
        pendingWrites.upserts.append(stored)
        schedule()
    }

    /// Puts the previous run's devices and last states back before any vendor answers, flagged
    /// `stale`, so Home Assistant has values (and entities) at once after a reboot or in an outage.
    package func restore() async {
        let persistence = self.persistence
        // Read on the cache's reader threads, not on the gateway's executor: a large cache must not hold the core.
        // `loadSnapshot` logs what it cannot read and returns the rest.
        let snapshot = (try? await persistence.store.runReading { _ in persistence.loadSnapshot() }) ?? CachedSnapshot()
        hub.restore(devices: snapshot.devices, states: snapshot.states)
        hub.logger.info("restored \(hub.devices.count) device(s) from the cache")
    }

    private func schedule() {
        if pendingWrites.readings.count >= Self.readingsPerBatch { return flush() }
        guard !pending else { return }
        pending = true
        let clock = hub.clock
        hub.tasks.spawn { [self] in
            try? await clock.sleep(for: Self.flushInterval)
            flush()
        }
    }

    package func flush() {
        pending = false
        var batch = pendingWrites
        pendingWrites = TelemetryBatch()
        let stamp = hub.now().timeIntervalSince1970
        for id in dirtyStates {
            guard let state = hub.states[id] else { continue }
            batch.states.append(StoredState(deviceID: id.rawValue, json: JSONText.object(state.values),
                                            sourceTime: state.lastSeen?.timeIntervalSince1970, updatedAt: stamp))
        }
        dirtyStates.removeAll()
        persistence.submit(batch)
    }

    package func shutdown() async {
        flush()
    }

    // MARK: - Storage health

    package func report(into report: inout BridgeReport) {
        report.dropped["cache_readings"] = .number(Double(persistence.droppedReadings))
        report.queues["cache_rows_waiting"] = .number(Double(persistence.pendingRows))
        let health = persistence.health.snapshot
        report.storage = JSON.object([
            "state": .string(health.ok ? "ok" : "error"),
            "path": .string(hub.config.storage?.path ?? ""),
            "last_error": health.lastError.map(JSON.string) ?? .null,
            "since": health.since.map { .string(ISOTime.format($0)) } ?? .null,
            "failed_writes": .number(Double(health.failures)),
            "when_storage_fails": .string(hub.config.commands.whenStorageFails.rawValue),
        ]).compacted
    }

    /// Publishes a `storage_state_changed` event and the new `bridge/info` when the storage state flipped.
    private func noteStorageChange() {
        let snapshot = persistence.health.snapshot
        guard snapshot.ok != lastReportedOK else { return }
        lastReportedOK = snapshot.ok
        var report = BridgeReport()
        self.report(into: &report)
        hub.publishEvent(.storageStateChanged, report.storage)
        hub.emit(.bridgeInfoChanged)
        if snapshot.ok {
            hub.logger.notice("the cache can be written again")
        } else {
            let policy = hub.config.commands.whenStorageFails == .send ? "sent unstored" : "refused with storage_unavailable"
            hub.logger.error("the cache cannot be written: \(snapshot.lastError ?? "unknown error"); commands are \(policy) until it recovers")
        }
    }
}
