import Cache
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import Logging

/// Storing and sending at once. A command must be durable before it can be lost, not before its request
/// leaves: a command at the front of an idle lane is sent while its outbox row (`sending`) is committed,
/// and nothing about it (state, reply, outbox marks) is reported before the commit is durable. The fsync
/// then costs nothing a sender can see as long as the vendor takes longer than the disk.
///
/// What still holds:
/// - At most once: a crash before the commit leaves no row, so nothing is re-sent after the restart; after
///   the commit the row says `sending`, which a restart settles as today.
/// - Refusal when the cache cannot store: only commands arriving while storage is healthy overlap; once a
///   commit has failed, commands are stored first and refused as before. The one command that meets a disk
///   failing right now has already left: its outcome is reported, and storage is reported unhealthy.
/// - Locks, garage doors and covers never overlap: they are stored first, so a crash mid-send is always
///   reported `interrupted` after the restart.
/// - Batches and commands queued behind others go the stored-first way (they wait anyway).
extension Commands {
    /// A vendor call made before `attempt` took over (here: while its row was committed).
    package struct FirstCall: Sendable {
        package var vendor: any Vendor
        package var started: ContinuousClock.Instant
        package var result: Result<CommandOutcome, any Error>
    }

    /// True when `job` may be sent while it is stored (see the type's notes).
    package func mayOverlapStoring(_ job: CommandJob) -> Bool {
        guard let persistence, persistence.health.snapshot.ok, job.batchGroup == nil, job.completion == nil,
              let device = hub.devices[job.command.device], !device.type.isSecurityCritical else { return false }
        return true
    }

    /// The front command of an idle lane whose row is being committed: sent now (unless it is already
    /// superseded, expired or its vendor gone: then it waits for the commit and goes the usual way), and its
    /// result taken over by `attempt` once the commit is durable.
    package func runOverlapped(_ job: CommandJob, commit: OutboxCommit) async {
        var job = job
        let command = job.command
        guard let vendor = hub.vendors[command.vendorID], hub.devices[command.device] != nil, !isSuperseded(job),
              hub.now() <= command.expiresAt else {
            let failure = await commit.wait()
            job.persisted = failure == nil
            job.storedSending = failure == nil
            if let failure, hub.config.commands.whenStorageFails == .refuse {
                refusedCount += 1
                return refuse(job, failure)
            }
            return await runCommand(job)
        }
        let started = ContinuousClock.now
        // The commit runs in the outbox writer's task: the call needs no child task of its own to overlap it
        // (a child task would cost a hop to start and another to join, on every command).
        let result = await Self.capture { try await self.sending { try await vendor.execute(command) } }
        let failure = await commit.wait()
        job.persisted = failure == nil
        job.storedSending = failure == nil
        if failure != nil {
            hub.logger.error("command \(command.id) for \(command.device) was sent while the outbox failed to store it; its outcome is reported, later commands are refused until storage recovers")
        }
        await attempt(job, firstCall: FirstCall(vendor: vendor, started: started, result: result))
    }

    /// A throwing call's outcome as a value (so it can be carried to `attempt`).
    package static func capture(_ call: () async throws -> CommandOutcome) async -> Result<CommandOutcome, any Error> {
        do {
            return .success(try await call())
        } catch {
            return .failure(error)
        }
    }
}

/// The outcome of one outbox commit, awaited by the command sent while it ran.
@GatewayActor
package final class OutboxCommit {
    // The sender's error as `storeInOutbox` made it (passed on as is, not wrapped a second time).
    private var outcome: GatewayError??
    private var waiters: [CheckedContinuation<GatewayError?, Never>] = []

    package init() {}

    /// Records the commit's outcome (nil: durable) and wakes whoever waits.
    package func resolve(_ failure: GatewayError?) {
        guard outcome == nil else { return }
        outcome = .some(failure)
        for waiter in waiters { waiter.resume(returning: failure) }
        waiters.removeAll()
    }

    /// The commit's outcome, once known (nil: durable).
    package func wait() async -> GatewayError? {
        if let outcome { return outcome }
        return await withCheckedContinuation { waiters.append($0) }
    }
}
