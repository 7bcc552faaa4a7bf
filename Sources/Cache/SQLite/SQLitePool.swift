import CSQLite
import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One WAL database: a writer connection and a few reader connections, each used by one thread at a time.
/// Writes are serialized on the writer; reads run beside them on a snapshot (WAL). The async forms run the work
/// on the pool's own threads (Dispatch), so SQLite's waits (an fsync, a busy lock) never hold a Swift
/// concurrency thread.
final class SQLitePool: @unchecked Sendable {
    // @unchecked: every connection is used only under its own lock.
    private let writer: SQLiteConnection
    private let writerLock = ConnectionLock()
    private let readers: [(connection: SQLiteConnection, lock: ConnectionLock)]
    private let nextReader = Atomic<Int>(0)
    private let writerQueue = DispatchQueue(label: "lbs.cache.writer")
    private let readerQueue = DispatchQueue(label: "lbs.cache.readers", attributes: .concurrent)
    private let commits = Atomic<Int>(0)
    private let closed = Atomic<Bool>(false)

    /// Write transactions committed on the writer since the pool opened (counted by the commit hook, which runs as a
    /// commit begins: a reader may not see the last one yet).
    var committedTransactions: Int { commits.load(ordering: .relaxed) }

    /// Opens (creating if needed) the database at `path` in WAL mode; `prepare` runs on every connection first.
    init(path: String, readerCount: Int, busyTimeoutSeconds: Double, prepare: (SQLiteConnection) throws -> Void) throws {
        let writer = try SQLiteConnection(path: path, readOnly: false, busyTimeoutSeconds: busyTimeoutSeconds)
        do {
            try prepare(writer)
            // WAL lets readers see the last commit while the writer works; it also creates -wal and -shm, which
            // read-only connections need.
            guard try String.fetchOne(writer, sql: "PRAGMA journal_mode = WAL") == "wal" else {
                throw SQLiteError(code: SQLITE_ERROR, message: "the database at \(path) cannot use WAL mode")
            }
        } catch {
            writer.close()
            throw error
        }
        var readers: [(SQLiteConnection, ConnectionLock)] = []
        do {
            for _ in 0..<max(1, readerCount) {
                let reader = try SQLiteConnection(path: path, readOnly: true, busyTimeoutSeconds: busyTimeoutSeconds)
                readers.append((reader, ConnectionLock()))
                try prepare(reader)
            }
        } catch {
            for (reader, _) in readers { reader.close() }
            writer.close()
            throw error
        }
        self.writer = writer
        self.readers = readers
        sqlite3_commit_hook(writer.handle, { context in
            guard let context else { return 0 }
            Unmanaged<SQLitePool>.fromOpaque(context).takeUnretainedValue().commits.add(1, ordering: .relaxed)
            return 0
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    deinit { close() }

    /// Closes every connection (after the work in progress); later accesses fail.
    func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        writerLock.withLock {
            sqlite3_commit_hook(writer.handle, nil, nil)
            writer.close()
        }
        for (reader, lock) in readers { lock.withLock { reader.close() } }
    }

    private func ensureOpen() throws(SQLiteError) {
        if closed.load(ordering: .acquiring) { throw SQLiteError(code: SQLITE_MISUSE, message: "the database is closed") }
    }

    /// Runs `body` on the writer, outside a transaction.
    func writeWithoutTransaction<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try writerLock.withLock {
            try ensureOpen()
            return try body(writer)
        }
    }

    /// Runs `body` in one IMMEDIATE transaction on the writer.
    func write<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try writeWithoutTransaction { db in try db.inTransaction(.immediate) { try body(db) } }
    }

    /// Runs `body` on a reader in a DEFERRED transaction: every statement in it sees the same snapshot.
    func read<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        let start = nextReader.add(1, ordering: .relaxed).oldValue
        // A free reader if there is one, else wait for the next in turn.
        for offset in 0..<readers.count {
            let (reader, lock) = readers[(start + offset) % readers.count]
            if lock.tryLock() {
                defer { lock.unlock() }
                return try readInTransaction(reader, body)
            }
        }
        let (reader, lock) = readers[start % readers.count]
        return try lock.withLock { try readInTransaction(reader, body) }
    }

    private func readInTransaction<T>(_ reader: SQLiteConnection, _ body: (SQLiteConnection) throws -> T) throws -> T {
        try ensureOpen()
        return try reader.inTransaction(.deferred) { try body(reader) }
    }

    /// `writeWithoutTransaction` on the writer's queue, awaited.
    func writeWithoutTransaction<T: Sendable>(_ body: @escaping @Sendable (SQLiteConnection) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            writerQueue.async { [self] in continuation.resume(with: Result { try writeWithoutTransaction(body) }) }
        }
    }

    /// `read` on the readers' queue, awaited.
    func read<T: Sendable>(_ body: @escaping @Sendable (SQLiteConnection) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            readerQueue.async { [self] in continuation.resume(with: Result { try read(body) }) }
        }
    }
}

/// A plain mutex: held across SQLite calls that may block (an fsync), by threads of the pool's queues.
final class ConnectionLock: @unchecked Sendable {
    // @unchecked: the pthread mutex is the synchronization.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

    init() { pthread_mutex_init(mutex, nil) }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func tryLock() -> Bool { pthread_mutex_trylock(mutex) == 0 }
    func unlock() { pthread_mutex_unlock(mutex) }

    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}
