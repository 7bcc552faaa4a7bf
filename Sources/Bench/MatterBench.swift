import Foundation
import GatewayModel
import GatewayTesting
import MQTT
import Synchronization
import VendorSimulators

/// `lbs-bench matter`: the real `lbs-gateway` process on the Matter server simulator with `nodes` temperature
/// sensors, fed attribute reports at `rate` a second round-robin for `duration`. Each report carries a new value;
/// the latency is from the simulator sending it to the state arriving on MQTT. Reports p50/p99, lost updates,
/// the gateway's CPU and memory.
enum MatterBench {
    struct Result {
        var seconds: Double
        var sent: Int
        var received: Int
        var p50: Double
        var p99: Double
        var max: Double
        var cpuPercent: Double
        var rssKB: Int
    }

    static func node(_ id: Int) -> Data {
        Data(#"{"node_id":\#(id),"available":true,"is_bridge":false,"attributes":{"0/29/0":[{"0":22,"1":1}],"0/40/1":"Bench","0/40/3":"Bench sensor \#(id)","0/40/10":"1.0","1/29/0":[{"0":770,"1":1}],"1/1026/0":0}}"#.utf8)
    }

    static func run(broker: MosquittoBroker, nodes: Int, rate: Int, duration: Duration) async throws -> Result {
        let directory = try TemporaryDirectory(prefix: "lbs-bench-matter")
        defer { directory.remove() }
        let simulator = try MatterSimulator(nodes: (1...nodes).map(node))
        try await simulator.start()
        let binary = ProcessInfo.processInfo.environment["LBS_BENCH_GATEWAY"]
            ?? URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("lbs-gateway").path
        let config = directory.file("config.yaml")
        try """
        mqtt: {url: \(broker.url), client_id: bench-matter}
        log_level: error
        vendors: [{type: matter, id: matter, url: "\(await simulator.url)"}]
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let process = try ProcessRunner(executable: binary, arguments: ["run", "--config", config], outputDirectory: directory.path, name: "gateway")

        // Sent values by node: hundredths of a degree, unique per update, with the time they were sent.
        let sentAt = Mutex<[String: ContinuousClock.Instant]>([:])
        let latencies = Mutex<[Double]>([])
        let client = try MQTTClient(configuration: try MQTTConfiguration(url: broker.url, clientID: "bench-matter-client"))
        let inbound = client.messages
        let seen = Mutex(Set<String>())
        let forward = Task {
            for await message in inbound where message.topic.hasPrefix("lbs/device/matter_") && !message.topic.hasSuffix("/availability") {
                let arrived = ContinuousClock.now
                guard let object = (try? JSONSerialization.jsonObject(with: Data(message.payload))) as? [String: Any],
                      let temperature = object["temperature"] as? Double else { continue }
                let device = String(message.topic.dropFirst("lbs/device/".count))
                seen.withLock { _ = $0.insert(device) }
                let key = "\(device)=\(Int((temperature * 100).rounded()))"
                if let sent = sentAt.withLock({ $0.removeValue(forKey: key) }) {
                    latencies.withLock { $0.append((arrived - sent).inSeconds * 1000) }
                }
            }
        }
        client.start()
        try await waitUntil("matter bench client connected", timeout: .seconds(10)) { client.isConnected }
        try await client.subscribeAndWait(["lbs/device/+"], qos: .atMostOnce, timeout: .seconds(5))
        try await waitUntil("every node published", timeout: .seconds(60)) { seen.withLock { $0.count } >= nodes }
        try await Task.sleep(for: .seconds(1))
        let cpuBefore = SenseBench.cpuTicks(process.pid)
        let start = ContinuousClock.now
        let interval = Duration.seconds(1) / rate
        var sequence = 0
        var next = start
        while ContinuousClock.now - start < duration {
            sequence += 1
            let nodeID = sequence % nodes + 1
            let value = sequence % 100_000 + 1
            sentAt.withLock { $0["matter_\(nodeID)=\(value)"] = ContinuousClock.now }
            simulator.report(node: UInt64(nodeID), path: "1/1026/0", json: String(value))
            next += interval
            try await Task.sleep(until: next, clock: .continuous)
        }
        let seconds = (ContinuousClock.now - start).inSeconds
        let ticks = SenseBench.cpuTicks(process.pid) - cpuBefore
        try await Task.sleep(for: .seconds(2))
        let measured = latencies.withLock { $0 }.sorted()
        func percentile(_ p: Double) -> Double { measured.isEmpty ? .nan : measured[min(measured.count - 1, Int(Double(measured.count) * p))] }
        let result = Result(
            seconds: seconds, sent: sequence, received: measured.count, p50: percentile(0.5), p99: percentile(0.99), max: measured.last ?? .nan,
            cpuPercent: Double(ticks) / Double(sysconf(Int32(_SC_CLK_TCK))) / seconds * 100, rssKB: SenseBench.rssKB(process.pid)
        )
        forward.cancel()
        await client.shutdown()
        _ = await process.stop()
        await simulator.stop()
        return result
    }
}
