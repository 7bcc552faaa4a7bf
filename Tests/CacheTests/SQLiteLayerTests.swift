@testable import Cache
import CSQLite
import Foundation
import Testing

/// The thin SQLite layer under the cache (Sources/Cache/SQLite): values round-trip exactly, a wrong type or
/// argument count is a clear error, transactions roll back on a throw, readers see committed snapshots, commits
/// are counted, migrations apply once and in order.
@Suite struct SQLiteLayerTests {
    func withPool(_ body: (SQLitePool) throws -> Void) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("lbs-sqlite-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let pool = try SQLitePool(path: directory.appendingPathComponent("t.sqlite").path, readerCount: 2, busyTimeoutSeconds: 1) { _ in }
        defer { pool.close() }
        try pool.writeWithoutTransaction { try $0.execute(sql: "CREATE TABLE t (k TEXT PRIMARY KEY, i INTEGER, r REAL, n TEXT)") }
        try body(pool)
    }

    @Test func valuesRoundTripExactly() throws {
        try withPool { pool in
            let text = "ünïcode 🔒 \"quoted\" 'single' \\ NUL-free"
            try pool.write { db in
                try db.execute(sql: "INSERT INTO t VALUES (?, ?, ?, ?)", arguments: [text, Int64.max, 0.1 + 0.2, nil])
                try db.execute(sql: "INSERT INTO t VALUES (?, ?, ?, ?)", arguments: ["min", Int64.min, -Double.greatestFiniteMagnitude, "x"])
            }
            let rows = try pool.read { try SQLiteRow.fetchAll($0, sql: "SELECT k, i, r, n FROM t ORDER BY i DESC") }
            #expect(rows.count == 2)
            #expect(try rows[0].decode(String.self, atIndex: 0) == text)
            #expect(try rows[0].decode(Int64.self, atIndex: 1) == Int64.max)
            #expect(try rows[0].decode(Double.self, atIndex: 2) == 0.1 + 0.2)
            #expect(try rows[0].decode(String?.self, atIndex: 3) == nil)
            #expect(try rows[1].decode(Int64.self, atIndex: 1) == Int64.min)
            #expect(try rows[1].decode(Double.self, atIndex: 2) == -Double.greatestFiniteMagnitude)
            // fetchOne: nil without a row and for NULL.
            let (null, absent, present, count) = try pool.read { db in
                (try String.fetchOne(db, sql: "SELECT n FROM t WHERE k = ?", arguments: [text]),
                 try String.fetchOne(db, sql: "SELECT n FROM t WHERE k = ?", arguments: ["absent"]),
                 try String.fetchOne(db, sql: "SELECT n FROM t WHERE k = ?", arguments: ["min"]),
                 try Int.fetchOne(db, sql: "SELECT count(*) FROM t"))
            }
            #expect(null == nil && absent == nil && present == "x" && count == 2)
        }
    }

    @Test func aWrongTypeOrArgumentCountIsAClearErrorAndTheConnectionGoesOn() throws {
        try withPool { pool in
            try pool.write { try $0.execute(sql: "INSERT INTO t VALUES ('a', 1, 1.5, NULL)") }
            let mismatch = #expect(throws: SQLiteError.self) {
                try pool.read { try SQLiteRow.fetchOne($0, sql: "SELECT k FROM t")?.decode(Int64.self, atIndex: 0) }
            }
            #expect(mismatch?.isTypeMismatch == true)
            #expect(CacheError.wrap(try #require(mismatch), "read").code == .corruptRow)
            let range = #expect(throws: SQLiteError.self) {
                try pool.write { try $0.execute(sql: "UPDATE t SET i = ? WHERE k = ?", arguments: [2]) }
            }
            #expect(range?.code == SQLITE_RANGE && range?.description.contains("takes 2 arguments") == true)
            let syntax = #expect(throws: SQLiteError.self) { try pool.read { try SQLiteRow.fetchAll($0, sql: "SELEC nothing") } }
            #expect(syntax?.message.contains("syntax error") == true)
            #expect(try pool.read { try Int.fetchOne($0, sql: "SELECT i FROM t WHERE k = 'a'") } == 1)
        }
    }

    @Test func aThrowRollsTheTransactionBackAndCommitsAreCounted() throws {
        struct Refused: Error {}
        try withPool { pool in
            let before = pool.committedTransactions
            try pool.write { try $0.execute(sql: "INSERT INTO t (k) VALUES ('kept')") }
            #expect(throws: Refused.self) {
                try pool.write { db in
                    try db.execute(sql: "INSERT INTO t (k) VALUES ('rolled back')")
                    throw Refused()
                }
            }
            // A duplicate key fails the statement: the transaction is rolled back, the connection usable.
            #expect(throws: SQLiteError.self) { try pool.write { try $0.execute(sql: "INSERT INTO t (k) VALUES ('kept')") } }
            #expect(try pool.read { try String.fetchAll($0, sql: "SELECT k FROM t") } == ["kept"])
            #expect(pool.committedTransactions - before == 1)
        }
    }

    @Test func aReadSeesOneSnapshotWhileTheWriterCommits() throws {
        try withPool { pool in
            try pool.write { try $0.execute(sql: "INSERT INTO t (k, i) VALUES ('a', 1)") }
            let seen = try pool.read { db -> (Int?, Int?) in
                let first = try Int.fetchOne(db, sql: "SELECT sum(i) FROM t")
                try pool.write { try $0.execute(sql: "INSERT INTO t (k, i) VALUES ('b', 2)") }
                return (first, try Int.fetchOne(db, sql: "SELECT sum(i) FROM t"))
            }
            #expect(seen.0 == 1 && seen.1 == 1, "the read's snapshot does not move")
            #expect(try pool.read { try Int.fetchOne($0, sql: "SELECT sum(i) FROM t") } == 3)
        }
    }

    @Test func theAsyncFormsRunOffTheCallersThreadAndReturnTheResult() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("lbs-sqlite-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let pool = try SQLitePool(path: directory.appendingPathComponent("t.sqlite").path, readerCount: 2, busyTimeoutSeconds: 1) { _ in }
        defer { pool.close() }
        try await pool.writeWithoutTransaction { db in try db.execute(sql: "CREATE TABLE t (i INTEGER)") }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for value in 0..<50 {
                group.addTask { try await pool.writeWithoutTransaction { db in try db.execute(sql: "INSERT INTO t VALUES (?)", arguments: [value]) } }
            }
            try await group.waitForAll()
        }
        #expect(try await pool.read { db in try Int.fetchOne(db, sql: "SELECT sum(i) FROM t") } == (0..<50).reduce(0, +))
        pool.close()
        await #expect(throws: SQLiteError.self) { try await pool.read { db in try Int.fetchOne(db, sql: "SELECT 1") } }
    }

    @Test func migrationsApplyOnceInOrderAndANewerFileIsRecognized() throws {
        try withPool { pool in
            var order: [String] = []
            var migrator = SQLiteMigrator()
            migrator.registerMigration("v1") { db in try db.execute(sql: "CREATE TABLE m1 (x)") }
            migrator.registerMigration("v2") { db in try db.execute(sql: "CREATE TABLE m2 (x)") }
            let (appliedBefore, supersededBefore) = try pool.read { db in (try migrator.appliedMigrations(db), try migrator.hasBeenSuperseded(db)) }
            #expect(appliedBefore.isEmpty && !supersededBefore)
            try migrator.migrate(pool)
            try migrator.migrate(pool)
            let applied = try pool.read { db in try migrator.appliedMigrations(db) }
            #expect(applied == ["v1", "v2"])
            order = try pool.read { db in try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE name LIKE 'm%' ORDER BY name") }
            #expect(order == ["m1", "m2"])
            // A migration that fails leaves nothing of itself.
            var failing = migrator
            failing.registerMigration("v3") { db in
                try db.execute(sql: "CREATE TABLE m3 (x)")
                try db.execute(sql: "NOT SQL")
            }
            #expect(throws: SQLiteError.self) { try failing.migrate(pool) }
            let (afterFailure, m3) = try pool.read { db in
                (try failing.appliedMigrations(db), try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master WHERE name = 'm3'"))
            }
            #expect(afterFailure == ["v1", "v2"] && m3 == 0)
            // A release that knows only v1 sees a file a newer one wrote.
            var older = SQLiteMigrator()
            older.registerMigration("v1") { _ in }
            #expect(try pool.read { try older.hasBeenSuperseded($0) })
        }
    }
}

/// A cache written by the release before this layer (through GRDB 7) opens, keeps its rows and takes new writes.
@Suite struct CacheUpgradeTests {
    @Test func aCacheWrittenThroughGRDBOpensWithItsRows() throws {
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/cache/grdb-release-v5.sqlite")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("lbs-upgrade-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("cache.sqlite").path
        try FileManager.default.copyItem(atPath: fixture.path, toPath: path)

        let store = try CacheStore(path: path)
        defer { try? store.close() }
        #expect(try store.appliedMigrations() == ["v1", "v2", "v3", "v4", "v5"])
        #expect(try store.integrityCheck() == "ok")
        #expect(try store.journalMode() == "wal" && store.synchronousMode() == 2)
        #expect(try store.devices().map(\.id) == ["demo_air", "demo_energy", "demo_light", "demo_lock", "demo_plug", "demo_thermostat"])
        #expect(try store.states().count == 6)
        #expect(try store.outboxCounts()[.acked] == 1)
        #expect(try store.vendorHealth().keys.sorted() == ["demo"])
        #expect(try store.tableNames() == ["alert", "device", "device_state", "outbox", "outbox_journal", "reading", "reading_hourly",
                                           "scene", "series", "tls_pin", "vendor_health", "vendor_value"])
        // New writes go on from the old rows.
        try store.saveScene(id: "evening", json: "{}")
        #expect(try store.enqueue(OutboxEntry(id: "after-upgrade", vendorID: "demo", deviceID: "demo_light", json: "{}", createdAt: 1, expiresAt: nil)))
        let entry = try #require(try store.outboxEntry(id: "after-upgrade"))
        #expect(entry.state == .pending && entry.seq > 1)
        #expect(try store.scenes() == ["evening": "{}"])
    }
}
