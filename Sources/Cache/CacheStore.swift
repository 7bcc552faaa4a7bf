#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// The gateway's SQLite cache: device registry, latest states, reading history, command outbox,
/// vendor health and TLS pins, in one WAL database file.
///
/// Every method is synchronous and thread-safe; writes go through the pool's single writer connection
/// (`SQLitePool`, on Debian's libsqlite3), which runs with `synchronous = FULL` so a committed outbox row survives a
/// power cut.
public final class CacheStore: Sendable {
    /// Tuning knobs; the defaults suit an SD-card edge box.
    public struct Options: Sendable {
        /// WAL pages after which SQLite checkpoints by itself (0 disables automatic checkpoints).
        public var walAutoCheckpointPages = 1000
        /// Size the WAL file is truncated to after a checkpoint, in bytes.
        public var journalSizeLimitBytes = 16 * 1024 * 1024
        /// Concurrent reader connections.
        public var maximumReaderCount = 2
        /// Seconds the writer waits for a lock held elsewhere (a checkpoint, the sqlite3 CLI) before failing.
        public var busyTimeoutSeconds: Double = 5
        /// The current time in Unix seconds; injected by tests.
        public var clock: @Sendable () -> Double = { Date().timeIntervalSince1970 }
        /// Whether opening applies what an idle outbox journal beside the file holds (a crashed gateway's commands).
        /// An opener that goes on to `openOutboxJournal()` sets false: that replays the journal under its own lock,
        /// and reading the 1 MiB file twice would be wasted; if it fails, that opener calls
        /// `replayIdleOutboxJournal()`.
        public var replaysOutboxJournal = true

        /// Creates the default options.
        public init() {}
    }

    /// The database file path.
    public let path: String
    let pool: SQLitePool
    let options: Options
    /// Series ids by (device, key, kind, category); filled only after the inserting transaction committed.
    let seriesIDs = Mutex<[SeriesKey: Int64]>([:])
    /// Set by `close()`, so later calls fail with `.closed` instead of SQLite's misuse error.
    let isClosed = Atomic<Bool>(false)
    /// The outbox journal once `openOutboxJournal` opened it; shut down by `close()`.
    let journal = Mutex<OutboxJournal?>(nil)

    /// Write transactions committed since the store was opened: each is an fsync with `synchronous = FULL`,
    /// which is what the command path must keep few of (`lbs-bench storage`, the storage tests).
    public var committedTransactions: Int { pool.committedTransactions }

    /// Opens (creating if needed) the database at `path` with default options, and migrates it.
    public convenience init(path: String) throws(CacheError) {
        try self.init(path: path, options: Options())
    }

    /// Opens (creating if needed) the database at `path` and migrates it to the current schema.
    public init(path: String, options: Options) throws(CacheError) {
        guard !path.isEmpty else { throw CacheError(.invalidInput, "database path is empty") }
        self.path = path
        self.options = options

        Self.restrictPermissions(path)
        do {
            pool = try SQLitePool(path: path, readerCount: options.maximumReaderCount, busyTimeoutSeconds: options.busyTimeoutSeconds) { db in
                try db.execute(sql: "PRAGMA temp_store = MEMORY")
            }
            // SQLite gives -wal and -shm the main file's mode; fix ones an older release left readable.
            Self.restrictPermissions(path)
        } catch {
            throw CacheError.wrap(error, "cannot open database at \(path)", as: .openFailed)
        }

        // The writer is one connection for the pool's life, so these hold for every write.
        // secure_delete = FAST: Debian builds with SECURE_DELETE, which would zero every deleted
        // reading and double the writes of retention on flash.
        do {
            try pool.writeWithoutTransaction { db in
                try db.execute(sql: """
                    PRAGMA synchronous = FULL;
                    PRAGMA secure_delete = FAST;
                    PRAGMA journal_size_limit = \(max(0, options.journalSizeLimitBytes));
                    PRAGMA wal_autocheckpoint = \(max(0, options.walAutoCheckpointPages));
                    """)
            }
        } catch {
            pool.close()
            throw CacheError.wrap(error, "cannot configure database at \(path)", as: .openFailed)
        }

        let migrator = Schema.migrator
        do {
            if try pool.read({ try migrator.hasBeenSuperseded($0) }) {
                throw CacheError(.migrationFailed, "database at \(path) was written by a newer release")
            }
            try migrator.migrate(pool)
        } catch {
            pool.close()
            throw CacheError.wrap(error, "cannot migrate database at \(path)", as: .migrationFailed)
        }

        // Commands a crashed gateway had journaled but not yet written here: whoever opens the file sees them.
        guard options.replaysOutboxJournal else { return }
        do {
            try replayIdleOutboxJournal()
        } catch {
            pool.close()
            throw error
        }
    }

    /// Closes every connection; later calls fail with `.closed`.
    public func close() throws(CacheError) {
        journal.withLock { $0 }?.shutdown()
        pool.close()
        isClosed.store(true, ordering: .releasing)
    }

    // MARK: - Diagnostics

    /// The journal mode (`wal` when healthy).
    public func journalMode() throws(CacheError) -> String {
        try writeWithoutTransaction("read journal mode") { try String.fetchOne($0, sql: "PRAGMA journal_mode") ?? "" }
    }

    /// The writer connection's synchronous level (2 = FULL).
    public func synchronousMode() throws(CacheError) -> Int {
        try writeWithoutTransaction("read synchronous mode") { try Int.fetchOne($0, sql: "PRAGMA synchronous") ?? -1 }
    }

    /// Runs `PRAGMA integrity_check`; returns `"ok"` when the file is sound, else SQLite's findings.
    public func integrityCheck() throws(CacheError) -> String {
        try read("check integrity") { db in
            try String.fetchAll(db, sql: "PRAGMA integrity_check").joined(separator: "\n")
        }
    }

    /// The names of the tables in the file, sorted (SQLite's own and the migration record `grdb_migrations` excluded).
    public func tableNames() throws(CacheError) -> [String] {
        try read("list tables") { db in
            try String.fetchAll(db, sql: """
                SELECT name FROM sqlite_master
                WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE 'grdb_%' ORDER BY name
                """)
        }
    }

    /// The names of the migrations applied to this file, oldest first.
    public func appliedMigrations() throws(CacheError) -> [String] {
        try read("read migrations") { try Schema.migrator.appliedMigrations($0) }
    }

    /// Copies the WAL into the database file and truncates the WAL; call when idle.
    public func checkpoint() throws(CacheError) {
        try writeWithoutTransaction("checkpoint") { db in
            try db.checkpointTruncating()
        }
    }

    // MARK: - Device registry

    /// Inserts or replaces device descriptions in one transaction.
    public func upsertDevices(_ devices: [StoredDevice]) throws(CacheError) {
        guard !devices.isEmpty else { return }
        try write("upsert devices") { db in try Self.upsert(devices, in: db) }
    }

    static func upsert(_ devices: [StoredDevice], in db: SQLiteConnection) throws {
        try executeEach(devices, in: db, sql: """
            INSERT INTO device (id, vendor_id, json, updated_at) VALUES (?, ?, ?, ?)
            ON CONFLICT (id) DO UPDATE SET
                vendor_id = excluded.vendor_id, json = excluded.json, updated_at = excluded.updated_at
            """) { [$0.id, $0.vendorID, $0.json, $0.updatedAt] }
    }

    /// Runs one cached statement for each row.
    static func executeEach<Row>(_ rows: [Row], in db: SQLiteConnection, sql: String, arguments: (Row) -> StatementArguments) throws {
        let statement = try db.cachedStatement(sql: sql)
        for row in rows { try statement.execute(arguments: arguments(row)) }
    }

    /// Deletes devices and their latest states (history stays until retention removes it); returns how many existed.
    @discardableResult
    public func removeDevices(ids: [String]) throws(CacheError) -> Int {
        guard !ids.isEmpty else { return 0 }
        return try write("remove devices") { db in try Self.remove(ids, in: db) }
    }

    static func remove(_ ids: [String], in db: SQLiteConnection) throws -> Int {
        let deleteDevice = try db.cachedStatement(sql: "DELETE FROM device WHERE id = ?")
        let deleteState = try db.cachedStatement(sql: "DELETE FROM device_state WHERE device_id = ?")
        var removed = 0
        for id in ids {
            try deleteDevice.execute(arguments: [id])
            removed += db.changesCount
            try deleteState.execute(arguments: [id])
        }
        return removed
    }

    /// Every stored device description, optionally only one vendor's, ordered by id.
    public func devices(vendorID: String? = nil) throws(CacheError) -> [StoredDevice] {
        try read("read devices") { db in
            let rows: [SQLiteRow]
            if let vendorID {
                rows = try SQLiteRow.fetchAll(
                    db, sql: "SELECT id, vendor_id, json, updated_at FROM device WHERE vendor_id = ? ORDER BY id",
                    arguments: [vendorID])
            } else {
                rows = try SQLiteRow.fetchAll(db, sql: "SELECT id, vendor_id, json, updated_at FROM device ORDER BY id")
            }
            return try rows.map { row in
                StoredDevice(
                    id: try row.decode(String.self, atIndex: 0),
                    vendorID: try row.decode(String.self, atIndex: 1),
                    json: try row.decode(String.self, atIndex: 2),
                    updatedAt: try row.decode(Double.self, atIndex: 3))
            }
        }
    }

    // MARK: - Latest states

    /// Inserts or replaces the latest state of several devices in one transaction.
    public func saveStates(_ states: [StoredState]) throws(CacheError) {
        guard !states.isEmpty else { return }
        try write("save states") { db in try Self.save(states, in: db) }
    }

    static func save(_ states: [StoredState], in db: SQLiteConnection) throws {
        try executeEach(states, in: db, sql: """
            INSERT INTO device_state (device_id, json, source_time, updated_at) VALUES (?, ?, ?, ?)
            ON CONFLICT (device_id) DO UPDATE SET
                json = excluded.json, source_time = excluded.source_time, updated_at = excluded.updated_at
            """) { [$0.deviceID, $0.json, $0.sourceTime, $0.updatedAt] }
    }

    /// Every stored latest state, ordered by device id.
    public func states() throws(CacheError) -> [StoredState] {
        try read("read states") { db in
            try SQLiteRow.fetchAll(
                db, sql: "SELECT device_id, json, source_time, updated_at FROM device_state ORDER BY device_id"
            ).map { row in
                StoredState(
                    deviceID: try row.decode(String.self, atIndex: 0),
                    json: try row.decode(String.self, atIndex: 1),
                    sourceTime: try row.decode(Double?.self, atIndex: 2),
                    updatedAt: try row.decode(Double.self, atIndex: 3))
            }
        }
    }

    // MARK: - Vendor health

    /// Stores the serialized health of one vendor (breaker state, last error).
    public func saveVendorHealth(vendorID: String, json: String) throws(CacheError) {
        let now = options.clock()
        try write("save vendor health") { db in try Self.saveHealth(vendorID: vendorID, json: json, at: now, in: db) }
    }

    static func saveHealth(vendorID: String, json: String, at now: Double, in db: SQLiteConnection) throws {
        try db.execute(
            sql: """
                INSERT INTO vendor_health (vendor_id, json, updated_at) VALUES (?, ?, ?)
                ON CONFLICT (vendor_id) DO UPDATE SET json = excluded.json, updated_at = excluded.updated_at
                """,
            arguments: [vendorID, json, now])
    }

    /// The serialized health of every vendor, by vendor id.
    public func vendorHealth() throws(CacheError) -> [String: String] {
        try read("read vendor health") { db in
            var health: [String: String] = [:]
            for row in try SQLiteRow.fetchAll(db, sql: "SELECT vendor_id, json FROM vendor_health") {
                health[try row.decode(String.self, atIndex: 0)] = try row.decode(String.self, atIndex: 1)
            }
            return health
        }
    }

    // MARK: - Alerts

    /// Stores an active alert (serialized), replacing an earlier row with its id.
    public func saveAlert(id: String, json: String) throws(CacheError) {
        let now = options.clock()
        try write("save alert") { db in
            try db.execute(
                sql: """
                    INSERT INTO alert (id, json, updated_at) VALUES (?, ?, ?)
                    ON CONFLICT (id) DO UPDATE SET json = excluded.json, updated_at = excluded.updated_at
                    """,
                arguments: [id, json, now])
        }
    }

    /// Forgets an alert that cleared.
    public func deleteAlert(id: String) throws(CacheError) {
        try write("delete alert") { db in try db.execute(sql: "DELETE FROM alert WHERE id = ?", arguments: [id]) }
    }

    /// Every active alert, serialized, by id.
    public func alerts() throws(CacheError) -> [String: String] {
        try read("read alerts") { db in
            var alerts: [String: String] = [:]
            for row in try SQLiteRow.fetchAll(db, sql: "SELECT id, json FROM alert") {
                alerts[try row.decode(String.self, atIndex: 0)] = try row.decode(String.self, atIndex: 1)
            }
            return alerts
        }
    }

    // MARK: - TLS pins

    /// The pinned SPKI SHA-256 of a self-signed device endpoint (`host:port`), if one was seen.
    public func pin(for hostPort: String) throws(CacheError) -> String? {
        try read("read TLS pin") { db in
            try String.fetchOne(db, sql: "SELECT spki_sha256 FROM tls_pin WHERE host_port = ?", arguments: [hostPort])
        }
    }

    /// Stores (or deliberately replaces) the pin of `hostPort`.
    public func savePin(hostPort: String, spki: String) throws(CacheError) {
        guard !hostPort.isEmpty, !spki.isEmpty else {
            throw CacheError(.invalidInput, "a TLS pin needs a host:port and a fingerprint")
        }
        let now = options.clock()
        try write("save TLS pin") { db in
            try db.execute(
                sql: """
                    INSERT INTO tls_pin (host_port, spki_sha256, first_seen) VALUES (?, ?, ?)
                    ON CONFLICT (host_port) DO UPDATE SET spki_sha256 = excluded.spki_sha256, first_seen = excluded.first_seen
                    """,
                arguments: [hostPort, spki, now])
        }
    }

    /// Removes the pin of `hostPort` so the next connection pins again; returns the removed pin, if any.
    @discardableResult
    public func deletePin(hostPort: String) throws(CacheError) -> String? {
        try write("delete TLS pin") { db in
            let removed = try String.fetchOne(db, sql: "SELECT spki_sha256 FROM tls_pin WHERE host_port = ?", arguments: [hostPort])
            try db.execute(sql: "DELETE FROM tls_pin WHERE host_port = ?", arguments: [hostPort])
            return removed
        }
    }

    // MARK: - Scenes

    /// Stored scenes: id → JSON.
    public func scenes() throws(CacheError) -> [String: String] {
        try read("read scenes") { db in
            var scenes: [String: String] = [:]
            for row in try SQLiteRow.fetchAll(db, sql: "SELECT id, json FROM scene") {
                scenes[try row.decode(String.self, atIndex: 0)] = try row.decode(String.self, atIndex: 1)
            }
            return scenes
        }
    }

    public func saveScene(id: String, json: String) throws(CacheError) {
        let now = options.clock()
        try write("save scene") { db in
            try db.execute(sql: """
                INSERT INTO scene (id, json, updated_at) VALUES (?, ?, ?)
                ON CONFLICT (id) DO UPDATE SET json = excluded.json, updated_at = excluded.updated_at
                """, arguments: [id, json, now])
        }
    }

    public func deleteScene(id: String) throws(CacheError) {
        try write("delete scene") { db in try db.execute(sql: "DELETE FROM scene WHERE id = ?", arguments: [id]) }
    }

    // MARK: - Vendor values

    /// The value a vendor instance stored under `key`; when there is none, `value` is stored and returned (in
    /// one transaction, so two callers agree on one value).
    public func vendorValue(_ key: String, vendorID: String, storingIfAbsent value: String) throws(CacheError) -> String {
        guard !key.isEmpty, !vendorID.isEmpty, !value.isEmpty else {
            throw CacheError(.invalidInput, "a vendor value needs a vendor id, a key and a value")
        }
        let now = options.clock()
        return try write("keep vendor value") { db in
            if let existing = try String.fetchOne(db, sql: "SELECT value FROM vendor_value WHERE vendor_id = ? AND key = ?", arguments: [vendorID, key]) {
                return existing
            }
            try db.execute(sql: "INSERT INTO vendor_value (vendor_id, key, value, updated_at) VALUES (?, ?, ?, ?)",
                           arguments: [vendorID, key, value, now])
            return value
        }
    }

    /// The value stored under `key` for `vendorID` (a vendor instance, or a part of the gateway such as
    /// `_energy_home`), or nil.
    public func storedValue(_ key: String, vendorID: String) throws(CacheError) -> String? {
        try read("read stored value") { db in
            try String.fetchOne(db, sql: "SELECT value FROM vendor_value WHERE vendor_id = ? AND key = ?", arguments: [vendorID, key])
        }
    }

    /// Stores `value` under `key` for `vendorID`, replacing what was there.
    public func storeValue(_ value: String, key: String, vendorID: String) throws(CacheError) {
        guard !key.isEmpty, !vendorID.isEmpty else { throw CacheError(.invalidInput, "a stored value needs an owner id and a key") }
        let now = options.clock()
        try write("store value") { db in
            try db.execute(sql: """
                INSERT INTO vendor_value (vendor_id, key, value, updated_at) VALUES (?, ?, ?, ?)
                ON CONFLICT (vendor_id, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at
                """, arguments: [vendorID, key, value, now])
        }
    }

    // MARK: - Access helpers

    /// Throws `.closed` once `close()` has run.
    func ensureOpen(_ context: String) throws(CacheError) {
        if isClosed.load(ordering: .acquiring) {
            throw CacheError(.closed, "cannot \(context): the store is closed")
        }
    }

    /// Runs `body` in one write transaction, mapping failures to `CacheError`.
    func write<T>(_ context: String, _ body: (SQLiteConnection) throws -> T) throws(CacheError) -> T {
        try ensureOpen(context)
        do {
            guard let db = BoundConnection.database else { return try pool.write(body) }
            return try db.inTransaction(.immediate) { try body(db) }
        } catch {
            throw CacheError.wrap(error, "cannot \(context)")
        }
    }

    /// Runs `body` on the writer connection outside a transaction.
    func writeWithoutTransaction<T>(_ context: String, _ body: (SQLiteConnection) throws -> T) throws(CacheError) -> T {
        try ensureOpen(context)
        do {
            if let db = BoundConnection.database { return try body(db) }
            return try pool.writeWithoutTransaction(body)
        } catch {
            throw CacheError.wrap(error, "cannot \(context)")
        }
    }

    /// Runs `body` on a reader connection (a consistent snapshot).
    func read<T>(_ context: String, _ body: (SQLiteConnection) throws -> T) throws(CacheError) -> T {
        try ensureOpen(context)
        do {
            if let db = BoundConnection.database { return try body(db) }
            return try pool.read(body)
        } catch {
            throw CacheError.wrap(error, "cannot \(context)")
        }
    }
}

extension CacheStore {
    /// The cache holds vendor health and command payloads: only the gateway's user may read it. Creates the
    /// file 0600 before SQLite does (SQLite then gives -wal/-shm the same mode) and narrows existing files.
    static func restrictPermissions(_ path: String) {
        guard path != ":memory:", !path.hasPrefix("file:") else { return }
        let descriptor = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        if descriptor >= 0 { _ = Glibc.close(descriptor) }
        for file in [path, path + "-wal", path + "-shm"] {
            _ = chmod(file, 0o600)
        }
    }
}
