@testable import Cache
import Foundation
import Testing

/// The outbox journal: what it holds survives a crash that left the database without it, each record is applied
/// once (the checkpoint), a torn record ends the replay, the file is reused only behind the checkpoint, and one
/// process owns it.
@Suite("Outbox journal")
struct OutboxJournalTests {
    func entry(_ id: String, expiresAt: Double? = 1_800_000_010.25) -> OutboxEntry {
        OutboxEntry(id: id, vendorID: "hue", deviceID: "hue_lamp", json: #"{"changes":{"state":"OFF"},"id":"\#(id)"}"#,
                    createdAt: 1_800_000_000.125, expiresAt: expiresAt)
    }

    @Test func changesRoundTripThroughARecord() throws {
        let changes: [OutboxChange] = [
            .insert(entry("a"), sending: true),
            .insert(entry("b – ünïcode 🔒", expiresAt: nil), sending: false),
            .transition(id: "a", to: .acked, error: nil, result: #"{"ok":true}"#),
            .transition(id: "b – ünïcode 🔒", to: .failed, error: "vendor_timeout: no answer", result: nil),
            .transition(id: "c", to: .sending),
        ]
        let record = OutboxJournal.record(database: 7, sequence: 42, payload: OutboxJournal.encode(changes))
        let records = OutboxJournal.records(in: record + [UInt8](repeating: 0, count: 100), database: 7)
        #expect(records.count == 1 && records.first?.sequence == 42)
        let decoded = try #require(records.first.flatMap { OutboxJournal.decode($0.payload) })
        #expect(decoded == changes)
    }

    @Test func aTornOrCorruptRecordEndsTheScanAndKeepsTheOnesBefore() {
        let first = OutboxJournal.record(database: 7, sequence: 1, payload: OutboxJournal.encode([.insert(entry("a"), sending: false)]))
        let second = OutboxJournal.record(database: 7, sequence: 2, payload: OutboxJournal.encode([.insert(entry("b"), sending: false)]))
        // Torn: the second record's last bytes never reached the disk.
        #expect(OutboxJournal.records(in: first + second.dropLast(3) + [0, 0, 0], database: 7).map(\.sequence) == [1])
        // Corrupt: one payload byte flipped.
        var flipped = second
        flipped[flipped.count - 5] ^= 0x40
        #expect(OutboxJournal.records(in: first + flipped, database: 7).map(\.sequence) == [1])
        #expect(OutboxJournal.records(in: first + second, database: 7).map(\.sequence) == [1, 2])
        // Another database's records (a journal left beside a replaced file) are not this one's.
        #expect(OutboxJournal.records(in: first + second, database: 8).isEmpty)
    }

    /// The crash this exists for: commands journaled (the gateway answered), the database never written.
    @Test func journaledCommandsAreInTheOutboxOfWhoeverOpensTheDatabaseNext() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("gateway.sqlite").path
            let first = try CacheStore(path: path)
            let journal = try first.openOutboxJournal()
            #expect(await journal.append([.insert(entry("c-1"), sending: true)]) == .durable(1))
            #expect(await journal.append([.insert(entry("c-2"), sending: false)]) == .durable(2))
            #expect(await journal.append([.transition(id: "c-2", to: .sending)]) == .durable(3))
            #expect(try first.outboxEntry(id: "c-1") == nil, "nothing was committed to the database")
            // The process dies: its lock goes with it, the database never saw the commands.
            journal.shutdown()

            let second = try CacheStore(path: path)
            defer { try? second.close() }
            let one = try #require(try second.outboxEntry(id: "c-1"))
            #expect(one.state == .sending && one.attempts == 1 && one.json == entry("c-1").json)
            #expect(one.createdAt == entry("c-1").createdAt && one.expiresAt == entry("c-1").expiresAt)
            let two = try #require(try second.outboxEntry(id: "c-2"))
            #expect(two.state == .sending && two.attempts == 1)
            #expect(try second.outboxJournalCheckpoint() == 3)

            // Opened again (and again): applied once, not twice.
            let third = try CacheStore(path: path)
            #expect(try third.outboxEntry(id: "c-2")?.attempts == 1)
            let reopened = try third.openOutboxJournal()
            #expect(try third.outboxEntry(id: "c-2")?.attempts == 1)
            #expect(reopened.lastSequence == 3, "numbering goes on above every record in the file")
            #expect(await reopened.append([.transition(id: "c-2", to: .acked)]) == .durable(4))
            try third.close()
            try first.close()
        }
    }

    /// The gateway opens the journal itself right after the store: the store then leaves the replay to it, so the
    /// file is read once, and what the crash left is in the outbox before the journal takes its first append.
    @Test func anOpenerThatOpensTheJournalItselfReplaysItThere() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("gateway.sqlite").path
            let crashed = try CacheStore(path: path)
            let journal = try crashed.openOutboxJournal()
            #expect(await journal.append([.insert(entry("d-1"), sending: false)]) == .durable(1))
            journal.shutdown()

            var options = CacheStore.Options()
            options.replaysOutboxJournal = false
            let next = try CacheStore(path: path, options: options)
            #expect(try next.outboxEntry(id: "d-1") == nil, "opening the store left the journal alone")
            let reopened = try next.openOutboxJournal()
            #expect(try next.outboxEntry(id: "d-1")?.state == .pending)
            #expect(reopened.lastSequence == 1)
            try next.close()

            // An opener whose journal cannot be opened replays it on its own (here a live holder has it: left alone).
            let holder = try CacheStore(path: path)
            let held = try holder.openOutboxJournal()
            #expect(await held.append([.insert(entry("d-2"), sending: false)]) == .durable(2))
            let other = try CacheStore(path: path, options: options)
            #expect(throws: CacheError.self) { try other.openOutboxJournal() }
            try other.replayIdleOutboxJournal()
            #expect(try other.outboxEntry(id: "d-2") == nil, "a live gateway's journal is its own to write")
            try other.close()
            try holder.close()
            try crashed.close()
        }
    }

    @Test func recordsTheDatabaseAlreadyHoldsAreNotAppliedAgain() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("gateway.sqlite").path
            let store = try CacheStore(path: path)
            let journal = try store.openOutboxJournal()
            let insert: [OutboxChange] = [.insert(entry("c-1"), sending: false)]
            let sending: [OutboxChange] = [.transition(id: "c-1", to: .sending)]
            #expect(await journal.append(insert) == .durable(1))
            #expect(await journal.append(sending) == .durable(2))
            // The shared commit behind: both records' changes, and the checkpoint with them.
            try store.apply(insert + sending, journalCheckpoint: 2)
            journal.checkpointed(through: 2)
            let requeue: [OutboxChange] = [.transition(id: "c-1", to: .pending)]
            #expect(await journal.append(requeue) == .durable(3))
            journal.shutdown()

            let reopened = try CacheStore(path: path)
            defer { try? reopened.close() }
            let row = try #require(try reopened.outboxEntry(id: "c-1"))
            #expect(row.attempts == 1, "the sending mark counted once, not again at the replay")
            #expect(row.state == .pending, "the record above the checkpoint was applied")
            try store.close()
        }
    }

    @Test func theFileIsReusedFromTheStartOnlyBehindTheCheckpoint() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("gateway.sqlite").path
            let store = try CacheStore(path: path)
            let journal = try store.openOutboxJournal(capacity: 4096)
            var sequence: UInt64 = 0
            var appended: [OutboxChange] = []
            while true {
                let change = OutboxChange.insert(entry("c-\(sequence + 1)"), sending: false)
                let result = await journal.append([change])
                guard case .durable(let number) = result else {
                    #expect(result == .noRoom)
                    break
                }
                sequence = number
                appended.append(change)
            }
            #expect(sequence > 5, "\(sequence) records in 4 KiB")
            // Larger than any space left at the end, smaller than the file.
            let probe = OutboxChange.transition(id: "c-1", to: .sending, error: String(repeating: "x", count: 1_000))
            // Still no room until the database holds them all.
            try store.apply(Array(appended.dropLast()), journalCheckpoint: sequence - 1)
            journal.checkpointed(through: sequence - 1)
            #expect(await journal.append([probe]) == .noRoom)
            try store.apply([appended[appended.count - 1]], journalCheckpoint: sequence)
            journal.checkpointed(through: sequence)
            #expect(await journal.append([probe]) == .durable(sequence + 1))
            journal.shutdown()

            // The replay sees the new record at the start and ignores the old ones behind it.
            let reopened = try CacheStore(path: path)
            defer { try? reopened.close() }
            #expect(try reopened.outboxEntry(id: "c-1")?.state == .sending)
            #expect(try reopened.outboxCounts()[.pending] == Int(sequence) - 1)
            #expect(try reopened.outboxJournalCheckpoint() == sequence + 1)
            try store.close()
        }
    }

    @Test func oneProcessOwnsTheJournalAndOthersLeaveItAlone() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("gateway.sqlite").path
            let owner = try CacheStore(path: path)
            let journal = try owner.openOutboxJournal()
            #expect(await journal.append([.insert(entry("c-1"), sending: true)]) == .durable(1))
            // Another opener (the CLI while the gateway runs) neither replays nor opens it.
            let other = try CacheStore(path: path)
            #expect(try other.outboxEntry(id: "c-1") == nil)
            #expect(throws: CacheError.self) { try other.openOutboxJournal() }
            try other.close()
            try owner.close()
            #expect(await journal.append([.insert(entry("c-2"), sending: true)]) == .failed("the outbox journal is closed", sequence: nil))
        }
    }

    /// Appends that meet share the writes; every one is numbered once and comes back after a crash.
    @Test func concurrentAppendsAreEachDurableOnceAndAllReplayed() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("gateway.sqlite").path
            let store = try CacheStore(path: path)
            let journal = try store.openOutboxJournal()
            let results = await withTaskGroup(of: OutboxJournal.AppendResult.self) { group in
                for index in 0..<200 { group.addTask { await journal.append([.insert(entry("c-\(index)"), sending: false)]) } }
                return await group.reduce(into: []) { $0.append($1) }
            }
            let sequences = results.compactMap { result -> UInt64? in
                if case .durable(let sequence) = result { return sequence }
                return nil
            }
            #expect(sequences.sorted() == Array(1...200))
            journal.shutdown()
            let reopened = try CacheStore(path: path)
            defer { try? reopened.close() }
            #expect(try reopened.outboxCounts()[.pending] == 200)
            try store.close()
        }
    }

    /// A journal left beside a database that was deleted (a fresh start) must not bring its commands back.
    @Test func aJournalBesideAReplacedDatabaseIsNotReplayed() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("gateway.sqlite").path
            let first = try CacheStore(path: path)
            let journal = try first.openOutboxJournal()
            #expect(await journal.append([.insert(entry("c-1"), sending: false)]) == .durable(1))
            journal.shutdown()
            try first.close()
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }

            let fresh = try CacheStore(path: path)
            defer { try? fresh.close() }
            #expect(try fresh.outboxEntry(id: "c-1") == nil)
            _ = try fresh.openOutboxJournal()
            #expect(try fresh.outboxEntry(id: "c-1") == nil)
        }
    }

    /// A clean shutdown leaves an empty journal: a backup restored afterwards does not get newer commands again.
    @Test func aCleanShutdownZeroesTheJournalSoARestoredBackupStaysAsItWas() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("gateway.sqlite").path
            let backup = directory.appendingPathComponent("backup.sqlite").path
            let store = try CacheStore(path: path)
            try store.checkpoint()
            try FileManager.default.copyItem(atPath: path, toPath: backup)
            let journal = try store.openOutboxJournal()
            let insert: [OutboxChange] = [.insert(entry("c-1"), sending: false)]
            #expect(await journal.append(insert) == .durable(1))
            try store.apply(insert, journalCheckpoint: 1)
            journal.checkpointed(through: 1)
            try store.close()
            let bytes = try #require(FileManager.default.contents(atPath: OutboxJournal.path(forDatabase: path)))
            #expect(bytes.prefix(4096).allSatisfy { $0 == 0 }, "the used part is zeroed")

            for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            try FileManager.default.removeItem(atPath: path)
            try FileManager.default.copyItem(atPath: backup, toPath: path)
            let restored = try CacheStore(path: path)
            defer { try? restored.close() }
            _ = try restored.openOutboxJournal()
            #expect(try restored.outboxEntry(id: "c-1") == nil)
        }
    }
}
