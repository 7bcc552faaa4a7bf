import Cache
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import Logging
import Synchronization

/// What the cache held at start-up.
package struct CachedSnapshot: Sendable {
    package var devices: [Device] = []
    package var states: [DeviceID: DeviceState] = [:]
}

/// Whether the cache can be written, as `health` and `bridge/info` show it. Updated by every write
/// (write-behind batches and outbox rows), read by the controller.
public final class CacheHealth: Sendable {
    public struct Snapshot: Sendable, Equatable {
        public var ok = true
        /// The latest failure (no secrets: paths and SQLite's reason only).
        public var lastError: String?
        public var since: Date?
        /// Failed writes since start.
        public var failures = 0
    }

    private let state = Mutex(Snapshot())

    public init() {}

    public var snapshot: Snapshot { state.withLock { $0 } }

    public func recordSuccess() {
        state.withLock { state in
            guard !state.ok else { return }
            state.ok = true
            state.since = Date()
        }
    }

    public func recordFailure(_ message: String) {
        state.withLock { state in
            if state.ok { state.since = Date() }
            state.ok = false
            state.lastError = message
            state.failures += 1
        }
    }
}

/// The gateway's link to the SQLite cache. Writes are batched and done by one task off the gateway's
/// executor, so the publish path never waits on the disk (outbox writes are awaited by the command path:
/// a command is durable before it is sent).
///
/// Write-behind is bounded and coalescing: while the writer is busy, new batches merge into one waiting
/// batch (a device's state, a device's registry row and a vendor's health: latest wins), and readings
/// beyond `maxPendingReadings` are dropped and counted (`droppedReadings`). Memory stays bounded by the
/// number of devices whatever the update rate, and shutdown writes one batch, not a backlog.
public final class CacheLink: Sendable {
    public let store: CacheStore
    /// The outbox's durable front (see `OutboxJournal`); nil: each stored command costs a database commit.
    public let journal: OutboxJournal?
    package let logger: Logger
    public let health = CacheHealth()
    /// Readings waiting beyond this many are dropped (the newest) and counted.
    public let maxPendingReadings: Int
    /// The least time between two telemetry transactions. What arrives meanwhile merges into one batch,
    /// so under load the cache costs a few transactions a second, and a command's outbox commit seldom
    /// finds the writer busy with telemetry (the cache lags by at most this much; shutdown writes the rest).
    public let batchInterval: Duration
    private let clock: any Clock<Duration>
    private let pending: Mutex<Pending>

    private struct Pending {
        package var states: [String: StoredState] = [:]
        /// Per device id: its latest registry row, or nil for a removal.
        package var devices: [String: StoredDevice?] = [:]
        package var readings: [Reading] = []
        package var health: [String: String] = [:]
        package var waiter: CheckedContinuation<Void, Never>?
        package var finished = false
        package var droppedReadings = 0

        package var isEmpty: Bool { states.isEmpty && devices.isEmpty && readings.isEmpty && health.isEmpty }
    }

    public init(
        store: CacheStore, logger: Logger, maxPendingReadings: Int = 200_000, batchInterval: Duration = .milliseconds(100),
        clock: any Clock<Duration> = ContinuousClock(), journal: OutboxJournal? = nil
    ) {
        self.store = store
        self.journal = journal
        self.logger = logger
        self.maxPendingReadings = max(1, maxPendingReadings)
        self.batchInterval = batchInterval
        self.clock = clock
        self.pending = Mutex(Pending())
    }

    /// Opens the cache at `path`; with `outboxJournal`, also its outbox journal (a journal that cannot be opened is
    /// logged, and commands are then stored by a database commit each).
    public convenience init(path: String, logger: Logger, outboxJournal: Bool = false) throws {
        let directory = path.deletingLastPathComponent
        if !directory.isEmpty { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }
        // With the journal, opening it replays what a crash left in it (one read of the file, under its lock).
        var options = CacheStore.Options()
        options.replaysOutboxJournal = !outboxJournal
        let store = try CacheStore(path: path, options: options)
        var journal: OutboxJournal?
        if outboxJournal {
            do {
                journal = try store.openOutboxJournal()
            } catch {
                logger.warning("outbox journal unavailable, each stored command costs a database commit: \(error)")
                // What it holds must still reach the outbox (a journal another live process holds is left alone).
                do {
                    try store.replayIdleOutboxJournal()
                } catch {
                    try? store.close()
                    throw error
                }
            }
        }
        self.init(store: store, logger: logger, journal: journal)
    }

    /// Readings dropped because the writer fell too far behind.
    public var droppedReadings: Int { pending.withLock { $0.droppedReadings } }

    /// Rows waiting for the writer now (states, registry rows, readings, health).
    public var pendingRows: Int {
        pending.withLock { $0.states.count + $0.devices.count + $0.readings.count + $0.health.count }
    }

    package func submit(_ batch: TelemetryBatch) {
        guard !batch.isEmpty else { return }
        let waiter: CheckedContinuation<Void, Never>? = pending.withLock { pending in
            guard !pending.finished else { return nil }
            for id in batch.removals {
                pending.devices[id] = .some(nil)
                pending.states[id] = nil
            }
            for device in batch.upserts { pending.devices[device.id] = .some(device) }
            for state in batch.states { pending.states[state.deviceID] = state }
            let room = maxPendingReadings - pending.readings.count
            if batch.readings.count <= room {
                pending.readings.append(contentsOf: batch.readings)
            } else {
                pending.readings.append(contentsOf: batch.readings.prefix(max(0, room)))
                pending.droppedReadings += batch.readings.count - max(0, room)
            }
            for (vendor, json) in batch.health { pending.health[vendor] = json }
            defer { pending.waiter = nil }
            return pending.waiter
        }
        waiter?.resume()
    }

    /// A stored value: a number, string or boolean, or an object of them (`color`); nil for anything else.
    package static func stateValue(_ json: JSONValue) -> StateValue? {
        switch json {
        case .number(let n): .number(n)
        case .string(let s): .string(s)
        case .bool(let b): .bool(b)
        case .object(let members): .object(members.compactMapValues { member in
            if case .object = member { return nil }
            return stateValue(member)
        })
        default: nil
        }
    }

    /// Writes what waits, one transaction each time (`CacheStore.writeTelemetry`), until `finish()`; then writes the
    /// last waiting batch and returns.
    public func run() async {
        while let batch = await next() {
            // Through the cache's writer thread: SQLite's work must not hold one of the two cooperative threads.
            _ = try? await store.run { [self] _ in self.write(batch) }
            if batchInterval > .zero, !pending.withLock({ $0.finished }) { try? await clock.sleep(for: batchInterval) }
        }
    }

    /// The waiting batch, taken whole; nil once finished and nothing waits.
    private func next() async -> TelemetryBatch? {
        while true {
            let taken: TelemetryBatch?? = pending.withLock { pending in
                if !pending.isEmpty { return .some(Self.take(&pending)) }
                return pending.finished ? .some(nil) : nil
            }
            if let taken { return taken }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = pending.withLock { pending -> Bool in
                    if !pending.isEmpty || pending.finished { return true }
                    pending.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        }
    }

    private static func take(_ pending: inout Pending) -> TelemetryBatch {
        var batch = TelemetryBatch()
        for (id, device) in pending.devices {
            if let device { batch.upserts.append(device) } else { batch.removals.append(id) }
        }
        batch.states = Array(pending.states.values)
        batch.readings = pending.readings
        batch.health = pending.health.map { (vendorID: $0.key, json: $0.value) }
        pending.devices.removeAll()
        pending.states.removeAll()
        pending.readings = []
        pending.health.removeAll()
        return batch
    }

    /// Stops accepting batches; `run()` returns after writing what was submitted.
    public func finish() {
        let waiter = pending.withLock { pending in
            pending.finished = true
            defer { pending.waiter = nil }
            return pending.waiter
        }
        waiter?.resume()
    }

    /// How long each telemetry transaction took, until the metrics take them (at most 1,000 kept).
    private let batchDurations = Mutex<[Duration]>([])

    /// The durations of the telemetry transactions since the last call (`lbs_cache_write_batch_seconds`).
    package func takeBatchDurations() -> [Duration] {
        batchDurations.withLock { durations in defer { durations.removeAll() }; return durations }
    }

    private func write(_ batch: TelemetryBatch) {
        do {
            let started = ContinuousClock.now
            try store.writeTelemetry(batch)
            let took = ContinuousClock.now - started
            batchDurations.withLock { if $0.count < 1_000 { $0.append(took) } }
            health.recordSuccess()
        } catch {
            // Logged by the cache writer when the storage state flips (see `noteStorageChange`), not per failed batch.
            health.recordFailure("cache write failed: \(error)")
        }
    }

    /// Runs bounded retention passes periodically: raw readings roll up into hourly aggregates
    /// after 7 days, aggregates expire after 2 years (energy) or 1 year (environment).
    /// The first pass waits `firstAfter` (at most one interval): a start is the busiest moment (the cache read
    /// back, every device published, the first polls), and a pass over a full year of readings competed with it.
    public func runRetention(every interval: Duration, maxRows: Int, policy: RetentionPolicy = .standard, clock: any Clock<Duration>,
                             firstAfter: Duration = .seconds(30)) async {
        do { try await clock.sleep(for: min(firstAfter, interval)) } catch { return }
        while !Task.isCancelled {
            do {
                let report = try await store.run { try $0.runRetention(now: Date().timeIntervalSince1970, policy: policy, maxRows: maxRows) }
                logger.debug("retention: \(report)")
            } catch {
                logger.error("retention failed: \(error)")
            }
            do { try await clock.sleep(for: interval) } catch { return }
        }
    }

    /// Devices and last states from the previous run, for the stale start-up publish.
    package func loadSnapshot() -> CachedSnapshot {
        var snapshot = CachedSnapshot()
        do {
            // Parsed on every core: a restart reads 1,000 devices and their states before it can announce them.
            let storedDevices = try store.devices()
            let devices = ParallelMap.map(storedDevices) { stored -> Device? in
                // The fast reader first; JSONDecoder for whatever it does not take (same result either way).
                (try? JSONValue.parse(Array(stored.json.utf8)).get()).flatMap(Device.init(codableJSON:))
                    ?? (try? JSONDecoder().decode(Device.self, from: Data(stored.json.utf8)))
            }
            for (stored, device) in zip(storedDevices, devices) {
                guard let device else {
                    logger.warning("cached device \(stored.id) is unreadable; skipped")
                    continue
                }
                snapshot.devices.append(device)
            }
            let states = ParallelMap.map(try store.states()) { stored -> (DeviceID, DeviceState)? in
                guard let id = DeviceID(validating: stored.deviceID), case .success(.object(let object)) = JSONValue.parse(Array(stored.json.utf8)) else { return nil }
                let values = object.compactMapValues(Self.stateValue)
                return (id, DeviceState(values: values, lastSeen: stored.sourceTime.map(Date.init(timeIntervalSince1970:)), stale: true))
            }
            for case let (id, state)? in states { snapshot.states[id] = state }
        } catch {
            logger.error("cannot read the cache: \(error)")
        }
        return snapshot
    }

    package static func storedDevice(_ device: Device, now: Date) -> StoredDevice? {
        guard let data = try? JSONEncoder().encode(device) else { return nil }
        return StoredDevice(id: device.id.rawValue, vendorID: device.vendorID, json: String(decoding: data, as: UTF8.self), updatedAt: now.timeIntervalSince1970)
    }

    /// The history rows of one state update: numeric energy and environment keys only.
    package static func readings(for id: DeviceID, values: [String: StateValue], at time: Date, into out: inout [Reading]) {
        for (key, value) in values {
            if let number = value.number, let reading = reading(for: id, key: key, value: number, at: time) { out.append(reading) }
        }
    }

    /// The history row of one value; nil for keys without a history (controls, text, status).
    package static func reading(for id: DeviceID, key: String, value: Double, at time: Date) -> Reading? {
        guard let spec = StateKeys.spec(key), spec.series != .none else { return nil }
        let category: ReadingCategory
        switch spec.category {
        case .energy: category = .energy
        case .environment: category = .environment
        default: return nil
        }
        return Reading(deviceID: id.rawValue, key: key, time: time.timeIntervalSince1970, value: value,
                       kind: spec.series == .counter ? .counter : .measurement, category: category)
    }
}
