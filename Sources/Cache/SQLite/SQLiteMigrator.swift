/// Versioned migrations, each applied once in its own transaction and recorded by identifier. The record is the
/// table GRDB's migrator kept (`grdb_migrations`), so files written by earlier releases (through GRDB) go on
/// from where they are.
struct SQLiteMigrator {
    private(set) var migrations: [(identifier: String, migrate: (SQLiteConnection) throws -> Void)] = []

    mutating func registerMigration(_ identifier: String, migrate: @escaping (SQLiteConnection) throws -> Void) {
        migrations.append((identifier, migrate))
    }

    /// The identifiers applied to the database, oldest first (the order they were registered in).
    func appliedMigrations(_ db: SQLiteConnection) throws -> [String] {
        let applied = Set(try appliedIdentifiers(db))
        return migrations.map(\.identifier).filter(applied.contains)
    }

    /// Whether the database holds a migration this release does not know: a newer release wrote it.
    func hasBeenSuperseded(_ db: SQLiteConnection) throws -> Bool {
        let known = Set(migrations.map(\.identifier))
        return try appliedIdentifiers(db).contains { !known.contains($0) }
    }

    /// Applies the migrations not applied yet, in order.
    func migrate(_ pool: SQLitePool) throws {
        try pool.writeWithoutTransaction { db in
            try db.execute(sql: "CREATE TABLE IF NOT EXISTS grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY)")
            let applied = Set(try appliedIdentifiers(db))
            for migration in migrations where !applied.contains(migration.identifier) {
                try db.inTransaction(.immediate) {
                    try migration.migrate(db)
                    try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES (?)", arguments: [migration.identifier])
                }
            }
        }
    }

    private func appliedIdentifiers(_ db: SQLiteConnection) throws -> [String] {
        let exists = try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'grdb_migrations'") ?? 0
        guard exists > 0 else { return [] }
        return try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations")
    }
}
