import GatewayCore
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif
import GatewayModel
import Prometheus
import Synchronization

/// The gateway's Prometheus metrics (swift-prometheus' collector registry): what the core counts as it works
/// (commands by vendor and result, their latency, vendor calls, breaker trips) plus what is read at scrape time
/// (messages, devices, queues, database size, memory). Served on `GET /metrics` (`http.listen`) and summarised
/// on `<base>/bridge/metrics`.
package final class GatewayMetrics: Sendable {
    package let registry = PrometheusCollectorRegistry()
    private static let latencyBuckets: [Duration] = [.milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
                                                     .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10)]

    /// A metric's name and help (the name already carries its unit: `_seconds`, `_bytes`, `_total`).
    package static func describe(_ name: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: name, unitName: "", helpText: help)
    }

    /// A finished command: `result` is `ok` or the error code.
    package func commandFinished(vendor: String, result: String, after duration: Duration) {
        registry.makeCounter(descriptor: Self.describe("lbs_commands_total", "Commands carried out or failed, by vendor and result (ok or the error code)"), labels: [("vendor", vendor), ("result", result)]).increment()
        registry.makeDurationHistogram(descriptor: Self.describe("lbs_command_duration_seconds", "From a command's arrival to its outcome"), labels: [("vendor", vendor)], buckets: Self.latencyBuckets).record(duration)
    }

    /// One call to a vendor to carry out commands, and how it ended.
    package func vendorCall(vendor: String, after duration: Duration, error: GatewayError?) {
        registry.makeDurationHistogram(descriptor: Self.describe("lbs_vendor_call_duration_seconds", "Vendor calls that carry out commands"), labels: [("vendor", vendor)], buckets: Self.latencyBuckets).record(duration)
        if let error { vendorError(vendor: vendor, code: error.code.rawValue) }
    }

    /// One telemetry transaction of the cache's write-behind (states, readings, registry rows).
    package func cacheBatch(after duration: Duration) {
        registry.makeDurationHistogram(descriptor: Self.describe("lbs_cache_write_batch_seconds", "Telemetry transactions of the cache's write-behind"),
                                       buckets: Self.cacheBuckets).record(duration)
    }

    private static let cacheBuckets: [Duration] = [.milliseconds(1), .milliseconds(2.5), .milliseconds(5), .milliseconds(10), .milliseconds(25),
                                                   .milliseconds(50), .milliseconds(100), .milliseconds(250), .seconds(1)]

    package func vendorError(vendor: String, code: String) {
        registry.makeCounter(descriptor: Self.describe("lbs_vendor_errors_total", "Vendor failures by error code (command calls and health changes)"), labels: [("vendor", vendor), ("code", code)]).increment()
    }

    /// A vendor's health changed: its breaker state, a trip when it opened, its error.
    package func vendorHealth(_ health: VendorHealth, previous: VendorHealth?) {
        let vendor = health.vendorID
        let breaker: Double = switch health.breaker {
        case "open"?: 2
        case "half_open"?: 1
        default: 0
        }
        registry.makeGauge(descriptor: Self.describe("lbs_breaker_state", "The vendor's circuit breaker: 0 closed, 1 half-open, 2 open"), labels: [("vendor", vendor)])
            .set(to: breaker)
        if health.breaker == "open", previous?.breaker != "open" {
            registry.makeCounter(descriptor: Self.describe("lbs_breaker_trips_total", "Times the vendor's breaker opened"), labels: [("vendor", vendor)]).increment()
        }
        registry.makeGauge(descriptor: Self.describe("lbs_vendor_up", "1 while the vendor is ok or degraded, 0 while down"), labels: [("vendor", vendor)])
            .set(to: health.state == .down ? 0 : 1)
        if let error = health.lastError, error != previous?.lastError, health.state != .ok { vendorError(vendor: vendor, code: error.code.rawValue) }
    }

    package struct Snapshot {
        package var messagesIn: Int
        package var statesPublished: Int
        package var devices: Int
        package var online: Int
        package var commandsWaiting: Int
        package var droppedEvents: Int
        package var databaseBytes: Int?
        package var cacheRowsWaiting: Int?
        package var commandsExecuted = 0
    }

    /// Counters only grow: each scrape adds what the core counted since the last one.
    private let last = Mutex<[String: Int]>([:])

    /// What is read at scrape time; then the registry's text exposition.
    package func render(_ snapshot: Snapshot) -> String {
        func counter(_ name: String, _ help: String, _ value: Int) {
            let delta = last.withLock { last -> Int in
                defer { last[name] = value }
                return max(0, value - (last[name] ?? 0))
            }
            registry.makeCounter(descriptor: Self.describe(name, help)).increment(by: Int64(delta))
        }
        counter("lbs_mqtt_messages_in_total", "MQTT messages received on the gateway's topics", snapshot.messagesIn)
        counter("lbs_states_published_total", "Device states published", snapshot.statesPublished)
        counter("lbs_dropped_events_total", "Vendor events dropped because the inbox was full", snapshot.droppedEvents)
        registry.makeGauge(descriptor: Self.describe("lbs_devices", "Devices known")).set(to: Double(snapshot.devices))
        registry.makeGauge(descriptor: Self.describe("lbs_devices_online", "Devices online")).set(to: Double(snapshot.online))
        registry.makeGauge(descriptor: Self.describe("lbs_outbox_depth", "Commands waiting in their device lanes")).set(to: Double(snapshot.commandsWaiting))
        if let bytes = snapshot.databaseBytes { registry.makeGauge(descriptor: Self.describe("lbs_database_size_bytes", "The SQLite cache's size")).set(to: Double(bytes)) }
        if let rows = snapshot.cacheRowsWaiting { registry.makeGauge(descriptor: Self.describe("lbs_cache_rows_waiting", "Rows waiting for the cache writer")).set(to: Double(rows)) }
        registry.makeGauge(descriptor: Self.describe("lbs_process_resident_memory_bytes", "Resident memory of the gateway")).set(to: Double(Self.residentBytes()))
        return registry.emitToString()
    }

    /// RSS from /proc/self/statm (pages × page size).
    package static func residentBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
