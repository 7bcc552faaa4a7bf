import Cache
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import Logging

/// The command outbox: every command is stored before it is sent, waits while its vendor is down,
/// runs once on recovery (in order per device), and is dropped as `expired` after its TTL.
extension Commands {
    /// Runs one command at the front of its device lane: with its batch group when it has one,
    /// otherwise (or for what the batch call left undone) on its own.
    package func runCommand(_ job: CommandJob) async {
        var job = job
        if let commit = job.overlappedCommit {
            job.overlappedCommit = nil
            return await runOverlapped(job, commit: commit)
        }
        if isSuperseded(job) { return await settleFailed(job, .superseded(commandID: job.command.id)) }
        if job.batchGroup != nil {
            switch await joinBatch(job) {
            case .done: return
            case .single: break
            case .unknown(let failure):
                guard let vendor = hub.vendors[job.command.vendorID] else { break }
                if await settleUnknownOutcome(job, failure, vendor: vendor, mayResend: true) { return }
                // The batch call was its one send; what follows is its one re-send.
                return await attempt(job, resent: true)
            }
        }
        await attempt(job)
    }

    /// Outbox marks of a command that has a row (a command sent unstored under `when_storage_fails: send`
    /// has none), written behind with the next commit: the sender hears the outcome first.
    package func recordLater(_ job: CommandJob, _ change: OutboxChange) {
        guard job.persisted else { return }
        outbox?.post(change)
    }

    /// A mark that must be durable before what follows (`sending` before a vendor call).
    package func recordNow(_ job: CommandJob, _ changes: [OutboxChange]) async {
        guard job.persisted, let outbox else { return }
        _ = await outbox.write(changes)
    }

    /// Sends a command until it is carried out, refused, superseded or expired. A failure where the request
    /// surely did not reach the vendor (vendor down, breaker open) waits and tries again; a failure after
    /// which the command may have been carried out (a timeout after sending) is never re-sent blindly:
    /// see `settleUnknownOutcome`. `resent`: the command was already sent once more after an unknown outcome.
    package func attempt(_ job: CommandJob, resent alreadyResent: Bool = false, firstCall: FirstCall? = nil) async {
        let command = job.command
        let id = command.id
        var backoff = Duration.milliseconds(250)
        // At most one re-send after an unknown outcome: a backend that takes the command but never shows it
        // would otherwise get it again after every settle window until the command expires.
        var resent = alreadyResent
        // Stored as `sending` when it could go at once: no second commit before the first vendor call.
        var markedSending = job.storedSending
        // A call already made while the command's row was committed (see `+Overlap`): its result is taken first.
        var madeCall = firstCall
        while true {
            let vendor: any Vendor
            let callStarted: ContinuousClock.Instant
            let result: Result<CommandOutcome, any Error>
            if let made = madeCall {
                madeCall = nil
                (vendor, callStarted, result) = (made.vendor, made.started, made.result)
            } else {
                guard let current = hub.vendors[command.vendorID], hub.devices[command.device] != nil else {
                    return await settleFailed(job, .unknownDevice(command.device.rawValue))
                }
                vendor = current
                if isSuperseded(job) { return await settleFailed(job, .superseded(commandID: id)) }
                if hub.now() > command.expiresAt {
                    return await settleFailed(job, .expired(commandID: id, expiredAt: command.expiresAt))
                }
                if !markedSending { await recordNow(job, [.transition(id: id, to: .sending)]) }
                markedSending = false
                callStarted = ContinuousClock.now
                result = await Self.capture { try await self.sending { try await current.execute(command) } }
            }
            do {
                let outcome = try result.get()
                hub.emit(.vendorCallFinished(vendorID: command.vendorID, duration: .now - callStarted, error: nil))
                return await settleSucceeded(job, outcome)
            } catch {
                let failure = error as? GatewayError ?? GatewayError(.internal, message: "\(error)")
                hub.emit(.vendorCallFinished(vendorID: command.vendorID, duration: .now - callStarted, error: failure))
                if failure.outcomeUnknown || failure.code == .vendorTimeout {
                    if await settleUnknownOutcome(job, failure, vendor: vendor, mayResend: !resent) { return }
                    resent = true
                    continue
                }
                // Includes a vendor refusing a command whose deadline passed while it was in flight.
                guard failure.retryable else { return await settleFailed(job, failure) }
                // The vendor is unhealthy: keep the command (and the ones behind it) waiting.
                recordLater(job, .transition(id: id, to: .pending, error: failure.jsonText))
                let remaining = command.expiresAt.timeIntervalSince(hub.now())
                var wait = max(backoff, failure.retryAfter ?? .zero)
                if remaining < wait.inSeconds { wait = .milliseconds(Int64(max(0, remaining) * 1000) + 10) }
                hub.logger.info("command \(id) waits for \(command.vendorID) (\(failure.code.rawValue)); next try in \(GatewayError.readable(wait))")
                await waitForVendor(command.vendorID, atMost: wait)
                // Shutting down: the row stays queued and runs after the restart.
                if Task.isCancelled { return }
                backoff = min(backoff * 2, .seconds(5))
            }
        }
    }

    /// The command may or may not have been carried out (the vendor did not answer in time, but the request
    /// was sent). Sending it again could run it twice, and an old copy still in flight could overtake a newer
    /// command. So the device's state is read back, with growing pauses, for up to `commands.settle_window`;
    /// newer commands for the device wait meanwhile (they are behind this one in its lane).
    /// - The state shows the change: done (the outcome is the state read back).
    /// - Not within the window: `superseded` when a newer command sets the same keys; otherwise re-sent once
    ///   more only if it is idempotent, not for a lock, garage door or cover, and `mayResend` (it was not
    ///   re-sent already) (returns false); else failed with the failure's code.
    /// Returns true when the command is settled.
    package func settleUnknownOutcome(_ job: CommandJob, _ failure: GatewayError, vendor: any Vendor, mayResend: Bool) async -> Bool {
        let command = job.command
        let window = Duration.seconds(max(0, hub.config.commands.settleWindow))
        let settleBy = hub.now().addingTimeInterval(max(0, hub.config.commands.settleWindow))
        var pause = Duration.milliseconds(500)
        hub.logger.notice("command \(command.id) for \(command.device): \(failure.code.rawValue), its outcome is unknown; reading the state back instead of sending it again")
        while true {
            if let values = try? await vendor.readState(command.device), Self.stateShows(command.changes, in: values) {
                hub.logger.info("command \(command.id) for \(command.device) was carried out (state read back)")
                await settleSucceeded(job, CommandOutcome(confirmed: values))
                return true
            }
            let remaining = settleBy.timeIntervalSince(hub.now())
            if remaining <= 0 { break }
            try? await hub.clock.sleep(for: min(pause, .seconds(remaining)))
            // Shutting down: the row stays `sending`; the restart settles it (never re-sent for locks).
            if Task.isCancelled { return true }
            pause = min(pause * 2, .seconds(8))
        }
        if isSuperseded(job) {
            await settleFailed(job, .superseded(commandID: command.id))
            return true
        }
        let critical = hub.devices[command.device]?.type.isSecurityCritical ?? true
        if !critical, mayResend, hub.now() < command.expiresAt {
            hub.logger.notice("command \(command.id) for \(command.device) did not show in the device's state within \(GatewayError.readable(window)); sending it once more (switching is idempotent)")
            return false
        }
        let why = critical ? " (locks, garage doors and covers are never re-sent)" : mayResend ? "" : " (it was already sent once more)"
        var unknown = failure
        unknown.retryable = false
        unknown.message = "\(failure.message) Whether command \(GatewayError.clip(command.id)) was carried out is unknown: the state read back within \(GatewayError.readable(window)) does not show it, and it is not sent again\(why)."
        unknown.suggestion = "Check the device, then send the command again if it is still wanted."
        await settleFailed(job, unknown)
        return true
    }

    /// True when `values` (read back from the vendor) show every change of a command.
    package static func stateShows(_ changes: [String: StateValue], in values: [String: StateValue]) -> Bool {
        changes.allSatisfy { key, wanted in
            guard let actual = values[key] else { return false }
            switch (wanted, actual) {
            case (.number(let a), .number(let b)): return abs(a - b) <= max(0.5, abs(a) * 0.01)
            case (.bool(let a), .bool(let b)): return a == b
            case (.string(let word), .string(let reported)):
                let word = word.uppercased(), reported = reported.uppercased()
                switch (key, word) {
                case ("lock", "LOCK"): return reported == "LOCKED"
                case ("lock", "UNLOCK"): return reported == "UNLOCKED"
                case ("cover", "OPEN"): return reported == "OPEN"
                case ("cover", "CLOSE"): return reported == "CLOSED"
                case ("cover", "STOP"): return reported != "OPENING" && reported != "CLOSING"
                default: return word == reported
                }
            default: return false
            }
        }
    }

    /// The vendor carried out the command: its confirmed state goes out and the outbox row is acked.
    package func settleSucceeded(_ job: CommandJob, _ outcome: CommandOutcome) async {
        let command = job.command
        let id = command.id
        executedCount += 1
        hub.emit(.commandFinished(vendorID: command.vendorID, result: "ok", duration: .clampedSeconds(hub.now().timeIntervalSince(command.issuedAt))))
        hub.applyConfirmed(outcome.confirmed, to: command.device)
        respond(job.reply, status: "ok", data: ["id": .string(id), "device": .string(command.device.rawValue)], error: nil)
        let result = JSONText.object(outcome.confirmed)
        recordLater(job, .transition(id: id, to: .acked, result: result))
        job.completion?(nil)
    }

    /// The command failed for good: the outbox row says why and the sender hears it.
    package func settleFailed(_ job: CommandJob, _ failure: GatewayError) async {
        let command = job.command
        let id = command.id
        if failure.code == .expired {
            recordLater(job, .transition(id: id, to: .expired))
        } else {
            recordLater(job, .transition(id: id, to: .failed, error: failure.jsonText))
        }
        job.completion?(failure)
        hub.emit(.commandFinished(vendorID: command.vendorID, result: failure.code.rawValue,
                                  duration: .clampedSeconds(hub.now().timeIntervalSince(command.issuedAt))))
        fail(failure, device: command.device, context: commandContext(command), reply: job.reply)
    }

    /// After a restart: commands that never reached their vendor run (if not expired); commands
    /// caught mid-send are reported `interrupted` for locks, garage doors and covers (never re-run,
    /// the vendor may have acted) and re-run for idempotent state changes elsewhere.
    public func resumeOutbox() async {
        guard let store = persistence?.store else { return }
        do {
            let decoder = JSONDecoder()
            for entry in try await store.run({ try $0.interruptedEntries() }) {
                guard let command = try? decoder.decode(DeviceCommand.self, from: Data(entry.json.utf8)) else { continue }
                let critical = hub.devices[command.device]?.type.isSecurityCritical ?? true
                if critical {
                    _ = await outbox?.write([.transition(id: entry.id, to: .failed, error: "interrupted")])
                    fail(.interrupted(commandID: entry.id), device: command.device, context: commandContext(command), reply: Reply())
                } else {
                    _ = await outbox?.write([.transition(id: entry.id, to: .pending, error: "interrupted by a restart")])
                }
            }
            let pending = try await store.run({ try $0.pending() })
            for entry in pending {
                guard let command = try? decoder.decode(DeviceCommand.self, from: Data(entry.json.utf8)) else {
                    _ = await outbox?.write([.transition(id: entry.id, to: .failed, error: "unreadable outbox entry")])
                    continue
                }
                enqueue(CommandJob(command: command, reply: Reply(), persisted: true))
            }
            if !pending.isEmpty { hub.logger.info("resumed \(pending.count) queued command(s)") }
        } catch {
            hub.logger.error("cannot read the outbox: \(error)")
        }
    }
}
