import Foundation
import GatewayModel
import GatewayTesting
import MQTT
import Synchronization
import VendorSimulators

/// `lbs-bench sense`: the real `lbs-gateway` process on a Sense realtime feed of two frames a second with 40
/// detected devices whose watts change every frame (the simulator), for `duration`. Reports the frames the
/// feed sent, the device states the gateway published (per-device rate limit: 1 s), its CPU use and memory.
enum SenseBench {
    struct Result {
        var seconds: Double
        var frames: Int
        var states: Int
        var cpuPercent: Double
        var rssKB: Int
    }

    static func run(broker: MosquittoBroker, devices: Int, duration: Duration) async throws -> Result {
        let directory = try TemporaryDirectory(prefix: "lbs-bench-sense")
        defer { directory.remove() }
        let household = (0..<devices).map { SenseSimulator.Device(id: "dev\($0)", name: "Device \($0)", watts: Double(20 + $0 * 7)) }
        let simulator = SenseSimulator(email: "bench@example.com", password: "bench", devices: household, varying: true)
        try await simulator.start()
        let binary = ProcessInfo.processInfo.environment["LBS_BENCH_GATEWAY"]
            ?? URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("lbs-gateway").path
        try "bench".write(toFile: directory.file("sense-password"), atomically: true, encoding: .utf8)
        let config = directory.file("config.yaml")
        try """
        mqtt: {url: \(broker.url), client_id: bench-sense}
        log_level: error
        vendors: [{type: sense, id: sense, url: "\(await simulator.baseURL)", realtime_url: "\(await simulator.realtimeURL)", email: bench@example.com, password_file: sense-password}]
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let process = try ProcessRunner(executable: binary, arguments: ["run", "--config", config], outputDirectory: directory.path, name: "gateway")

        let client = try MQTTClient(configuration: try MQTTConfiguration(url: broker.url, clientID: "bench-sense-client"))
        let counter = Counter()
        let inbound = client.messages
        let forward = Task { for await message in inbound where message.topic.hasPrefix("lbs/device/sense_") && !message.topic.hasSuffix("/availability") { counter.add() } }
        client.start()
        try await waitUntil("sense bench client connected", timeout: .seconds(10)) { client.isConnected }
        try await client.subscribeAndWait(["lbs/device/+"], qos: .atMostOnce, timeout: .seconds(5))
        // The start-up (sign-in, discovery of 40 devices) passes first.
        try await waitUntil("feed running", timeout: .seconds(20)) { counter.value > devices }
        try await Task.sleep(for: .seconds(2))
        let statesBefore = counter.value, framesBefore = simulator.framesSent, cpuBefore = cpuTicks(process.pid)
        let start = ContinuousClock.now
        try await Task.sleep(for: duration)
        let seconds = (ContinuousClock.now - start).inSeconds
        let ticks = cpuTicks(process.pid) - cpuBefore
        let result = Result(
            seconds: seconds, frames: simulator.framesSent - framesBefore, states: counter.value - statesBefore,
            cpuPercent: Double(ticks) / Double(sysconf(Int32(_SC_CLK_TCK))) / seconds * 100, rssKB: rssKB(process.pid)
        )
        forward.cancel()
        await client.shutdown()
        _ = await process.stop()
        await simulator.stop()
        return result
    }

    final class Counter: Sendable {
        private let count = Mutex(0)
        func add() { count.withLock { $0 += 1 } }
        var value: Int { count.withLock { $0 } }
    }

    /// User plus system CPU ticks of a process (`/proc/<pid>/stat` fields 14 and 15).
    static func cpuTicks(_ pid: Int32) -> Int {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Int(fields[11]), let system = Int(fields[12]) else { return 0 }
        return user + system
    }

    static func rssKB(_ pid: Int32) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        return status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
            .flatMap { Int($0.split(separator: " ").dropFirst().first { !$0.isEmpty } ?? "") } ?? -1
    }
}
