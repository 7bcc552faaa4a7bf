import Cache
import Foundation
import GatewayModel

/// The one writer of the outbox. Everything that arrives while a transaction runs goes into the next one,
/// so concurrent commands share a commit, and the marks of finished commands (acked, failed, expired,
/// requeued) ride along with the next commit instead of costing one of their own.
///
/// Only two things are waited for, because they must be durable before a vendor call: storing new
/// commands, and marking a waiting command `sending`. A command stored when its lane can run it at once is
/// stored already as `sending`: one commit is all that stands between `/set` and the vendor call. After a
/// crash such a row is treated as possibly sent (a lock, garage door or cover is reported `interrupted`,
/// never re-run). Outcome marks are written behind: a crash before they are written leaves a `sending` row
/// that the restart settles the same way.
@GatewayActor
package final class OutboxWriter {
    private let persistence: CacheLink
    private var changes: [OutboxChange] = []
    private var waiters: [CheckedContinuation<(any Error)?, Never>] = []
    private var writing = false
    /// Starts a tracked task (refused once the gateway shuts down: `flush` writes what is left).
    private let spawn: @GatewayActor (@escaping @GatewayActor () async -> Void) -> Void
    /// Told the outcome of every transaction (storage health) and how many changes it held.
    private let report: @GatewayActor ((any Error)?, Int) -> Void
    /// Marks not yet written stay bounded by the commands in the lanes (a few per command); this is a backstop.
    package static let maxPendingMarks = 100_000
    /// How long outcome marks wait for a commit to ride along with (the next command's) before they get
    /// one of their own: back-to-back commands then cost one fsync each, not two.
    package static let markDelay = Duration.milliseconds(50)
    private var markFlushScheduled = false
    private let clock: any Clock<Duration>

    package init(persistence: CacheLink, clock: any Clock<Duration>, spawn: @escaping @GatewayActor (@escaping @GatewayActor () async -> Void) -> Void,
         report: @escaping @GatewayActor ((any Error)?, Int) -> Void) {
        self.persistence = persistence
        self.clock = clock
        self.spawn = spawn
        self.report = report
    }

    /// Writes `changes` (with whatever else waits) and returns once they are committed; the error when not.
    package func write(_ new: [OutboxChange]) async -> (any Error)? {
        changes.append(contentsOf: new)
        if writing {
            return await withCheckedContinuation { waiters.append($0) }
        }
        return await drain()
    }

    /// Writes `change` with the next commit; nothing waits for it.
    package func post(_ change: OutboxChange) {
        guard changes.count < Self.maxPendingMarks else {
            report(CacheError(.invalidInput, "more than \(Self.maxPendingMarks) outbox marks wait; one was not written"), 1)
            return
        }
        changes.append(change)
        scheduleMarks()
    }

    /// Marks alone get a commit of their own only after `markDelay`, unless a command's commit takes them first.
    private func scheduleMarks() {
        guard !writing, !markFlushScheduled else { return }
        markFlushScheduled = true
        let clock = self.clock
        spawn { [self] in
            try? await clock.sleep(for: Self.markDelay)
            markFlushScheduled = false
            if !writing, !changes.isEmpty { _ = await drain() }
        }
    }

    /// Writes what waits now (shutdown, after the tracked tasks ended).
    package func flush() async {
        if !writing, !changes.isEmpty { _ = await drain() }
    }

    /// Commits what waits; continues while someone waits for durability (their changes arrived during the
    /// commit), and leaves marks alone to `scheduleMarks`. Returns the outcome of the first commit (the caller's).
    private func drain() async -> (any Error)? {
        writing = true
        var first: (any Error)??
        repeat {
            let batch = changes
            let resumed = waiters
            changes.removeAll(keepingCapacity: true)
            waiters.removeAll(keepingCapacity: true)
            var failure: (any Error)?
            if !batch.isEmpty {
                do {
                    _ = try await persistence.store.run { try $0.apply(batch) }
                } catch {
                    failure = error
                }
                report(failure, batch.count)
            }
            if first == nil { first = .some(failure) }
            for waiter in resumed { waiter.resume(returning: failure) }
        } while !waiters.isEmpty
        writing = false
        if !changes.isEmpty { scheduleMarks() }
        return first ?? nil
    }
}
