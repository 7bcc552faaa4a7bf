#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayCore
import GatewayModel

/// Metrics: breaker and vendor health into `GatewayMetrics` as they change, the text exposition for
/// `GET /metrics`, and every `interval` a retained summary on `<base>/bridge/metrics` for people without Prometheus.
@GatewayActor
package final class MetricsExtension: GatewayExtension {
    package let hub: GatewayHub
    /// Prometheus metrics (`GET /metrics`, `<base>/bridge/metrics`).
    package let metrics = GatewayMetrics()
    private let persistence: CacheLink?
    private let interval: Duration
    private var timerStarted = false

    package init(hub: GatewayHub, persistence: CacheLink?, interval: Duration = .seconds(60)) {
        self.hub = hub
        self.persistence = persistence
        self.interval = interval
    }

    package func handle(_ event: HubEvent) {
        switch event {
        case .vendorHealthChanged(let health, let previous):
            metrics.vendorHealth(health, previous: previous)
        case .vendorCallFinished(let vendorID, let duration, let error):
            metrics.vendorCall(vendor: vendorID, after: duration, error: error)
        case .commandFinished(let vendorID, let result, let duration):
            metrics.commandFinished(vendor: vendorID, result: result, after: duration)
        case .connected:
            publishSummary()
            guard !timerStarted else { return }
            timerStarted = true
            let clock = hub.clock
            let interval = self.interval
            hub.tasks.spawn { [weak self] in
                // Once more soon after the start (the vendors have reported by then), then every interval.
                var wait = min(interval, .seconds(5))
                while !Task.isCancelled {
                    do { try await clock.sleep(for: wait) } catch { return }
                    self?.publishSummary()
                    wait = interval
                }
            }
        default:
            break
        }
    }

    package func snapshot() -> GatewayMetrics.Snapshot {
        if let persistence {
            for duration in persistence.takeBatchDurations() { metrics.cacheBatch(after: duration) }
        }
        var report = BridgeReport()
        for item in hub.extensions { item.report(into: &report) }
        func number(_ value: JSON?) -> Int? { if case .number(let n)? = value { Int(n) } else { nil } }
        var bytes: Int?
        if let path = hub.config.storage?.path {
            bytes = ["", "-wal"].compactMap { suffix in (try? FileManager.default.attributesOfItem(atPath: path + suffix))?[.size] as? Int }.reduce(0, +)
        }
        return GatewayMetrics.Snapshot(
            messagesIn: hub.counters.inboundMessages, statesPublished: report.counters["states_published"] ?? 0, devices: hub.devices.count,
            online: hub.availability.values.filter { $0 }.count, commandsWaiting: number(report.queues["commands_waiting"]) ?? 0,
            droppedEvents: hub.eventInbox?.droppedCount ?? 0, databaseBytes: bytes, cacheRowsWaiting: number(report.queues["cache_rows_waiting"]),
            commandsExecuted: report.counters["commands_executed"] ?? 0
        )
    }

    /// The Prometheus text exposition (format 0.0.4).
    package func exposition() -> String { metrics.render(snapshot()) }

    /// `<base>/bridge/metrics` (retained): the same numbers as JSON.
    package func publishSummary() {
        let snapshot = self.snapshot()
        var summary: [String: JSON] = [
            "time": .string(ISOTime.format(hub.now())),
            "messages_in": .number(Double(snapshot.messagesIn)), "states_published": .number(Double(snapshot.statesPublished)),
            "devices": .number(Double(snapshot.devices)), "devices_online": .number(Double(snapshot.online)),
            "commands_executed": .number(Double(snapshot.commandsExecuted)), "commands_failed": .number(Double(hub.counters.commandsFailed)),
            "commands_waiting": .number(Double(snapshot.commandsWaiting)), "dropped_events": .number(Double(snapshot.droppedEvents)),
            "rss_bytes": .number(Double(GatewayMetrics.residentBytes())),
            "vendors_down": .array(hub.vendorHealth.values.filter { $0.state == .down }.map(\.vendorID).sorted().map(JSON.string)),
        ]
        if let bytes = snapshot.databaseBytes { summary["database_bytes"] = .number(Double(bytes)) }
        hub.transport.publish(hub.topics.base + "/bridge/metrics", JSON.object(summary).render(), qos: 1, retain: true)
    }
}
