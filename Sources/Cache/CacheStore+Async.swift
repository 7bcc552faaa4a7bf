import GRDB

/// The connection a `run`/`runReading` body works on: store methods called inside it use this connection
/// instead of asking the pool for one (GRDB's accesses are not reentrant).
enum BoundConnection {
    /// `Database` is not `Sendable`; the box is only read synchronously inside the access that bound it, on the
    /// queue GRDB runs that access on, so the connection never crosses threads.
    final class Box: @unchecked Sendable {
        let database: Database
        init(_ database: Database) { self.database = database }
    }

    @TaskLocal static var bound: Box?

    static var database: Database? { bound?.database }
}

extension CacheStore {
    /// Runs store calls through GRDB's async API, on its writer connection, and awaits their result.
    ///
    /// Every store method blocks while SQLite works, and with `synchronous = FULL` a commit waits for an fsync.
    /// Called from an actor or task directly, they would hold one of the (few) cooperative threads for that
    /// time; here GRDB runs them on its own writer queue while the task is suspended. Each store method called
    /// in `body` keeps its own transaction. Cancelling the caller does not interrupt the work: a write that was
    /// asked for (an outbox mark, the last telemetry batch at shutdown) is carried out.
    ///
    ///     let inserted = try await store.run { try $0.enqueue(entry) }
    public func run<T: Sendable>(
        _ body: @escaping @Sendable (CacheStore) throws -> T
    ) async throws(CacheError) -> T {
        try await access("store call failed") { [self] pool in
            try await pool.writeWithoutTransaction { db in try BoundConnection.$bound.withValue(.init(db)) { try body(self) } }
        }
    }

    /// Like `run`, on one of GRDB's reader connections (a consistent snapshot, beside the writer): for calls that
    /// only read, such as history over a day.
    public func runReading<T: Sendable>(
        _ body: @escaping @Sendable (CacheStore) throws -> T
    ) async throws(CacheError) -> T {
        try await access("store read failed") { [self] pool in
            try await pool.read { db in try BoundConnection.$bound.withValue(.init(db)) { try body(self) } }
        }
    }

    /// An unstructured task does not inherit the caller's cancellation, which GRDB would turn into an interrupted
    /// statement.
    private func access<T: Sendable>(
        _ context: String, _ work: @escaping @Sendable (DatabasePool) async throws -> T
    ) async throws(CacheError) -> T {
        try ensureOpen(context)
        let pool = self.pool
        let result = await Task { () -> Result<T, CacheError> in
            do { return .success(try await work(pool)) } catch { return .failure(CacheError.wrap(error, context)) }
        }.value
        return try result.get()
    }
}
