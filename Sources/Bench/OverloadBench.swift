import Foundation
import GatewayModel
import GatewayTesting
import MQTT

/// `lbs-bench overload`: the real `lbs-gateway` process, its demo vendor driven faster than the box can
/// publish (`devices` × 1/`poll_interval` state updates a second), while a separate client sends `/set`
/// commands at a steady rate and times each until the new state arrives. Reports `/set` → state p50/p99,
/// the rate the gateway published at, what it coalesced, and resident memory sampled every 5 s.
enum OverloadBench {
    struct Result {
        var offeredPerSecond: Double
        var publishedPerSecond: Double
        var samples: [Double]
        var lost: Int
        var rss: [(second: Int, kb: Int)]
        var coalesced: String
    }

    static func run(broker: MosquittoBroker, devices: Int, pollInterval: Double, duration: Duration, commandsPerSecond: Int) async throws -> Result {
        let directory = try TemporaryDirectory(prefix: "lbs-bench-overload")
        defer { directory.remove() }
        let binary = ProcessInfo.processInfo.environment["LBS_BENCH_GATEWAY"]
            ?? URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("lbs-gateway").path
        let config = directory.file("config.yaml")
        try """
        mqtt: {url: \(broker.url), client_id: bench-overload\(ProcessInfo.processInfo.environment["LBS_BENCH_MQTT"].map { ", " + $0 } ?? "")}
        log_level: error
        vendors: [{type: demo, id: demo, poll_interval: \(pollInterval), devices: \(devices)}]
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let process = try ProcessRunner(executable: binary, arguments: ["run", "--config", config], outputDirectory: directory.path, name: "gateway")

        var configuration = try MQTTConfiguration(url: broker.url, clientID: "bench-overload-client")
        configuration.inboundBufferSize = 100_000
        let client = try MQTTClient(configuration: configuration)
        let (seen, continuation) = AsyncStream.makeStream(of: MQTTMessage.self, bufferingPolicy: .unbounded)
        let inbound = client.messages
        let forward = Task { for await message in inbound { continuation.yield(message) } }
        client.start()
        try await waitUntil("overload client connected", timeout: .seconds(10)) { client.isConnected }
        try await client.subscribeAndWait(["lbs/device/demo_light", "lbs/bridge/response/health"], qos: .atMostOnce, timeout: .seconds(5))
        var iterator = seen.makeAsyncIterator()
        /// The next message, or nil once `deadline` has passed: an empty wake-up message ends a wait on a gateway that
        /// went quiet (e.g. an older build that does not answer), so the run ends instead of hanging.
        func next(before deadline: ContinuousClock.Instant) async -> MQTTMessage? {
            guard ContinuousClock.now < deadline else { return nil }
            let wake = Task {
                try? await Task.sleep(until: deadline)
                if !Task.isCancelled { continuation.yield(MQTTMessage(topic: "", payload: [])) }
            }
            defer { wake.cancel() }
            guard let message = await iterator.next() else { return nil }
            return message.topic.isEmpty && ContinuousClock.now >= deadline ? nil : message
        }

        func health() async -> [String: Any]? {
            client.publish("lbs/bridge/request/health", Array("{}".utf8), qos: .atMostOnce)
            let deadline = ContinuousClock.now + .seconds(5)
            while let message = await next(before: deadline) {
                guard message.topic == "lbs/bridge/response/health" else { continue }
                let object = try? JSONSerialization.jsonObject(with: Data(message.payload)) as? [String: Any]
                return object?["data"] as? [String: Any]
            }
            return nil
        }
        func published(_ data: [String: Any]?) -> Double {
            ((data?["messages"] as? [String: Any])?["states_published"] as? Double) ?? 0
        }
        func rssKB() -> Int {
            let status = (try? String(contentsOfFile: "/proc/\(process.pid)/status", encoding: .utf8)) ?? ""
            return status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
                .flatMap { Int($0.split(separator: " ").dropFirst().first { !$0.isEmpty } ?? "") } ?? -1
        }

        // Let the start-up burst (discovery, first states) pass before measuring.
        try await Task.sleep(for: .seconds(3))
        let before = published(await health())
        let start = ContinuousClock.now
        var samples: [Double] = []
        var lost = 0
        var rss: [(Int, Int)] = [(0, rssKB())]
        var nextSample = 5
        var index = 0
        let pause = Duration.milliseconds(1000 / max(1, commandsPerSecond))
        while ContinuousClock.now - start < duration {
            index += 1
            let brightness = 10 + index % 80
            let needle = Array("\"brightness\":\(brightness),".utf8)
            let sent = ContinuousClock.now
            client.publish("lbs/device/demo_light/set", Array("{\"brightness\":\(brightness)}".utf8), qos: .atMostOnce)
            var answered = false
            let deadline = sent + .seconds(10)
            while let message = await next(before: deadline) {
                if message.topic == "lbs/device/demo_light", message.payload.firstRange(of: needle) != nil {
                    answered = true
                    break
                }
            }
            if answered { samples.append((ContinuousClock.now - sent).inSeconds * 1000) } else { lost += 1 }
            let elapsed = Int((ContinuousClock.now - start).inSeconds)
            if elapsed >= nextSample {
                rss.append((elapsed, rssKB()))
                nextSample += 5
            }
            let spent = ContinuousClock.now - sent
            if spent < pause { try await Task.sleep(for: pause - spent) }
        }
        let elapsed = (ContinuousClock.now - start).inSeconds
        let final = await health()
        let dropped = (final?["dropped"] as? [String: Any]) ?? [:]
        let coalesced = ["coalesced_vendor_events", "coalesced_states", "vendor_events"]
            .map { "\($0) \(Int((dropped[$0] as? Double) ?? 0))" }.joined(separator: ", ")
        forward.cancel()
        await client.shutdown()
        _ = await process.stop()
        return Result(offeredPerSecond: Double(devices + 6) / pollInterval, publishedPerSecond: (published(final) - before) / elapsed,
                      samples: samples.sorted(), lost: lost, rss: rss.map { (second: $0.0, kb: $0.1) }, coalesced: coalesced)
    }
}
