import ConsciousnessSimulator
import Foundation
import GatewayModel
import GatewayTesting
import MQTT
import Synchronization

/// `lbs-bench soak [minutes] [compression] [devices]`: the real `lbs-gateway` with 1,000 demo devices and a
/// consciousness-simulator house, a QoS 1 command every 100 ms (with a v5 response topic each), the broker
/// restarted every 5 min and the vendor down for 30 s every 7 min — both schedules divided by `compression`.
/// Reports every command's fate (exactly one reply expected: none lost, none twice), resident memory sampled every
/// 10 s and its slope (least squares, after the first fifth of the run), and the vendor's view of what ran.
enum SoakBench {
    struct Result {
        var minutes: Double
        var sent = 0
        var replies: [Int: [String]] = [:]
        var rss: [(seconds: Double, kb: Int)] = []
        var brokerRestarts = 0
        var vendorOutages = 0
        var vendorControlCalls = 0
        var consciousnessOK = 0
        var waitedForGateway: Double = 0

        var lost: [Int] { (1...max(1, sent)).filter { sent > 0 && replies[$0] == nil } }
        var duplicated: [Int] { replies.filter { $0.value.count > 1 }.map(\.key).sorted() }
        var outcomes: [String: Int] {
            var counts: [String: Int] = [:]
            for replies in replies.values {
                guard let first = replies.first else { continue }
                let object = (try? JSONSerialization.jsonObject(with: Data(first.utf8))) as? [String: Any]
                let code = ((object?["error"] as? [String: Any])?["code"] as? String) ?? (object?["status"] as? String ?? "?")
                counts[code, default: 0] += 1
            }
            return counts
        }
        /// KB per minute, least squares over the samples after the warm-up.
        var slopeKBPerMinute: Double {
            let warm = rss.filter { $0.seconds >= minutes * 60 / 5 }
            guard warm.count >= 3 else { return .nan }
            let n = Double(warm.count)
            let meanX = warm.map(\.seconds).reduce(0, +) / n
            let meanY = warm.map { Double($0.kb) }.reduce(0, +) / n
            let numerator = warm.map { ($0.seconds - meanX) * (Double($0.kb) - meanY) }.reduce(0, +)
            let denominator = warm.map { ($0.seconds - meanX) * ($0.seconds - meanX) }.reduce(0, +)
            return denominator > 0 ? numerator / denominator * 60 : .nan
        }
    }

    static let password = "soak-password"

    /// What the client's reader task records (a class: a Mutex cannot be captured by the task itself).
    final class Inbox: Sendable {
        let replies = Mutex<[Int: [String]]>([:])
        let healthAnswers = Atomic<Int>(0)
    }

    static func run(minutes: Double, compression: Double, devices: Int) async throws -> Result {
        let directory = try TemporaryDirectory(prefix: "lbs-bench-soak")
        defer { directory.remove() }
        // A persistent broker: sessions (the gateway's and the bench client's) and their queued QoS 1 messages
        // survive the restarts, as on a real box.
        try FileManager.default.createDirectory(atPath: directory.file("mosquitto"), withIntermediateDirectories: true)
        let broker = try await MosquittoBroker.started(extraConfiguration: "persistence true\npersistence_location \(directory.file("mosquitto"))/\n")
        defer { Task { await broker.stop() } }
        let simulator = ConsciousnessSimulator(configuration: .init(password: password))
        try await simulator.start()
        defer { Task { await simulator.stop() } }
        let base = await simulator.baseURL
        try password.write(toFile: directory.file("password"), atomically: true, encoding: .utf8)

        let binary = ProcessInfo.processInfo.environment["LBS_BENCH_GATEWAY"]
            ?? URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("lbs-gateway").path
        let config = directory.file("config.yaml")
        try """
        mqtt: {url: \(broker.url), client_id: soak-gateway, base_topic: soak, session_expiry: 3600, reconnect_min_delay: 0.2, reconnect_max_delay: 2}
        log_level: warning
        http: {enabled: false}
        storage: {path: \(directory.file("gateway.sqlite"))}
        vendors:
          - {type: demo, id: demo, poll_interval: 5, devices: \(devices)}
          - {type: consciousness, id: house, url: "\(base)", username: admin, password_file: password, poll_interval: 10}
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let gateway = try ProcessRunner(executable: binary, arguments: ["run", "--config", config], outputDirectory: directory.path, name: "gateway")
        defer { Task { _ = await gateway.stop() } }

        var configuration = try MQTTConfiguration(url: broker.url, clientID: "soak-client")
        configuration.cleanStart = false
        configuration.sessionExpiry = .seconds(3600)
        configuration.inboundBufferSize = 100_000
        configuration.reconnect = MQTTReconnectPolicy(minDelay: .milliseconds(100), maxDelay: .seconds(1))
        let client = try MQTTClient(configuration: configuration)
        let inbox = Inbox()
        let inbound = client.messages
        let reader = Task {
            for await message in inbound {
                if message.topic.hasPrefix("replies/soak/"), let index = Int(message.topic.dropFirst("replies/soak/".count)) {
                    inbox.replies.withLock { $0[index, default: []].append(message.payloadString) }
                } else if message.topic == "replies/soak-probe" {
                    inbox.healthAnswers.add(1, ordering: .relaxed)
                }
            }
        }

        defer { reader.cancel() }
        client.start()
        try await waitUntil("soak client connected", timeout: .seconds(10)) { client.isConnected }
        try await client.subscribeAndWait(["replies/soak/#", "replies/soak-probe"], qos: .atLeastOnce, timeout: .seconds(5))

        /// The gateway answers a `health` request: it is connected and subscribed, so a command now reaches it.
        func gatewayAnswers(within limit: Duration) async -> Bool {
            let before = inbox.healthAnswers.load(ordering: .relaxed)
            let deadline = ContinuousClock.now + limit
            while ContinuousClock.now < deadline {
                if client.isConnected {
                    _ = client.publish("soak/bridge/request/health", Array("{}".utf8), qos: .atLeastOnce, properties: .init(responseTopic: "replies/soak-probe"))
                }
                try? await Task.sleep(for: .milliseconds(250))
                if inbox.healthAnswers.load(ordering: .relaxed) > before { return true }
            }
            return false
        }
        guard await gatewayAnswers(within: .seconds(60)) else { throw TestSupportError("the gateway never answered: \(gateway.standardError().suffix(2000))") }

        var result = Result(minutes: minutes)
        let started = ContinuousClock.now
        let end = started + .seconds(minutes * 60)
        let restartEvery = Duration.seconds(300 / compression)
        let outageEvery = Duration.seconds(420 / compression)
        let outageLength = Duration.seconds(max(3, 30 / compression))
        var nextRestart = started + restartEvery
        var nextOutage = started + outageEvery
        var nextSample = started
        var index = 0
        while ContinuousClock.now < end {
            let now = ContinuousClock.now
            if now >= nextSample {
                result.rss.append(((now - started).inSeconds, SenseBench.rssKB(gateway.pid)))
                nextSample = now + .seconds(10)
            }
            if now >= nextRestart {
                nextRestart = now + restartEvery
                result.brokerRestarts += 1
                try await broker.restart()
                // Commands go only to a gateway that is back: what the broker holds for it is delivered after.
                let waitStart = ContinuousClock.now
                _ = await gatewayAnswers(within: .seconds(30))
                result.waitedForGateway += (ContinuousClock.now - waitStart).inSeconds
            }
            if now >= nextOutage {
                nextOutage = now + outageEvery
                result.vendorOutages += 1
                let simulatorCopy = simulator
                let length = outageLength
                Task { await simulatorCopy.goDown(for: length) }
            }
            index += 1
            let (topic, payload): (String, String) = switch index % 10 {
            case 0: ("soak/device/house_lights-kitchen/set", #"{"state":"\#(index % 20 == 0 ? "ON" : "OFF")"}"#)
            case 1, 3, 5, 7, 9: ("soak/device/demo_light/set", #"{"brightness":\#(index % 100)}"#)
            default: ("soak/device/demo_plug/set", #"{"state":"\#(index % 4 == 0 ? "ON" : "OFF")"}"#)
            }
            _ = client.publish(topic, Array(payload.utf8), qos: .atLeastOnce, properties: .init(responseTopic: "replies/soak/\(index)"))
            result.sent = index
            try await Task.sleep(for: .milliseconds(100))
        }
        // Commands still waiting (a vendor outage, the last broker restart) settle within their TTL.
        let settleDeadline = ContinuousClock.now + .seconds(90)
        while ContinuousClock.now < settleDeadline, inbox.replies.withLock({ $0.count }) < result.sent {
            try await Task.sleep(for: .milliseconds(200))
        }
        try await Task.sleep(for: .seconds(2))
        result.rss.append(((ContinuousClock.now - started).inSeconds, SenseBench.rssKB(gateway.pid)))
        result.replies = inbox.replies.withLock { $0 }
        let counters = simulator.counters
        result.vendorControlCalls = counters.controlCalls.values.reduce(0, +)
        result.consciousnessOK = result.replies.filter { $0.key % 10 == 0 && $0.value.first?.contains(#""status":"ok""#) == true }.count
        await client.shutdown()
        return result
    }
}
