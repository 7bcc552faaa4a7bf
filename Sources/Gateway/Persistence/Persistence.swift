import Cache
import Foundation
import GatewayModel
import Logging
import Synchronization

/// One write-behind batch: everything the controller changed since the last flush.
struct WriteBatch: Sendable {
    var states: [StoredState] = []
    var readings: [Reading] = []
    var upserts: [StoredDevice] = []
    var removals: [String] = []
    var health: [(String, String)] = []

    var isEmpty: Bool { states.isEmpty && readings.isEmpty && upserts.isEmpty && removals.isEmpty && health.isEmpty }
}

/// What the cache held at start-up.
struct CachedSnapshot: Sendable {
    var devices: [Device] = []
    var states: [DeviceID: DeviceState] = [:]
}

/// Whether the cache can be written, as `health` and `bridge/info` show it. Updated by every write
/// (write-behind batches and outbox rows), read by the controller.
public final class StorageHealth: Sendable {
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

/// The gateway's link to the SQLite cache. Writes are batched and done by one task off the
/// controller's actor, so the publish path never waits on the disk; outbox writes are awaited
/// (a command is durable before it is sent).
public final class Persistence: Sendable {
    public let store: GatewayStore
    let logger: Logger
    public let health = StorageHealth()
    private let continuation: AsyncStream<WriteBatch>.Continuation
    private let batches: AsyncStream<WriteBatch>

    public init(store: GatewayStore, logger: Logger) {
        self.store = store
        self.logger = logger
        (batches, continuation) = AsyncStream.makeStream(of: WriteBatch.self, bufferingPolicy: .unbounded)
    }

    public convenience init(path: String, logger: Logger) throws {
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }
        try self.init(store: GatewayStore(path: path), logger: logger)
    }

    func submit(_ batch: WriteBatch) {
        guard !batch.isEmpty else { return }
        continuation.yield(batch)
    }

    /// Writes batches until `finish()`; each batch is one transaction per table group.
    public func run() async {
        for await batch in batches {
            // On a Dispatch thread: an fsync must not hold one of the two cooperative threads.
            _ = try? await store.run { [self] _ in self.write(batch) }
        }
    }

    /// Stops accepting batches; `run()` returns after writing what was submitted.
    public func finish() { continuation.finish() }

    private func write(_ batch: WriteBatch) {
        do {
            if !batch.removals.isEmpty { _ = try store.removeDevices(ids: batch.removals) }
            if !batch.upserts.isEmpty { try store.upsertDevices(batch.upserts) }
            if !batch.states.isEmpty { try store.saveStates(batch.states) }
            if !batch.readings.isEmpty { _ = try store.appendReadings(batch.readings) }
            for (vendor, json) in batch.health { try store.saveVendorHealth(vendorID: vendor, json: json) }
            health.recordSuccess()
        } catch {
            // Logged by the controller when the storage state flips (see `noteStorageChange`), not per failed batch.
            health.recordFailure("cache write failed: \(error)")
        }
    }

    /// Runs bounded retention passes periodically: raw readings roll up into hourly aggregates
    /// after 7 days, aggregates expire after 2 years (energy) or 1 year (environment).
    public func runRetention(every interval: Duration, maxRows: Int, policy: RetentionPolicy = .standard, clock: any Clock<Duration>) async {
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
    func loadSnapshot() -> CachedSnapshot {
        var snapshot = CachedSnapshot()
        do {
            let decoder = JSONDecoder()
            for stored in try store.devices() {
                guard let device = try? decoder.decode(Device.self, from: Data(stored.json.utf8)) else {
                    logger.warning("cached device \(stored.id) is unreadable; skipped")
                    continue
                }
                snapshot.devices.append(device)
            }
            for stored in try store.states() {
                guard let id = DeviceID(validating: stored.deviceID), case .success(.object(let object)) = JSONValue.parse(Array(stored.json.utf8)) else { continue }
                var values: [String: StateValue] = [:]
                for (key, value) in object {
                    switch value {
                    case .number(let n): values[key] = .number(n)
                    case .string(let s): values[key] = .string(s)
                    case .bool(let b): values[key] = .bool(b)
                    default: continue
                    }
                }
                snapshot.states[id] = DeviceState(values: values, lastSeen: stored.sourceTime.map(Date.init(timeIntervalSince1970:)), stale: true)
            }
        } catch {
            logger.error("cannot read the cache: \(error)")
        }
        return snapshot
    }

    static func storedDevice(_ device: Device, now: Date) -> StoredDevice? {
        guard let data = try? JSONEncoder().encode(device) else { return nil }
        return StoredDevice(id: device.id.rawValue, vendorID: device.vendorID, json: String(decoding: data, as: UTF8.self), updatedAt: now.timeIntervalSince1970)
    }

    /// The history rows of one state update: numeric energy and environment keys only.
    static func readings(for id: DeviceID, values: [String: StateValue], at time: Date, into out: inout [Reading]) {
        for (key, value) in values {
            guard let number = value.number, let spec = StateKeys.spec(key), spec.series != .none else { continue }
            let category: ReadingCategory
            switch spec.category {
            case .energy: category = .energy
            case .environment: category = .environment
            default: continue
            }
            out.append(Reading(deviceID: id.rawValue, key: key, time: time.timeIntervalSince1970, value: number,
                               kind: spec.series == .counter ? .counter : .measurement, category: category))
        }
    }
}
