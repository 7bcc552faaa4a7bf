import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayTesting
import MQTT
import TestTraits
import Testing

/// `GET /metrics` on the HTTP listener, read by the reference Prometheus text-format parser (Python's
/// prometheus_client) when it is installed, and `<base>/bridge/metrics`.
@Suite(.integration, .serialized, .timeLimit(.minutes(2))) struct MetricsTests {
    static func fetch(_ url: String) async throws -> String {
        let directory = try TemporaryDirectory()
        let process = try ProcessRunner(executable: "/usr/bin/curl", arguments: ["-sS", "--max-time", "5", url], outputDirectory: directory.path, name: "curl")
        let status = await process.waitForExit(timeout: .seconds(10))
        #expect(status == .exited(0), "curl: \(process.standardError())")
        return process.standardOutput()
    }

    /// Families and samples as prometheus_client parses them: `name{labels} value` lines; nil without the parser.
    static func parse(_ text: String) async throws -> [String]? {
        let directory = try TemporaryDirectory()
        try text.write(toFile: directory.file("metrics.txt"), atomically: true, encoding: .utf8)
        let script = """
        import sys
        try:
            from prometheus_client.parser import text_string_to_metric_families
        except ImportError:
            sys.exit(3)
        for family in text_string_to_metric_families(open(sys.argv[1]).read()):
            for s in family.samples:
                labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
                print(f"{family.type} {s.name}{{{labels}}} {s.value}")
        """
        let process = try ProcessRunner(executable: "/usr/bin/env", arguments: ["python3", "-c", script, directory.file("metrics.txt")],
                                        outputDirectory: directory.path, name: "parse")
        let status = await process.waitForExit(timeout: .seconds(30))
        if status == .exited(3) { return nil }
        #expect(status == .exited(0), "the text format did not parse: \(process.standardError())")
        return process.standardOutput().split(separator: "\n").map(String.init)
    }

    @Test func metricsAreScrapedAndSummarisedOnMQTT() async throws {
        let port = try freeLoopbackPort()
        let gateway = try await GatewayHarness.start(yaml: "http: {listen: \"127.0.0.1:\(port)\"}", storage: true)
        defer { Task { await gateway.stop() } }
        let client = try await gateway.observer("lbs/bridge/metrics", "replies/#")
        try await client.publish("lbs/device/demo_light/set", #"{"state":"ON"}"#, qos: .atLeastOnce, responseTopic: "replies/on")
        _ = try await client.waitForMessage(topic: "replies/on", timeout: .seconds(10))
        try await client.publish("lbs/device/demo_light/set", #"{"brightness":400}"#, qos: .atLeastOnce, responseTopic: "replies/bad")
        _ = try await client.waitForMessage(topic: "replies/bad", timeout: .seconds(10))

        let text = try await Self.fetch("http://127.0.0.1:\(port)/metrics")
        #expect(text.contains("# TYPE lbs_commands_total counter"), "\(text.prefix(400))")
        #expect(text.contains(#"lbs_commands_total{vendor="demo",result="ok"} 1"#))
        #expect(text.contains("lbs_command_duration_seconds_bucket") && text.contains("lbs_vendor_call_duration_seconds_count"))
        #expect(text.contains("lbs_devices ") && text.contains("lbs_process_resident_memory_bytes") && text.contains("lbs_database_size_bytes"))
        #expect(text.contains("lbs_mqtt_messages_in_total"))
        // The cache's write-behind has written the demo's states by now: its transactions are timed.
        #expect(text.contains("lbs_cache_write_batch_seconds_count "), "\(text.prefix(3000))")
        if let samples = try await Self.parse(text) {
            #expect(samples.contains("counter lbs_commands_total{result=ok,vendor=demo} 1"), "\(samples.prefix(20))")
            #expect(samples.contains { $0.hasPrefix("histogram lbs_command_duration_seconds_count{vendor=demo}") })
            #expect(samples.contains { $0.hasPrefix("gauge lbs_devices{} ") })
        }
        // The summary for people without Prometheus: retained, JSON.
        // At the connect, then 5 s later, then every 60 s: the second one counts the command.
        _ = try await client.waitForMessage(topic: "lbs/bridge/metrics", timeout: .seconds(12)) { $0.json?["commands_executed"] as? Double == 1 }
        let late = try await gateway.observer("lbs/bridge/metrics")
        let summary = try await late.waitForMessage(topic: "lbs/bridge/metrics", timeout: .seconds(5))
        #expect(summary.retain && summary.json?["devices"] as? Double == 6 && (summary.json?["rss_bytes"] as? Double ?? 0) > 0)
    }

    @Test func aTakenPortIsLoggedNotFatal() async throws {
        let port = try freeLoopbackPort()
        let first = try await GatewayHarness.start(yaml: "http: {listen: \"127.0.0.1:\(port)\"}")
        defer { Task { await first.stop() } }
        let second = try await GatewayHarness.start(broker: first.broker, yaml: "http: {listen: \"127.0.0.1:\(port)\"}")
        defer { Task { await second.stop() } }
        let client = try await second.observer("lbs/device/demo_light")
        _ = try await client.waitForMessage(topic: "lbs/device/demo_light", timeout: .seconds(10))
        #expect(try await Self.fetch("http://127.0.0.1:\(port)/metrics").contains("lbs_devices"))
    }
}
