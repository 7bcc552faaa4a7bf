import Cache
import Foundation
import GatewayModel
import Logging

/// The command outbox: every command is stored before it is sent, waits while its vendor is down,
/// runs once on recovery (in order per device), and is dropped as `expired` after its TTL.
extension GatewayController {
    /// Stores arriving commands durably (one transaction for the group) before they join their lanes.
    func storeInOutbox(_ jobs: [CommandJob]) async {
        if let persistence {
            let encoder = JSONEncoder()
            let entries = jobs.filter { !$0.persisted }.compactMap { job -> OutboxEntry? in
                let command = job.command
                guard let json = try? String(decoding: encoder.encode(command), as: UTF8.self) else { return nil }
                return OutboxEntry(id: command.id, vendorID: command.vendorID, deviceID: command.device.rawValue, json: json,
                                   createdAt: command.issuedAt.timeIntervalSince1970, expiresAt: command.expiresAt.timeIntervalSince1970)
            }
            do {
                _ = try await persistence.store.run { try $0.enqueue(entries) }
            } catch {
                logger.error("cannot store \(entries.count) command(s) in the outbox: \(error); sending anyway")
            }
        }
        for var job in jobs {
            job.persisted = true
            dispatchToLane(job)
        }
    }

    /// Runs one command at the front of its device lane: with its batch group when it has one,
    /// otherwise (or for what the batch call left undone) on its own.
    func runCommand(_ job: CommandJob) async {
        if job.batchGroup != nil, await joinBatch(job) == .done { return }
        await attempt(job)
    }

    func record(_ body: @escaping @Sendable (GatewayStore) throws -> Void) async {
        guard let store = persistence?.store else { return }
        do {
            try await store.run(body)
        } catch {
            logger.error("outbox write failed: \(error)")
        }
    }

    func attempt(_ job: CommandJob) async {
        let command = job.command
        let id = command.id
        var backoff = Duration.milliseconds(250)
        while true {
            guard let vendor = vendors[command.vendorID], devices[command.device] != nil else {
                return await settleFailed(job, .unknownDevice(command.device.rawValue))
            }
            if now() > command.expiresAt {
                return await settleFailed(job, .expired(commandID: id, expiredAt: command.expiresAt))
            }
            await record { try $0.markSending(id: id) }
            do {
                return await settleSucceeded(job, try await vendor.execute(command))
            } catch {
                let failure = error as? GatewayError ?? GatewayError(.internal, message: "\(error)")
                // Includes a vendor refusing a command whose deadline passed while it was in flight.
                guard failure.retryable else { return await settleFailed(job, failure) }
                // The vendor is unhealthy: keep the command (and the ones behind it) waiting.
                await record { try $0.requeue(id: id, error: failure.jsonText) }
                let remaining = command.expiresAt.timeIntervalSince(now())
                var wait = max(backoff, failure.retryAfter ?? .zero)
                if remaining < wait.seconds { wait = .milliseconds(Int64(max(0, remaining) * 1000) + 10) }
                logger.info("command \(id) waits for \(command.vendorID) (\(failure.code.rawValue)); next try in \(wait)")
                try? await clock.sleep(for: wait)
                backoff = min(backoff * 2, .seconds(5))
            }
        }
    }

    /// The vendor carried out the command: its confirmed state goes out and the outbox row is acked.
    func settleSucceeded(_ job: CommandJob, _ outcome: CommandOutcome) async {
        let command = job.command
        let id = command.id
        counters.commandsExecuted += 1
        applyConfirmed(outcome.confirmed, to: command.device)
        respond(job.reply, status: "ok", data: ["id": .string(id), "device": .string(command.device.rawValue)], error: nil)
        let result = JSONText.object(outcome.confirmed)
        await record { try $0.markAcked(id: id, resultJSON: result) }
        job.completion?(nil)
    }

    /// The command failed for good: the outbox row says why and the sender hears it.
    func settleFailed(_ job: CommandJob, _ failure: GatewayError) async {
        let command = job.command
        let id = command.id
        if failure.code == .expired {
            await record { try $0.markExpired(id: id) }
        } else {
            await record { try $0.markFailed(id: id, error: failure.jsonText) }
        }
        job.completion?(failure)
        fail(failure, device: command.device, context: commandContext(command), reply: job.reply)
    }

    func applyConfirmed(_ confirmed: [String: StateValue], to id: DeviceID) {
        guard devices[id] != nil, !confirmed.isEmpty else { return }
        states[id, default: DeviceState()].merge(confirmed, observedAt: now())
        publishState(id)
        markAggregatesDirty(for: id)
        if persistence != nil {
            dirtyStates.insert(id)
            schedulePersist()
        }
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
                let critical = devices[command.device]?.type.isSecurityCritical ?? true
                if critical {
                    await record { try $0.markFailed(id: entry.id, error: "interrupted") }
                    fail(.interrupted(commandID: entry.id), device: command.device, context: commandContext(command), reply: Reply())
                } else {
                    await record { try $0.requeue(id: entry.id, error: "interrupted by a restart") }
                }
            }
            let pending = try await store.run({ try $0.pending() })
            for entry in pending {
                guard let command = try? decoder.decode(DeviceCommand.self, from: Data(entry.json.utf8)) else {
                    await record { try $0.markFailed(id: entry.id, error: "unreadable outbox entry") }
                    continue
                }
                enqueue(CommandJob(command: command, reply: Reply(), persisted: true))
            }
            if !pending.isEmpty { logger.info("resumed \(pending.count) queued command(s)") }
        } catch {
            logger.error("cannot read the outbox: \(error)")
        }
    }
}

extension Duration {
    var seconds: Double {
        let parts = components
        return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
    }
}
