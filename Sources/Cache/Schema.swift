/// Versioned schema. Never edit a registered migration: add the next version instead.
enum Schema {
    static var migrator: SQLiteMigrator {
        var migrator = SQLiteMigrator()
        migrator.registerMigration("v1", migrate: createVersion1)
        migrator.registerMigration("v2", migrate: createVersion2)
        migrator.registerMigration("v3", migrate: createVersion3)
        migrator.registerMigration("v4", migrate: createVersion4)
        migrator.registerMigration("v5", migrate: createVersion5)
        return migrator
    }

    /// The first release. Readings are stored per *series* (one row per device and key) so each raw
    /// sample costs a small integer, a time and a value instead of repeating the device id, key, kind
    /// and category strings: about five times smaller, which decides whether 7 days of raw data fit
    /// on an SD card. Both reading tables are clustered on (series, time) (`WITHOUT ROWID`), which
    /// serves history queries and retention with no extra index.
    private static func createVersion1(_ db: SQLiteConnection) throws {
        try db.execute(sql: """
            CREATE TABLE device (
                id TEXT PRIMARY KEY NOT NULL,
                vendor_id TEXT NOT NULL,
                json TEXT NOT NULL,
                updated_at REAL NOT NULL
            );
            CREATE INDEX device_by_vendor ON device(vendor_id);

            CREATE TABLE device_state (
                device_id TEXT PRIMARY KEY NOT NULL,
                json TEXT NOT NULL,
                source_time REAL,
                updated_at REAL NOT NULL
            );

            CREATE TABLE series (
                id INTEGER PRIMARY KEY,
                device_id TEXT NOT NULL,
                key TEXT NOT NULL,
                kind TEXT NOT NULL CHECK (kind IN ('measurement', 'counter')),
                category TEXT NOT NULL CHECK (category IN ('energy', 'environment')),
                UNIQUE (device_id, key)
            );

            CREATE TABLE reading (
                series_id INTEGER NOT NULL,
                time REAL NOT NULL,
                value REAL NOT NULL,
                PRIMARY KEY (series_id, time)
            ) WITHOUT ROWID;

            CREATE TABLE reading_hourly (
                series_id INTEGER NOT NULL,
                hour_start INTEGER NOT NULL,
                min REAL NOT NULL,
                max REAL NOT NULL,
                avg REAL NOT NULL,
                last REAL NOT NULL,
                last_time REAL NOT NULL,
                sum REAL,
                count INTEGER NOT NULL,
                PRIMARY KEY (series_id, hour_start)
            ) WITHOUT ROWID;

            CREATE TABLE outbox (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                id TEXT NOT NULL UNIQUE,
                vendor_id TEXT NOT NULL,
                device_id TEXT NOT NULL,
                json TEXT NOT NULL,
                created_at REAL NOT NULL,
                expires_at REAL,
                state TEXT NOT NULL DEFAULT 'pending'
                    CHECK (state IN ('pending', 'sending', 'acked', 'failed', 'expired')),
                attempts INTEGER NOT NULL DEFAULT 0,
                last_error TEXT,
                result_json TEXT,
                updated_at REAL NOT NULL
            );
            CREATE INDEX outbox_by_state ON outbox(state, vendor_id, seq);

            CREATE TABLE vendor_health (
                vendor_id TEXT PRIMARY KEY NOT NULL,
                json TEXT NOT NULL,
                updated_at REAL NOT NULL
            );

            CREATE TABLE tls_pin (
                host_port TEXT PRIMARY KEY NOT NULL,
                spki_sha256 TEXT NOT NULL,
                first_seen REAL NOT NULL
            );
            """)
    }

    /// Active alerts (`<base>/alert/<id>`), so a restart neither raises them again nor forgets to clear them.
    private static func createVersion2(_ db: SQLiteConnection) throws {
        try db.execute(sql: """
            CREATE TABLE alert (
                id TEXT PRIMARY KEY NOT NULL,
                json TEXT NOT NULL,
                updated_at REAL NOT NULL
            );
            """)
    }

    /// Small values a vendor keeps across restarts (Sense's per-install device id), by vendor instance and key.
    private static func createVersion3(_ db: SQLiteConnection) throws {
        try db.execute(sql: """
            CREATE TABLE vendor_value (
                vendor_id TEXT NOT NULL,
                key TEXT NOT NULL,
                value TEXT NOT NULL,
                updated_at REAL NOT NULL,
                PRIMARY KEY (vendor_id, key)
            ) WITHOUT ROWID;
            """)
    }

    /// Scenes added by `scene/add` (the config file's scenes are not stored).
    private static func createVersion4(_ db: SQLiteConnection) throws {
        try db.execute(sql: """
            CREATE TABLE scene (
                id TEXT PRIMARY KEY NOT NULL,
                json TEXT NOT NULL,
                updated_at REAL NOT NULL
            );
            """)
    }

    /// The outbox journal's checkpoint (see `OutboxJournal`): one row, written in the transaction that applies
    /// journaled changes; and this database's random id, which every journal record carries.
    private static func createVersion5(_ db: SQLiteConnection) throws {
        try db.execute(sql: """
            CREATE TABLE outbox_journal (
                id INTEGER PRIMARY KEY CHECK (id = 1),
                checkpoint INTEGER NOT NULL,
                database_id INTEGER NOT NULL
            );
            INSERT INTO outbox_journal (id, checkpoint, database_id) VALUES (1, 0, random());
            """)
    }
}
