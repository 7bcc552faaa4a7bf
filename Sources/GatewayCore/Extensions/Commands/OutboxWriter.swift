import Cache
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
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
///
/// With the outbox journal (`storage.outbox_journal`), what is waited for is a synchronous append to the
/// journal instead of a commit: the changes then reach the database with the next shared commit (after
/// `journaledCommitDelay`, with the marks), which also stores the journal's checkpoint. A change the journal holds is never
/// dropped: a failed commit keeps it for the next. While storage is unhealthy (a commit failed), when the journal
/// has no room (the database fell behind), the disk is nearly full, or the journal fails, a write falls back to a
/// commit of its own, as without the journal: the database's answer decides, and a failing one refuses.
@GatewayActor
package final class OutboxWriter {
    private let persistence: CacheLink
    private var changes: [Pending] = []
    private struct Pending {
        var change: OutboxChange
        /// Held by the journal: kept across a failed commit, since the journal's checkpoint will pass it.
        var journaled: Bool
    }
    /// Journal records whose changes are in `changes` (or were refused): the checkpoint may pass them.
    private var resolved: Set<UInt64> = []
    /// Every record up to this is resolved: the next commit's checkpoint.
    private var resolvedThrough: UInt64 = 0
    private var journalFailureReported = false
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
    /// With the journal every command's changes wait for the commit behind, so it comes less often: each such
    /// commit (WAL write and fsync) delays the journal appends that meet it on the disk, which showed in the p99
    /// of `/set` at 50 ms. The journal holds far more than this much time of commands.
    package static let journaledCommitDelay = Duration.milliseconds(250)
    private var markFlushScheduled = false
    private let clock: any Clock<Duration>

    package init(persistence: CacheLink, clock: any Clock<Duration>, spawn: @escaping @GatewayActor (@escaping @GatewayActor () async -> Void) -> Void,
         report: @escaping @GatewayActor ((any Error)?, Int) -> Void) {
        self.persistence = persistence
        self.clock = clock
        self.spawn = spawn
        self.report = report
        resolvedThrough = persistence.journal?.lastSequence ?? 0
    }

    /// Makes `changes` durable (journaled, or committed with whatever else waits) and returns once they are; the
    /// error when not.
    package func write(_ new: [OutboxChange]) async -> (any Error)? {
        // While the database's commits fail, a command meets the database's answer (and is refused), as without
        // the journal: the journal would take it, but nothing behind it could be written.
        if let journal = persistence.journal, persistence.health.snapshot.ok {
            switch await journal.append(new) {
            case .durable(let sequence):
                changes.append(contentsOf: new.map { Pending(change: $0, journaled: true) })
                resolve(sequence)
                // Storage health follows the database's commits (`drain`), not the journal's appends.
                scheduleMarks()
                return nil
            case .failed(let reason, let sequence):
                // Not stored by the journal: a commit of its own decides (the checkpoint may pass the record).
                if let sequence { resolve(sequence) }
                if !journalFailureReported {
                    journalFailureReported = true
                    report(CacheError(.databaseError, "\(reason); commands are now stored by a database commit each"), new.count)
                }
            case .noRoom, .diskLow:
                break
            }
        }
        changes.append(contentsOf: new.map { Pending(change: $0, journaled: false) })
        if writing {
            return await withCheckedContinuation { waiters.append($0) }
        }
        return await drain()
    }

    private func resolve(_ sequence: UInt64) {
        resolved.insert(sequence)
        while resolved.remove(resolvedThrough + 1) != nil { resolvedThrough += 1 }
    }

    /// Writes `change` with the next commit; nothing waits for it.
    package func post(_ change: OutboxChange) {
        guard changes.count < Self.maxPendingMarks else {
            report(CacheError(.invalidInput, "more than \(Self.maxPendingMarks) outbox marks wait; one was not written"), 1)
            return
        }
        changes.append(Pending(change: change, journaled: false))
        scheduleMarks()
    }

    /// Marks alone get a commit of their own only after `markDelay`, unless a command's commit takes them first.
    private func scheduleMarks() {
        guard !writing, !markFlushScheduled else { return }
        markFlushScheduled = true
        let clock = self.clock
        spawn { [self] in
            try? await clock.sleep(for: persistence.journal == nil ? Self.markDelay : Self.journaledCommitDelay)
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
            // Taken with the batch: every resolved record's changes are in it or in an earlier commit.
            let checkpoint = persistence.journal == nil ? nil : resolvedThrough
            var failure: (any Error)?
            if !batch.isEmpty {
                let applied = batch.map(\.change)
                do {
                    _ = try await persistence.store.run { try $0.apply(applied, journalCheckpoint: checkpoint) }
                    if let checkpoint { persistence.journal?.checkpointed(through: checkpoint) }
                } catch {
                    failure = error
                    // What the journal holds must still reach the database, in order, before anything newer.
                    changes.insert(contentsOf: batch.filter(\.journaled), at: 0)
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
