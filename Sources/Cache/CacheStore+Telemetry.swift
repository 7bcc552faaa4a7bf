import Synchronization

/// What the cache writer keeps of the gateway's telemetry: registry changes, latest states, readings and
/// vendor health, written together.
public struct TelemetryBatch: Sendable {
    public var states: [StoredState] = []
    public var readings: [Reading] = []
    public var upserts: [StoredDevice] = []
    public var removals: [String] = []
    /// Serialized health by vendor id.
    public var health: [(vendorID: String, json: String)] = []

    public init() {}

    public var isEmpty: Bool { states.isEmpty && readings.isEmpty && upserts.isEmpty && removals.isEmpty && health.isEmpty }
}

extension CacheStore {
    /// Writes a telemetry batch in ONE transaction that does not wait for the disk.
    ///
    /// The outbox commits with `synchronous = FULL`: a stored command survives a power cut. Telemetry is
    /// written with `synchronous = NORMAL` for this one transaction: it reaches the disk with the next
    /// outbox commit or checkpoint (the WAL is appended in order, so that fsync covers it too), and a power
    /// cut can cost the last moments of readings, never a command and never the database's integrity.
    /// So a command's commit does not queue behind telemetry fsyncs.
    public func writeTelemetry(_ batch: TelemetryBatch) throws(CacheError) {
        guard !batch.isEmpty else { return }
        let readings = batch.readings.filter(Self.isStorable)
        let known = seriesIDs.withLock { $0 }
        let now = options.clock()
        let created: [SeriesKey: Int64] = try writeWithoutTransaction("write telemetry") { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            defer { try? db.execute(sql: "PRAGMA synchronous = FULL") }
            var created: [SeriesKey: Int64] = [:]
            try db.inTransaction(.immediate) {
                if !batch.removals.isEmpty { _ = try Self.remove(batch.removals, in: db) }
                if !batch.upserts.isEmpty { try Self.upsert(batch.upserts, in: db) }
                if !batch.states.isEmpty { try Self.save(batch.states, in: db) }
                if !readings.isEmpty { created = try Self.insert(readings, into: db, knownSeries: known) }
                for (vendorID, json) in batch.health { try Self.saveHealth(vendorID: vendorID, json: json, at: now, in: db) }
            }
            return created
        }
        rememberSeries(created)
    }
}
