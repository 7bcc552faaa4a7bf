/// The connection a `run`/`runReading` body works on: store methods called inside it use this connection
/// instead of asking the pool for one (a connection's lock is not reentrant).
enum BoundConnection {
    /// `SQLiteConnection` is not `Sendable`; the box is only read synchronously inside the access that bound it, on
    /// the thread that access runs on, so the connection never crosses threads.
    final class Box: @unchecked Sendable {
        let database: SQLiteConnection
        init(_ database: SQLiteConnection) { self.database = database }
    }

    @TaskLocal static var bound: Box?

    static var database: SQLiteConnection? { bound?.database }
}

extension CacheStore {
    /// Runs store calls on the writer connection, on the pool's writer thread, and awaits their result.
    ///
    /// Every store method blocks while SQLite works, and with `synchronous = FULL` a commit waits for an fsync.
    /// Called from an actor or task directly, they would hold one of the (few) cooperative threads for that
    /// time; here the pool runs them on its own thread while the task is suspended. Each store method called
    /// in `body` keeps its own transaction. Cancelling the caller does not interrupt the work: a write that was
    /// asked for (an outbox mark, the last telemetry batch at shutdown) is carried out.
    ///
    ///     let inserted = try await store.run { try $0.enqueue(entry) }
    public func run<T: Sendable>(
        _ body: @escaping @Sendable (CacheStore) throws -> T
    ) async throws(CacheError) -> T {
        try ensureOpen("store call failed")
        do {
            return try await pool.writeWithoutTransaction { [self] db in try BoundConnection.$bound.withValue(.init(db)) { try body(self) } }
        } catch {
            throw CacheError.wrap(error, "store call failed")
        }
    }

    /// Like `run`, on one of the reader connections (a consistent snapshot, beside the writer): for calls that
    /// only read, such as history over a day.
    public func runReading<T: Sendable>(
        _ body: @escaping @Sendable (CacheStore) throws -> T
    ) async throws(CacheError) -> T {
        try ensureOpen("store read failed")
        do {
            return try await pool.read { [self] db in try BoundConnection.$bound.withValue(.init(db)) { try body(self) } }
        } catch {
            throw CacheError.wrap(error, "store read failed")
        }
    }
}
