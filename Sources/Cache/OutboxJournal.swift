#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// The outbox's durable front: a preallocated file beside the database that new outbox changes are appended to
/// with `O_DSYNC`, before the SQLite outbox gets them in a later, shared commit.
///
/// Why: a command must be on disk before it can be lost, but a SQLite commit per command (WAL frames for the
/// table and index pages, then an fsync) costs about twice the CPU and wall time of one small synchronous write
/// to blocks that already exist, and on a two-core box that CPU is taken from the vendor exchange the command
/// waits for. Appends that arrive while one is written share the next write (group commit).
///
/// The record: magic (4 bytes, with 0xFF and 0xFE, which UTF-8 text never holds), the database's journal id (8),
/// sequence number (8), payload length (4), CRC-32 of id, sequence, length and payload (4), payload (the changes,
/// `OutboxChange` encoded below). A record of another database (a journal left beside a deleted or replaced
/// file) ends the scan like a torn one. The file is zeroed where it was used at every open (after the replay)
/// and at a clean shutdown, so a backup restored while the gateway is stopped meets an empty journal.
/// Little-endian. Records are contiguous from offset 0; a torn or never-written record ends the scan.
///
/// Safety rests on one number: the SQLite outbox stores, in the transaction that writes a batch of changes,
/// the highest sequence number whose changes that batch (or an earlier one) holds (`journal_checkpoint`).
/// Records at or below it are never applied again, so a replay applies each change exactly once. The file is
/// reused from offset 0 only when every record in it is at or below the checkpoint.
///
/// One process owns the journal (an exclusive `flock`); `CacheStore` replays a journal nobody holds when it
/// opens the database, so whatever opens the file after a crash sees every durable command.
public final class OutboxJournal: Sendable {
    /// 1 MiB: thousands of commands between two SQLite commits, which come every 50 ms under load.
    public static let defaultCapacity = 1 << 20
    static let magic: UInt32 = 0xFEFF_4A4F
    static let headerSize = 28

    /// The journal file's path for a database at `databasePath`.
    public static func path(forDatabase databasePath: String) -> String { databasePath + "-outbox" }

    /// The file's path.
    public let path: String
    /// Its size: a record that does not fit behind the last one waits for the checkpoint (see `append`).
    public let capacity: Int
    /// Below this much free space on its file system the journal takes nothing (`diskLow`).
    public let reserveBytes: Int
    private let descriptor: Int32
    /// The database's journal id (`outbox_journal.database_id`), in every record.
    private let database: UInt64
    private let state: Mutex<State>
    private let signal = ThreadSignal()

    private struct State {
        /// The next record's sequence number and where it goes.
        var nextSequence: UInt64
        var offset = 0
        /// The end of the part of the file this run wrote (zeroed at a clean shutdown).
        var used = 0
        /// Every record at or below this is in the SQLite outbox.
        var checkpoint: UInt64
        /// Records waiting for the writer thread, in sequence order.
        var queue: [Queued] = []
        /// Set by a failed write: every later append fails too (the caller falls back to SQLite commits).
        var failure: String?
        var closed = false
        var descriptorClosed = false
    }

    private struct Queued {
        var offset: Int
        var bytes: [UInt8]
        var continuation: CheckedContinuation<AppendResult, Never>
    }

    /// What an append came to.
    public enum AppendResult: Sendable, Equatable {
        /// On disk (the write returned after the data reached the device), with this sequence number.
        case durable(UInt64)
        /// The file has no room until the SQLite outbox catches up (`checkpointed(through:)`): nothing was written.
        case noRoom
        /// The file system holding the journal (and the database beside it) has less than `reserveBytes` free:
        /// nothing was written. The database is about to fail; a commit of its own tells the truth.
        case diskLow
        /// The write failed, or an earlier one did; the reason, and the record's sequence number if it had one.
        /// Nothing may be assumed about the record: it must not count as stored.
        case failed(String, sequence: UInt64?)
    }

    /// Opens (creating and preallocating with zeros if needed) the journal at `path` and takes its lock, then hands
    /// its intact records to `replay`, which applies those above the SQLite checkpoint and returns the checkpoint
    /// after that. The first append goes to offset 0 with a sequence number above every record in the file.
    init(path: String, database: UInt64, capacity: Int, reserveBytes: Int = 4 << 20,
         replay: ([(sequence: UInt64, payload: ArraySlice<UInt8>)]) throws -> UInt64) throws(CacheError) {
        self.path = path
        self.database = database
        self.capacity = max(capacity, 4096)
        self.reserveBytes = reserveBytes
        let fd = open(path, O_RDWR | O_CREAT | O_DSYNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw CacheError(.openFailed, "cannot open the outbox journal at \(path): \(Self.errnoText())") }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            throw CacheError(.openFailed, "the outbox journal at \(path) is in use by another process")
        }
        let checkpoint: UInt64
        let highest: UInt64
        do {
            let (records, end) = Self.scan(try Self.readAll(fd, path: path), database: database)
            checkpoint = try replay(records)
            highest = records.map(\.sequence).max() ?? 0
            try Self.preallocate(fd, size: self.capacity, reserve: reserveBytes, path: path)
            // Replayed: the database holds it all now.
            if end > 0, let failure = Self.writeFully(fd, [UInt8](repeating: 0, count: end), at: 0) {
                throw CacheError(.openFailed, failure)
            }
        } catch {
            close(fd)
            throw CacheError.wrap(error, "cannot replay the outbox journal at \(path)", as: .openFailed)
        }
        descriptor = fd
        let last = max(checkpoint, highest)
        state = Mutex(State(nextSequence: last + 1, checkpoint: last))
        let started = startThread { [self] in writerLoop() }
        if !started {
            close(fd)
            throw CacheError(.openFailed, "cannot start the outbox journal's writer thread")
        }
    }

    deinit {
        if !state.withLock({ $0.descriptorClosed }) { close(descriptor) }
    }

    /// Appends `changes` as one record and returns once it is durable, or why it is not. Called in order, the
    /// records are numbered and placed in that order synchronously (before the call suspends).
    public func append(_ changes: [OutboxChange]) async -> AppendResult {
        // The journal's blocks exist whatever the disk's state, but the database's commits behind need room: with
        // the disk (nearly) full, the command must meet the database's answer, as without a journal.
        var info = statvfs()
        if fstatvfs(descriptor, &info) == 0, UInt64(info.f_bavail) &* UInt64(info.f_frsize) < UInt64(reserveBytes) {
            return .diskLow
        }
        let payload = Self.encode(changes)
        return await withCheckedContinuation { continuation in
            let result: AppendResult? = state.withLock { state in
                if let failure = state.failure { return .failed(failure, sequence: nil) }
                if state.closed { return .failed("the outbox journal is closed", sequence: nil) }
                let size = Self.headerSize + payload.count
                var offset = state.offset
                if offset + size > capacity {
                    // Reuse the file from the start only when SQLite holds everything in it.
                    guard size <= capacity, state.checkpoint >= state.nextSequence - 1 else { return .noRoom }
                    offset = 0
                }
                let sequence = state.nextSequence
                state.nextSequence += 1
                state.offset = offset + size
                state.used = max(state.used, state.offset)
                state.queue.append(Queued(offset: offset, bytes: Self.record(database: database, sequence: sequence, payload: payload),
                                          continuation: continuation))
                return nil
            }
            if let result { continuation.resume(returning: result) } else { signal.notify() }
        }
    }

    /// The SQLite outbox now holds every record up to `sequence` (its transaction stored that checkpoint).
    public func checkpointed(through sequence: UInt64) {
        state.withLock { $0.checkpoint = max($0.checkpoint, sequence) }
    }

    /// The highest sequence number handed out so far (0 before the first append of a fresh journal).
    public var lastSequence: UInt64 { state.withLock { $0.nextSequence - 1 } }

    /// Stops the writer thread after what is queued, and releases the lock (closing the file). Later appends fail.
    /// When the database holds every record, the used part of the file is zeroed first (a clean shutdown).
    public func shutdown() {
        let first = state.withLock { state in
            defer { state.closed = true }
            return !state.closed
        }
        signal.notify()
        signal.waitForStop()
        guard first else { return }
        let (clean, used) = state.withLock { ($0.failure == nil && $0.checkpoint >= $0.nextSequence - 1, $0.used) }
        if clean, used > 0 { _ = Self.writeFully(descriptor, [UInt8](repeating: 0, count: used), at: 0) }
        state.withLock { $0.descriptorClosed = true }
        close(descriptor)
    }

    // MARK: - The writer thread

    private func writerLoop() {
        while true {
            let (batch, stop) = state.withLock { state -> ([Queued], Bool) in
                let batch = state.queue
                state.queue.removeAll(keepingCapacity: true)
                return (batch, batch.isEmpty && state.closed)
            }
            if stop { break }
            if batch.isEmpty {
                signal.wait()
                continue
            }
            var failure: String? = state.withLock { $0.failure }
            var index = 0
            while index < batch.count {
                // Contiguous records go in one write (one device flush); a wrap to offset 0 starts another.
                var end = index + 1
                var bytes = batch[index].bytes
                while end < batch.count, batch[end].offset == batch[end - 1].offset + batch[end - 1].bytes.count {
                    bytes += batch[end].bytes
                    end += 1
                }
                if failure == nil { failure = Self.writeFully(descriptor, bytes, at: batch[index].offset) }
                for queued in batch[index..<end] {
                    let sequence = Self.sequence(ofRecord: queued.bytes)
                    queued.continuation.resume(returning: failure.map { .failed($0, sequence: sequence) } ?? .durable(sequence))
                }
                index = end
            }
            if let failure { state.withLock { if $0.failure == nil { $0.failure = failure } } }
        }
        signal.notifyStopped()
    }

    private static func writeFully(_ fd: Int32, _ bytes: [UInt8], at offset: Int) -> String? {
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { buffer in
                pwrite(fd, buffer.baseAddress.map { $0 + written }, bytes.count - written, off_t(offset + written))
            }
            if count < 0 {
                if errno == EINTR { continue }
                return "cannot write the outbox journal: \(errnoText())"
            }
            written += count
        }
        return nil
    }

    private static func preallocate(_ fd: Int32, size: Int, reserve: Int, path: String) throws(CacheError) {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw CacheError(.openFailed, "cannot read the outbox journal at \(path): \(errnoText())") }
        guard Int(info.st_size) < size else { return }
        // On a small disk the database keeps the room: a journal that would leave less than `reserve` is not made.
        var space = statvfs()
        if fstatvfs(fd, &space) == 0, UInt64(space.f_bavail) &* UInt64(space.f_frsize) < UInt64(size - Int(info.st_size) + reserve) {
            throw CacheError(.openFailed, "less than \((size + reserve) >> 20) MiB free for the outbox journal at \(path)")
        }
        // Zeros written, not `fallocate`d: a write into an unwritten extent changes metadata, which turns each
        // later synchronous write into a file-system journal commit.
        let zeros = [UInt8](repeating: 0, count: 64 * 1024)
        var offset = Int(info.st_size)
        while offset < size {
            let chunk = Array(zeros.prefix(min(zeros.count, size - offset)))
            if let failure = writeFully(fd, chunk, at: offset) { throw CacheError(.openFailed, "\(failure) (\(path))") }
            offset += chunk.count
        }
        guard fsync(fd) == 0 else { throw CacheError(.openFailed, "cannot sync the outbox journal at \(path): \(errnoText())") }
        // The new file's directory entry must survive a power cut too.
        let directory = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        let dirfd = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dirfd >= 0 {
            _ = fsync(dirfd)
            close(dirfd)
        }
    }

    static func errnoText() -> String { String(cString: strerror(errno)) }

    // MARK: - Records

    static func record(database: UInt64, sequence: UInt64, payload: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(headerSize + payload.count)
        bytes.appendLittleEndian(magic)
        bytes.appendLittleEndian(database)
        bytes.appendLittleEndian(sequence)
        bytes.appendLittleEndian(UInt32(payload.count))
        var crc = CRC32()
        crc.update(bytes[4..<24])
        crc.update(payload[...])
        bytes.appendLittleEndian(crc.value)
        bytes += payload
        return bytes
    }

    static func sequence(ofRecord bytes: [UInt8]) -> UInt64 { bytes.littleEndian(UInt64.self, at: 12) ?? 0 }

    /// The intact records of `database` in a journal file's bytes, in file order, from offset 0 to the first that is
    /// not intact or not the database's.
    static func records(in bytes: [UInt8], database: UInt64) -> [(sequence: UInt64, payload: ArraySlice<UInt8>)] {
        scan(bytes, database: database).records
    }

    /// `records(in:database:)`, and where the last intact record of any database ends.
    static func scan(_ bytes: [UInt8], database: UInt64) -> (records: [(sequence: UInt64, payload: ArraySlice<UInt8>)], end: Int) {
        var records: [(UInt64, ArraySlice<UInt8>)] = []
        var offset = 0
        var ours = true
        while offset + headerSize <= bytes.count, bytes.littleEndian(UInt32.self, at: offset) == magic,
              let owner = bytes.littleEndian(UInt64.self, at: offset + 4),
              let sequence = bytes.littleEndian(UInt64.self, at: offset + 12),
              let length = bytes.littleEndian(UInt32.self, at: offset + 20).map(Int.init),
              let crc = bytes.littleEndian(UInt32.self, at: offset + 24),
              offset + headerSize + length <= bytes.count {
            var check = CRC32()
            check.update(bytes[(offset + 4)..<(offset + 24)])
            let payload = bytes[(offset + headerSize)..<(offset + headerSize + length)]
            check.update(payload)
            guard check.value == crc else { break }
            ours = ours && owner == database
            if ours { records.append((sequence, payload)) }
            offset += headerSize + length
        }
        return (records, offset)
    }

    /// Reads the journal at `path` (nil when there is none), unless another process holds it (`inUse`).
    static func read(path: String) throws(CacheError) -> (bytes: [UInt8], inUse: Bool)? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            throw CacheError(.openFailed, "cannot open the outbox journal at \(path): \(errnoText())")
        }
        defer { close(fd) }
        guard flock(fd, LOCK_SH | LOCK_NB) == 0 else { return ([], true) }
        defer { flock(fd, LOCK_UN) }
        return (try readAll(fd, path: path), false)
    }

    private static func readAll(_ fd: Int32, path: String) throws(CacheError) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(bytes.count)) }
            if count < 0 {
                if errno == EINTR { continue }
                throw CacheError(.openFailed, "cannot read the outbox journal at \(path): \(errnoText())")
            }
            if count == 0 { break }
            bytes += chunk[0..<count]
        }
        return bytes
    }

    // MARK: - Payload: a list of outbox changes

    private enum Tag: UInt8 { case insert = 1, insertSending = 2, transition = 3 }

    static func encode(_ changes: [OutboxChange]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.appendLittleEndian(UInt32(changes.count))
        for change in changes {
            switch change {
            case .insert(let entry, let sending):
                bytes.append((sending ? Tag.insertSending : Tag.insert).rawValue)
                bytes.appendString(entry.id)
                bytes.appendString(entry.vendorID)
                bytes.appendString(entry.deviceID)
                bytes.appendString(entry.json)
                bytes.appendLittleEndian(entry.createdAt.bitPattern)
                if let expires = entry.expiresAt {
                    bytes.append(1)
                    bytes.appendLittleEndian(expires.bitPattern)
                } else {
                    bytes.append(0)
                }
            case .transition(let id, let target, let error, let result):
                bytes.append(Tag.transition.rawValue)
                bytes.appendString(id)
                bytes.appendString(target.rawValue)
                bytes.appendOptionalString(error)
                bytes.appendOptionalString(result)
            }
        }
        return bytes
    }

    /// The changes of one record's payload; nil when it does not decode (a record from a newer release).
    static func decode(_ payload: ArraySlice<UInt8>) -> [OutboxChange]? {
        var reader = ByteReader(bytes: payload)
        guard let count = reader.read(UInt32.self) else { return nil }
        var changes: [OutboxChange] = []
        for _ in 0..<count {
            guard let raw = reader.readByte(), let tag = Tag(rawValue: raw) else { return nil }
            switch tag {
            case .insert, .insertSending:
                guard let id = reader.readString(), let vendorID = reader.readString(), let deviceID = reader.readString(),
                      let json = reader.readString(), let created = reader.read(UInt64.self),
                      let hasDeadline = reader.readByte(), hasDeadline <= 1 else { return nil }
                var expiresAt: Double?
                if hasDeadline == 1 {
                    guard let bits = reader.read(UInt64.self) else { return nil }
                    expiresAt = Double(bitPattern: bits)
                }
                changes.append(.insert(OutboxEntry(id: id, vendorID: vendorID, deviceID: deviceID, json: json,
                                                   createdAt: Double(bitPattern: created), expiresAt: expiresAt),
                                       sending: tag == .insertSending))
            case .transition:
                guard let id = reader.readString(), let target = reader.readString().flatMap(OutboxState.init(rawValue:)),
                      let error = reader.readOptionalString(), let result = reader.readOptionalString() else { return nil }
                changes.append(.transition(id: id, to: target, error: error, result: result))
            }
        }
        return reader.isAtEnd ? changes : nil
    }
}
