import Cache
import Foundation
import Testing

@Suite("Outbox")
struct OutboxTests {
    func entry(_ id: String, vendor: String = "hue", device: String = "lamp", expiresAt: Double? = nil) -> OutboxEntry {
        OutboxEntry(id: id, vendorID: vendor, deviceID: device, json: #"{"cmd":"\#(id)"}"#, createdAt: baseHour, expiresAt: expiresAt)
    }

    @Test func pendingIsOrderedByInsertionPerVendor() async throws {
        try await withStore { store, _ in
            for (id, vendor) in [("c", "hue"), ("a", "tesla"), ("b", "hue"), ("e", "hue"), ("d", "tesla")] {
                #expect(try store.enqueue(entry(id, vendor: vendor)))
            }
            #expect(try store.pending(vendorID: "hue").map(\.id) == ["c", "b", "e"])
            #expect(try store.pending(vendorID: "tesla").map(\.id) == ["a", "d"])
            #expect(try store.pending().map(\.id) == ["c", "a", "b", "e", "d"])
            let seqs = try store.pending().map(\.seq)
            #expect(seqs == seqs.sorted() && Set(seqs).count == 5)
        }
    }

    @Test func duplicateIdKeepsOneRow() async throws {
        try await withStore { store, _ in
            #expect(try store.enqueue(entry("cmd-1")))
            var again = entry("cmd-1")
            again.json = #"{"cmd":"other"}"#
            #expect(try store.enqueue(again) == false)
            let pending = try store.pending()
            #expect(pending.count == 1)
            #expect(pending.first?.json == #"{"cmd":"cmd-1"}"#)
            #expect(try store.outboxCounts()[.pending] == 1)
        }
    }

    @Test func stateTransitionsAndAttempts() async throws {
        let clock = TestClock(baseHour)
        try await withStore(clock: clock) { store, _ in
            try store.enqueue(entry("cmd"))
            try store.markSending(id: "cmd")
            #expect(try store.outboxEntry(id: "cmd")?.attempts == 1)
            #expect(try store.pending().isEmpty)

            try store.requeue(id: "cmd", error: "HTTP 503")
            clock.set(baseHour + 5)
            try store.markSending(id: "cmd")
            try store.markAcked(id: "cmd", resultJSON: #"{"ok":true}"#)
            let done = try #require(try store.outboxEntry(id: "cmd"))
            #expect(done.state == .acked)
            #expect(done.attempts == 2)
            #expect(done.lastError == "HTTP 503")
            #expect(done.resultJSON == #"{"ok":true}"#)
            #expect(done.updatedAt == baseHour + 5)

            let finalError = #expect(throws: CacheError.self) { try store.markSending(id: "cmd") }
            #expect(finalError?.code == .invalidTransition)
            let missing = #expect(throws: CacheError.self) { try store.markFailed(id: "nope", error: "x") }
            #expect(missing?.code == .notFound)
            let unsent = #expect(throws: CacheError.self) { try store.markAcked(id: "cmd", resultJSON: nil) }
            #expect(unsent?.code == .invalidTransition)

            try store.enqueue(entry("bad"))
            try store.markFailed(id: "bad", error: "device unknown")
            try store.enqueue(entry("late"))
            try store.markExpired(id: "late")
            #expect(try store.outboxCounts() == [.pending: 0, .sending: 0, .acked: 1, .failed: 1, .expired: 1])
        }
    }

    @Test func overdueCommandsExpire() async throws {
        try await withStore { store, _ in
            try store.enqueue(entry("soon", expiresAt: baseHour + 10))
            try store.enqueue(entry("later", expiresAt: baseHour + 100))
            try store.enqueue(entry("never"))
            #expect(try store.expireOverdue(now: baseHour + 50) == 1)
            #expect(try store.pending().map(\.id) == ["later", "never"])
            #expect(try store.outboxEntry(id: "soon")?.state == .expired)
        }
    }

    @Test func sendingRowsSurviveReopenAsInterrupted() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("gateway.sqlite").path
            let store = try CacheStore(path: path)
            try store.enqueue(entry("in-flight"))
            try store.enqueue(entry("waiting"))
            try store.markSending(id: "in-flight")
            try store.close()

            let reopened = try CacheStore(path: path)
            defer { try? reopened.close() }
            let interrupted = try reopened.interruptedEntries()
            #expect(interrupted.map(\.id) == ["in-flight"])
            #expect(interrupted.first?.attempts == 1)
            #expect(try reopened.pending().map(\.id) == ["waiting"])
        }
    }

    @Test func rejectsEntriesWithoutIdentity() async throws {
        try await withStore { store, _ in
            let error = #expect(throws: CacheError.self) { try store.enqueue(entry("")) }
            #expect(error?.code == .invalidInput)
        }
    }
}
