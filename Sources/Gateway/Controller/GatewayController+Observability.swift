import Cache
import Foundation
import GatewayModel
import Logging

/// What the gateway reports about itself beyond devices: storage health, dropped messages and events,
/// queue depths — in `health`, `bridge/info` and rate-limited log lines. Nothing is dropped silently.
extension GatewayController {
    /// Counts of things the gateway had to drop, each with its own cause.
    struct Drops: Equatable {
        /// Inbound MQTT messages the client dropped because the controller fell behind.
        var inboundMessages = 0
        /// Vendor events dropped because the event inbox was full.
        var vendorEvents = 0
        /// Publishes the MQTT client dropped while disconnected.
        var offlinePublishes = 0
        /// Bridge responses refused because their v5 Response Topic was not allowed.
        var refusedResponses = 0
    }

    /// The current drop counters (the transport's and the inbox's are read live).
    var drops: Drops {
        var drops = Drops()
        let stats = transport.stats
        drops.inboundMessages = stats.droppedInbound
        drops.offlinePublishes = stats.droppedOffline
        drops.vendorEvents = eventInbox?.droppedCount ?? 0
        drops.refusedResponses = counters.refusedResponses
        return drops
    }

    func dropsJSON(_ drops: Drops) -> JSON {
        [
            "inbound_messages": .number(Double(drops.inboundMessages)),
            "vendor_events": .number(Double(drops.vendorEvents)),
            "offline_publishes": .number(Double(drops.offlinePublishes)),
            "refused_responses": .number(Double(drops.refusedResponses)),
        ]
    }

    /// `{"state":"ok"|"error"|"none",…}`: without `storage:` there is nothing to fail.
    func storageJSON() -> JSON {
        guard let persistence else { return ["state": "none"] }
        let health = persistence.health.snapshot
        return JSON.object([
            "state": .string(health.ok ? "ok" : "error"),
            "path": .string(config.storage?.path ?? ""),
            "last_error": health.lastError.map(JSON.string) ?? .null,
            "since": health.since.map { .string(ISOTime.format($0)) } ?? .null,
            "failed_writes": .number(Double(health.failures)),
            "when_storage_fails": .string(config.commands.whenStorageFails.rawValue),
        ]).compacted
    }

    func queuesJSON() -> JSON {
        let depths = queueDepths
        let deepest = depths.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }.prefix(10)
        return [
            "commands_waiting": .number(Double(depths.values.reduce(0, +))),
            "devices_with_commands": .number(Double(depths.count)),
            "max_per_device": .number(Double(config.commands.maxQueuedPerDevice)),
            "deepest": .object(Dictionary(uniqueKeysWithValues: deepest.map { ($0.key.rawValue, JSON.number(Double($0.value))) })),
            "vendor_events_waiting": .number(Double(eventInbox?.count ?? 0)),
            "refreshes_waiting": .number(Double(refreshes.values.reduce(0) { $0 + $1.waiters.count })),
        ]
    }

    /// An outbox or cache failure: storage is reported unhealthy, and the error says what to do.
    func storageFailed(_ error: any Error, doing what: String) -> GatewayError {
        let detail = "cannot \(what): \(error)"
        persistence?.health.recordFailure(detail)
        noteStorageChange()
        return GatewayError(
            .storageUnavailable,
            message: "The command was not stored: the cache at \(config.storage?.path ?? "?") cannot be written (\(GatewayError.clip("\(error)"))).",
            suggestion: GatewayError.Code.storageUnavailable.defaultSuggestion
        )
    }

    func storageSucceeded() {
        guard let persistence, !persistence.health.snapshot.ok else { return }
        persistence.health.recordSuccess()
        noteStorageChange()
    }

    /// Publishes a `storage_state_changed` event and the new `bridge/info` when the storage state flipped.
    func noteStorageChange() {
        guard let persistence else { return }
        let snapshot = persistence.health.snapshot
        guard snapshot.ok != lastReportedStorageOK else { return }
        lastReportedStorageOK = snapshot.ok
        publishEvent("storage_state_changed", storageJSON())
        publishBridgeInfo()
        if snapshot.ok {
            logger.notice("the cache can be written again")
        } else {
            logger.error("the cache cannot be written: \(snapshot.lastError ?? "unknown error"); commands are \(config.commands.whenStorageFails == .send ? "sent unstored" : "refused with storage_unavailable") until it recovers")
        }
    }

    /// Logs at most one line per `key` and interval, with the number of lines it held back.
    func rateLimitedLog(_ key: String, _ level: Logger.Level, _ message: @autoclosure () -> String, every interval: TimeInterval = 10) {
        let moment = now()
        var entry = logLimits[key] ?? LogLimit()
        if let last = entry.last, moment.timeIntervalSince(last) < interval {
            entry.suppressed += 1
            logLimits[key] = entry
            return
        }
        let held = entry.suppressed
        entry = LogLimit(last: moment, suppressed: 0)
        logLimits[key] = entry
        let suffix = held > 0 ? " (\(held) similar line(s) in the last \(Int(interval)) s not logged)" : ""
        logger.log(level: level, "\(message())\(suffix)")
    }

    struct LogLimit {
        var last: Date?
        var suppressed = 0
    }

    /// Runs every few seconds while connected: reports new drops (log + `bridge/info`) and storage changes.
    func checkDrops() {
        let current = drops
        guard current != lastReportedDrops else { return }
        let previous = lastReportedDrops
        lastReportedDrops = current
        var parts: [String] = []
        if current.inboundMessages > previous.inboundMessages {
            parts.append("\(current.inboundMessages - previous.inboundMessages) inbound MQTT message(s) (the gateway fell behind; raise nothing, slow the sender)")
        }
        if current.vendorEvents > previous.vendorEvents {
            parts.append("\(current.vendorEvents - previous.vendorEvents) vendor event(s) (vendors report faster than the gateway publishes)")
        }
        if current.offlinePublishes > previous.offlinePublishes {
            parts.append("\(current.offlinePublishes - previous.offlinePublishes) publish(es) while the broker was unreachable")
        }
        if current.refusedResponses > previous.refusedResponses {
            parts.append("\(current.refusedResponses - previous.refusedResponses) response(s) to refused response topics")
        }
        if !parts.isEmpty { rateLimitedLog("drops", .warning, "dropped " + parts.joined(separator: "; ")) }
        publishBridgeInfo()
    }

    /// Starts the periodic self-check once.
    func startHousekeeping() {
        guard !housekeepingStarted else { return }
        housekeepingStarted = true
        let clock = self.clock
        Task { [weak self] in
            while !Task.isCancelled {
                do { try await clock.sleep(for: .seconds(5)) } catch { return }
                guard let self else { return }
                await self.housekeeping()
            }
        }
    }

    func housekeeping() {
        checkDrops()
        noteStorageChange()
    }
}
