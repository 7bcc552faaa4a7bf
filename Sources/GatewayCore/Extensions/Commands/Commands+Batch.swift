import Cache
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel

/// Batch items of one vendor leave in one vendor call (`Vendor.executeBatch`), without giving up
/// per-device order: each item still waits at the front of its device lane, behind any earlier
/// command for that device. When every item of the group is at its lane front — or the gather
/// window has passed, so one blocked device cannot hold up the rest — the group goes out at once.
/// Items that arrive after that, and items the vendor call left undone for a transient reason
/// (vendor down, timeout), continue one by one through the normal outbox path.
extension Commands {
    /// How long the first item of a group waits for the others before the group goes out without them.
    package static let batchGatherWindow = Duration.milliseconds(250)

    package struct BatchGroup {
        package var vendorID: String
        /// Items of the group that will join (one per device).
        package var expected: Int
        package var waiting: [(job: CommandJob, resume: CheckedContinuation<BatchSlot, Never>)] = []
    }

    package enum BatchSlot: Sendable {
        /// The vendor call settled the command (done or failed for good).
        case done
        /// Run the command on its own.
        case single
        /// The batch call may have carried it out (timeout after sending): settle it by reading back.
        case unknown(GatewayError)
    }

    /// Registers a group before its items enter the outbox; returns its key.
    package func openBatchGroup(vendorID: String, expected: Int) -> String {
        let key = UUID.random().uuidString
        batchGroups[key] = BatchGroup(vendorID: vendorID, expected: expected)
        return key
    }

    /// Waits (at the front of the item's lane) until its group goes out; says what is left to do.
    package func joinBatch(_ job: CommandJob) async -> BatchSlot {
        guard let key = job.batchGroup, batchGroups[key] != nil else { return .single }
        // The body runs synchronously on this actor, so parking cannot race the group leaving.
        return await withCheckedContinuation { continuation in
            park(job, key: key, continuation)
        }
    }

    private func park(_ job: CommandJob, key: String, _ continuation: CheckedContinuation<BatchSlot, Never>) {
        // The group left without this item (gather window): it runs on its own.
        guard var group = batchGroups[key] else { return continuation.resume(returning: .single) }
        group.waiting.append((job, continuation))
        batchGroups[key] = group
        if group.waiting.count >= group.expected {
            hub.tasks.spawn { [self] in await sendBatch(key) }
        } else if group.waiting.count == 1 {
            let clock = hub.clock
            hub.tasks.spawn { [self] in
                try? await clock.sleep(for: Self.batchGatherWindow)
                await sendBatch(key)
            }
        }
    }

    private func sendBatch(_ key: String) async {
        guard let group = batchGroups.removeValue(forKey: key) else { return }
        let moment = hub.now()
        var ready: [(job: CommandJob, resume: CheckedContinuation<BatchSlot, Never>)] = []
        for item in group.waiting {
            // Unknown devices and overdue commands are reported by the single path, as for /set.
            if hub.devices[item.job.command.device] == nil || moment > item.job.command.expiresAt {
                item.resume.resume(returning: .single)
            } else {
                ready.append(item)
            }
        }
        guard let vendor = hub.vendors[group.vendorID], !ready.isEmpty else {
            ready.forEach { $0.resume.resume(returning: .single) }
            return
        }
        // Durable before the vendor call; items stored as `sending` already are marked again (harmless: it only counts the attempt).
        if let outbox, ready.contains(where: \.job.persisted) {
            _ = await outbox.write(ready.filter(\.job.persisted).map { .transition(id: $0.job.command.id, to: .sending) })
        }
        let results = await sending { await vendor.executeBatch(ready.map(\.job.command)) }
        for (job, resume) in ready {
            let id = job.command.id
            switch results[id] {
            case .success(let outcome)?:
                await settleSucceeded(job, outcome)
                resume.resume(returning: .done)
            case .failure(let failure)? where failure.outcomeUnknown || failure.code == .vendorTimeout:
                resume.resume(returning: .unknown(failure))
            case .failure(let failure)? where !failure.retryable:
                await settleFailed(job, failure)
                resume.resume(returning: .done)
            case .failure(let failure)?:
                // Transient: back in line; the single path waits for the vendor and retries.
                recordLater(job, .transition(id: id, to: .pending, error: failure.jsonText))
                resume.resume(returning: .single)
            case nil:
                recordLater(job, .transition(id: id, to: .pending, error: "no result in the batch answer"))
                resume.resume(returning: .single)
            }
        }
    }
}
