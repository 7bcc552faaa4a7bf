import Cache
import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayModel
import GatewayTesting
import Testing

/// With `storage:`, one commit (overlapping the vendor call, which reports only once it is durable) stores a
/// command, and outcome marks are written behind the response.
@Suite struct StorageCommandPathTests {
    @Test func aCommandThatCanGoAtOnceIsStoredAsSendingInOneCommit() async throws {
        let directory = try TemporaryDirectory()
        let h = try await CommandSafetyTests.Harness(storage: directory)
        let store = try #require(h.store)
        h.vendor.setMode(.gated)
        let before = store.committedTransactions
        await h.set("plug", #"{"state":"OFF"}"#, reply: "replies/1")
        try await waitUntil("the command reached the vendor") { h.vendor.executed.count == 1 }
        // The send overlaps the outbox commit (its outcome waits for the commit), so the commit may end after the
        // vendor call began: wait until its row can be read (the commit counter moves as a commit begins, before
        // readers see it), then check that it was the only one.
        let id = try #require(h.vendor.executed.first?.id)
        try await waitUntil("the outbox row was committed") { try store.outboxEntry(id: id) != nil }
        #expect(store.committedTransactions - before == 1, "commits while the vendor call is open: \(store.committedTransactions - before)")
        let row = try #require(try store.outboxEntry(id: id))
        #expect(row.state == .sending && row.attempts == 1, "\(row.state) after \(row.attempts) attempt(s)")

        h.vendor.release()
        #expect(await h.reply("replies/1")?["status"] as? String == "ok")
        try await waitUntil("the ack is written behind") { try store.outboxEntry(id: id)?.state == .acked }
    }

    @Test func aCommandQueuedBehindAnotherIsMarkedSendingWhenItsTurnComes() async throws {
        let directory = try TemporaryDirectory()
        let h = try await CommandSafetyTests.Harness(storage: directory)
        let store = try #require(h.store)
        h.vendor.setMode(.gated)
        await h.set("plug", #"{"state":"OFF"}"#, reply: "replies/1")
        try await waitUntil("the first command reached the vendor") { h.vendor.executed.count == 1 }
        await h.set("plug", #"{"brightness":40}"#, reply: "replies/2")
        let waiting = try await firstPending(store)
        #expect(waiting.attempts == 0, "a command that waits is stored pending, not sending")
        h.vendor.release()
        #expect(await h.reply("replies/2")?["status"] as? String == "ok")
        try await waitUntil("both acked") { try store.outboxCounts()[.acked, default: 0] == 2 }
        #expect(try store.outboxEntry(id: waiting.id)?.attempts == 1)
    }

    @Test func aRowLeftSendingByACrashAfterTheVendorCallIsSettledAsInterruptedOnRestart() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("gateway.sqlite")
        do {
            // What a crash between the vendor's answer and the written-behind ack leaves: a `sending` row.
            let store = try CacheStore(path: path)
            let lock = DeviceCommand(id: "c-lock", device: DeviceID(vendorInstance: "sv", vendorDeviceID: "lock"), vendorID: "sv",
                                     vendorDeviceID: "lock", changes: ["lock": .string("UNLOCK")], issuedAt: Date(), expiresAt: Date().addingTimeInterval(10))
            let json = String(decoding: try JSONEncoder().encode(lock), as: UTF8.self)
            try store.apply([.insert(OutboxEntry(id: "c-lock", vendorID: "sv", deviceID: "sv_lock", json: json,
                                                 createdAt: Date().timeIntervalSince1970, expiresAt: lock.expiresAt.timeIntervalSince1970), sending: true)])
            try store.close()
        }
        let h = try await CommandSafetyTests.Harness(storage: directory)
        await h.controller.resumeOutbox()
        let store = try #require(h.store)
        try await waitUntil("settled") { try store.outboxEntry(id: "c-lock")?.state == .failed }
        #expect(h.vendor.executed.isEmpty, "a lock command that may have been sent is never sent again")
        #expect(h.transport.messages.contains { $0.topic == "lbs/bridge/event" && $0.payload.contains("interrupted") })
    }

    // MARK: - With the outbox journal

    @Test func withTheJournalACommandIsAppendedNotCommittedAndReachesTheOutboxBehind() async throws {
        let directory = try TemporaryDirectory()
        let h = try await CommandSafetyTests.Harness(storage: directory, journal: true)
        let store = try #require(h.store)
        let journal = try #require(h.journal)
        h.vendor.setMode(.gated)
        let before = store.committedTransactions
        await h.set("plug", #"{"state":"OFF"}"#, reply: "replies/1")
        try await waitUntil("the command reached the vendor") { h.vendor.executed.count == 1 }
        try await waitUntil("the command was journaled") { journal.lastSequence == 1 }
        h.vendor.release()
        #expect(await h.reply("replies/1")?["status"] as? String == "ok")
        let id = try #require(h.vendor.executed.first?.id)
        try await waitUntil("the row and its ack reach the database behind") { try store.outboxEntry(id: id)?.state == .acked }
        #expect(try store.outboxEntry(id: id)?.attempts == 1)
        #expect(try store.outboxJournalCheckpoint() == 1)
        #expect(store.committedTransactions - before <= 2, "one shared commit behind (two if the ack missed it)")

        // Back-to-back commands share the commits behind: far fewer commits than commands.
        h.vendor.setMode(.immediate)
        let commitsBefore = store.committedTransactions
        for index in 0..<20 {
            await h.set("plug", index.isMultiple(of: 2) ? "ON" : "OFF", reply: "replies/b\(index)")
            #expect(await h.reply("replies/b\(index)")?["status"] as? String == "ok")
        }
        try await waitUntil("all acked") { try store.outboxCounts()[.acked, default: 0] == 21 }
        #expect(store.committedTransactions - commitsBefore < 20, "\(store.committedTransactions - commitsBefore) commits for 20 commands")
        #expect(try store.outboxJournalCheckpoint() == journal.lastSequence)
    }

    @Test func withTheJournalACommandJournaledBeforeACrashIsSettledAsInterruptedOnRestart() async throws {
        let directory = try TemporaryDirectory()
        let first = try await CommandSafetyTests.Harness(storage: directory, journal: true)
        first.vendor.setMode(.gated)
        await first.set("lock", "UNLOCK", reply: "replies/lock")
        try await waitUntil("the unlock reached the vendor") { first.vendor.executed.count == 1 }
        let id = try #require(first.vendor.executed.first?.id)
        #expect(try first.store?.outboxEntry(id: id) == nil || first.store?.outboxEntry(id: id)?.state == .sending)
        // The process dies mid-call: the journal's lock goes with it; the database may never have seen the command.
        first.journal?.shutdown()

        let h = try await CommandSafetyTests.Harness(storage: directory, journal: true)
        await h.controller.resumeOutbox()
        let store = try #require(h.store)
        try await waitUntil("settled") { try store.outboxEntry(id: id)?.state == .failed }
        #expect(h.vendor.executed.isEmpty, "a lock command that may have been sent is never sent again")
        #expect(h.transport.messages.contains { $0.topic == "lbs/bridge/event" && $0.payload.contains("interrupted") })
        first.vendor.release()
    }

    @Test func withTheJournalAQueuedCommandJournaledBeforeACrashRunsOnceOnRestart() async throws {
        let directory = try TemporaryDirectory()
        let first = try await CommandSafetyTests.Harness(storage: directory, journal: true)
        first.vendor.setMode(.gated)
        await first.set("plug", #"{"state":"OFF"}"#, reply: "replies/1")
        try await waitUntil("the first command reached the vendor") { first.vendor.executed.count == 1 }
        await first.set("plug", #"{"brightness":40}"#, reply: "replies/2")
        try await waitUntil("the second was journaled as waiting") { first.journal?.lastSequence == 2 }
        first.journal?.shutdown()

        let h = try await CommandSafetyTests.Harness(storage: directory, journal: true)
        await h.controller.resumeOutbox()
        let store = try #require(h.store)
        try await waitUntil("the waiting command ran after the restart") { h.vendor.executed.count == 1 }
        #expect(h.vendor.executed.first?.changes["brightness"] != nil, "the waiting command, not the one in flight")
        try await waitUntil("acked") { try store.outboxCounts()[.acked, default: 0] == 1 }
        first.vendor.release()
    }

    /// While storage is unhealthy a command meets the database's answer (a commit of its own), not the journal,
    /// which would take it whatever state the database is in; a successful commit makes storage healthy again.
    @Test func withTheJournalACommandAfterAFailedCommitGoesThroughTheDatabase() async throws {
        let directory = try TemporaryDirectory()
        let h = try await CommandSafetyTests.Harness(storage: directory, journal: true)
        let store = try #require(h.store)
        let journal = try #require(h.journal)
        let persistence = try #require(h.persistence)
        persistence.health.recordFailure("a commit failed (test)")
        let commits = store.committedTransactions
        await h.set("plug", #"{"state":"OFF"}"#, reply: "replies/1")
        #expect(await h.reply("replies/1")?["status"] as? String == "ok")
        #expect(journal.lastSequence == 0, "not journaled while storage was unhealthy")
        #expect(store.committedTransactions > commits)
        #expect(persistence.health.snapshot.ok, "the commit that worked made storage healthy")
        await h.set("plug", #"{"state":"ON"}"#, reply: "replies/2")
        #expect(await h.reply("replies/2")?["status"] as? String == "ok")
        #expect(journal.lastSequence == 1, "journaled again once healthy")
    }

    private func firstPending(_ store: CacheStore) async throws -> OutboxEntry {
        try await waitUntil("a pending row") { try !store.pending().isEmpty }
        return try #require(try store.pending().first)
    }
}

/// Commands waiting for a down vendor go when it recovers, not at their next backoff tick.
@Suite struct VendorRecoveryWakeTests {
    @Test func aWaitingCommandRunsAsSoonAsItsVendorIsBack() async throws {
        let h = try await CommandSafetyTests.Harness()
        // The vendor is down and asks to be left alone for 30 s (longer than this test may take).
        h.vendor.setMode(.failing(GatewayError(.breakerOpen, message: "down", retryable: true, retryAfter: .seconds(30))))
        await h.controller.handle(.health(VendorHealth(vendorID: "sv", state: .down)))
        await h.set("plug", #"{"state":"OFF"}"#, reply: "replies/1")
        try await waitUntil("the first attempt failed") { h.vendor.executed.count == 1 }
        h.vendor.setMode(.immediate)
        await h.controller.handle(.health(VendorHealth(vendorID: "sv", state: .ok, lastSuccess: Date())))
        try await waitUntil("sent again right after the recovery", timeout: .seconds(5)) { h.vendor.executed.count == 2 }
        #expect(await h.reply("replies/1")?["status"] as? String == "ok")
    }
}
