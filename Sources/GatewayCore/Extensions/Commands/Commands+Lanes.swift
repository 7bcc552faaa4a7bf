import Cache
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import Logging

/// Command intake: one bounded lane per device.
///
/// - A command is admitted only while its device has fewer than `commands.max_queued_per_device` commands
///   waiting; otherwise it is refused at once with `queue_full` and never written to the outbox, so one
///   flooded device can neither grow memory nor delay the commands of other devices.
/// - With a cache, admitted commands are stored by one writer that takes everything that arrived meanwhile
///   in one transaction; a lane runs its front command only once that command is stored. A command that
///   cannot be stored is refused with `storage_unavailable` (unless `commands.when_storage_fails: send`).
/// - A lane runs one command at a time, in arrival order. Each admission records, per key, the newest
///   command that sets it: an older command all of whose keys a newer one sets is `superseded`.
extension Commands {
    package struct CommandLane {
        /// Waiting commands, front first; the front one may be running.
        package var jobs: [CommandJob] = []
        package var runnerActive = false
        /// The runner, parked until its front command is stored.
        package var waiter: CheckedContinuation<Void, Never>?
        /// Per key, the newest command that sets it: its sequence number and batch request.
        package var newest: [String: (sequence: UInt64, request: String?)] = [:]
    }

    /// Admits commands in order (with a cache: stores them first). Jobs refused here are settled at once.
    package func enqueue(_ jobs: [CommandJob]) {
        var needsStoring = false
        for var job in jobs {
            let id = job.command.device
            var lane = lanes[id] ?? CommandLane()
            guard lane.jobs.count < hub.config.commands.maxQueuedPerDevice else {
                refusedCount += 1
                refuse(job, .queueFull(device: id.rawValue, limit: hub.config.commands.maxQueuedPerDevice))
                continue
            }
            commandSequence += 1
            job.sequence = commandSequence
            for key in job.command.changes.keys { lane.newest[key] = (commandSequence, job.requestTag) }
            job.ready = persistence == nil || job.persisted
            if !job.ready {
                if lane.jobs.isEmpty, mayOverlapStoring(job) {
                    // At the front of an idle lane: sent while its row is committed (see `+Overlap`).
                    job.overlappedCommit = OutboxCommit()
                    job.ready = true
                }
                storeQueue.append(job)
                needsStoring = true
            }
            lane.jobs.append(job)
            lanes[id] = lane
            startLaneIfIdle(id)
        }
        if needsStoring, !storing {
            storing = true
            hub.tasks.spawn { [self] in await storeWaitingCommands() }
        }
    }

    package func enqueue(_ job: CommandJob) {
        enqueue([job])
    }

    /// Commands waiting (or running) per device, for `health`.
    package var queueDepths: [DeviceID: Int] {
        lanes.compactMapValues { $0.jobs.isEmpty ? nil : $0.jobs.count }
    }

    /// True when newer admitted commands set every key this one sets: running it would only be undone.
    package func isSuperseded(_ job: CommandJob) -> Bool {
        guard let lane = lanes[job.command.device], !job.command.changes.isEmpty else { return false }
        return job.command.changes.keys.allSatisfy { key in
            guard let newest = lane.newest[key] else { return false }
            return newest.sequence > job.sequence && (newest.request == nil || newest.request != job.requestTag)
        }
    }

    private func startLaneIfIdle(_ id: DeviceID) {
        guard lanes[id]?.runnerActive == false else { return }
        lanes[id]?.runnerActive = true
        hub.tasks.spawn { [self] in await runLane(id) }
    }

    private func runLane(_ id: DeviceID) async {
        while let job = await nextReadyJob(id) {
            await runCommand(job)
            if let index = lanes[id]?.jobs.firstIndex(where: { $0.command.id == job.command.id }) {
                lanes[id]?.jobs.remove(at: index)
            }
        }
    }

    /// The front command once it is stored; nil (and the runner ends) when the lane is empty.
    private func nextReadyJob(_ id: DeviceID) async -> CommandJob? {
        while true {
            guard let front = lanes[id]?.jobs.first else {
                // An idle lane keeps only what supersession still needs: nothing, since no older command waits.
                lanes[id] = nil
                return nil
            }
            if front.ready { return front }
            await withCheckedContinuation { continuation in
                lanes[id]?.waiter = continuation
            }
        }
    }

    private func wakeLane(_ id: DeviceID) {
        guard let waiter = lanes[id]?.waiter else { return }
        lanes[id]?.waiter = nil
        waiter.resume()
    }

    /// The one writer of new outbox rows: everything admitted while the previous transaction ran goes
    /// into the next one, so concurrent commands share a commit.
    private func storeWaitingCommands() async {
        while !storeQueue.isEmpty {
            let group = storeQueue
            storeQueue.removeAll(keepingCapacity: true)
            let stored = group.map(isFront)
            let failure = await storeInOutbox(group)
            for (job, storedSending) in zip(group, stored) {
                // Already running: it hears the commit's outcome itself.
                if let commit = job.overlappedCommit {
                    commit.resolve(failure)
                    continue
                }
                let id = job.command.device
                guard let index = lanes[id]?.jobs.firstIndex(where: { $0.command.id == job.command.id }) else { continue }
                if let failure, hub.config.commands.whenStorageFails == .refuse {
                    lanes[id]?.jobs.remove(at: index)
                    refusedCount += 1
                    refuse(job, failure)
                } else {
                    lanes[id]?.jobs[index].ready = true
                    // Stored: later outbox marks apply. Sent unstored (`when_storage_fails: send`): there is no row to mark.
                    lanes[id]?.jobs[index].persisted = failure == nil
                    lanes[id]?.jobs[index].storedSending = failure == nil && storedSending
                }
                wakeLane(id)
            }
        }
        storing = false
    }

    /// Stores commands durably in one transaction; the error when that failed (the storage is then reported
    /// unhealthy). A command at the front of its lane goes to its vendor next, so it is stored as `sending`.
    package func storeInOutbox(_ jobs: [CommandJob]) async -> GatewayError? {
        guard let outbox else { return nil }
        var changes: [OutboxChange] = []
        changes.reserveCapacity(jobs.count)
        for job in jobs {
            let command = job.command
            guard let json = command.outboxJSON else { continue }
            let entry = OutboxEntry(id: command.id, vendorID: command.vendorID, deviceID: command.device.rawValue, json: json,
                                    createdAt: command.issuedAt.timeIntervalSince1970, expiresAt: command.expiresAt.timeIntervalSince1970)
            changes.append(.insert(entry, sending: isFront(job)))
        }
        guard let error = await outbox.write(changes) else { return nil }
        let failure = storageError(error)
        if hub.config.commands.whenStorageFails == .send {
            rateLimitedLog("outbox", .error, "cannot store commands in the outbox (\(failure.message)); sending them anyway (commands.when_storage_fails: send)")
        }
        return failure
    }

    /// True when `job` is the next its lane runs.
    package func isFront(_ job: CommandJob) -> Bool {
        lanes[job.command.device]?.jobs.first?.command.id == job.command.id
    }

    /// A command that never entered a lane (queue full, storage unavailable): reported, never stored or sent.
    package func refuse(_ job: CommandJob, _ failure: GatewayError) {
        job.completion?(failure)
        fail(failure, device: job.command.device, context: commandContext(job.command), reply: job.reply)
    }
}

extension Commands {
    /// Every command waiting or running, oldest first (the status page's outbox).
    package func waitingCommands() -> [JSON] {
        let entries = lanes.flatMap { id, lane in
            lane.jobs.enumerated().map { index, job in (id: id, job: job, running: index == 0 && lane.runnerActive && job.ready) }
        }
        return entries.sorted { $0.job.command.issuedAt < $1.job.command.issuedAt }.map { entry in
            [
                "device": .string(entry.id.rawValue), "command_id": .string(entry.job.command.id),
                "changes": .object(entry.job.command.changes.mapValues(JSON.init)),
                "issued_at": .string(ISOTime.format(entry.job.command.issuedAt)),
                "state": .string(entry.running ? "running" : entry.job.ready ? "waiting" : "storing"),
            ]
        }
    }
}
