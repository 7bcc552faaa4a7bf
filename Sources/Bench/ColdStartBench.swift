import Foundation
import GatewayModel
import GatewayTesting
import MQTT
import Synchronization

/// Cold start to cached state: the real `lbs-gateway` binary restarted over a cache of 1,000 devices
/// while their vendor is unreachable, timed from exec until a subscriber holds the first device's (stale)
/// state, every device's state, and the bridge's `online`.
enum ColdStartBench {
    struct Result {
        var firstState: Double
        var allStates: Double
        var online: Double
        var received: Int
    }

    /// Marks when the first and the `expected`-th device states and `online` arrive.
    final class Milestones: Sendable {
        let client: MQTTClient
        typealias Seen = (count: Int, first: ContinuousClock.Instant?, all: ContinuousClock.Instant?, online: ContinuousClock.Instant?)
        private final class Tally: Sendable {
            let state = Mutex<Seen>((0, nil, nil, nil))
        }
        private let tally = Tally()

        init(url: String, expected: Int) async throws {
            var configuration = try MQTTConfiguration(url: url, clientID: "coldstart-sub-\(UInt32.random(in: 0...UInt32.max))")
            configuration.inboundBufferSize = 100_000
            client = try MQTTClient(configuration: configuration)
            let messages = client.messages
            let tally = self.tally
            Task {
                for await message in messages {
                    let now = ContinuousClock.now
                    tally.state.withLock {
                        if message.topic.hasSuffix("/bridge/state") {
                            if $0.online == nil, message.payload.firstRange(of: Array("online".utf8)) != nil { $0.online = now }
                            return
                        }
                        $0.count += 1
                        if $0.first == nil { $0.first = now }
                        if $0.count == expected { $0.all = now }
                    }
                }
            }
            client.start()
            try await waitUntil("subscriber connected", timeout: .seconds(10)) { client.isConnected }
            try await client.subscribeAndWait(["lbs/device/+", "lbs/bridge/state"], qos: .atMostOnce, timeout: .seconds(5))
        }

        /// Waits until every milestone passed or nothing new came for 5 s.
        func wait() async -> Seen {
            var seen = -1
            var quietSince = ContinuousClock.now
            while true {
                let now = tally.state.withLock { $0 }
                if now.all != nil, now.online != nil { return now }
                if now.count != seen { seen = now.count; quietSince = .now }
                // Restored devices with counters wait for the broker's retained copies (a SUBSCRIBE behind the
                // start-up publishes, then a 500 ms grace): their states can come seconds after the first ones.
                if ContinuousClock.now - quietSince > .seconds(5) { return now }
                try? await Task.sleep(for: .milliseconds(1))
            }
        }
    }

    static var binary: String {
        ProcessInfo.processInfo.environment["LBS_BENCH_GATEWAY"]
            ?? URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("lbs-gateway").path
    }

    /// Fills a cache with `devices` demo devices (the demo vendor, then a clean stop) and returns its path.
    static func fillCache(broker: MosquittoBroker, devices: Int, directory: TemporaryDirectory) async throws -> String {
        let database = directory.file("gateway.sqlite")
        let fill = directory.file("fill.yaml")
        try "mqtt: {url: \(broker.url), client_id: coldstart-fill}\nlog_level: error\nstorage: {path: \(database)}\nvendors: [{type: demo, id: demo, poll_interval: 3600, devices: \(devices - 6)}]\n"
            .write(toFile: fill, atomically: true, encoding: .utf8)
        // Every device's state published (so the vendor reported it); the clean stop then writes what waits behind.
        let published = try await DeliveryCounter(url: broker.url, filter: "lbs/device/+")
        let filler = try ProcessRunner(executable: binary, arguments: ["run", "--config", fill], outputDirectory: directory.path, name: "fill")
        // Up to 60 s (a loaded box starts slowly; DeliveryCounter's 2 s quiet rule would end before the first state).
        let deadline = ContinuousClock.now + .seconds(60)
        while published.count < devices, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        let seen = published.count
        _ = await filler.stop()
        await published.client.shutdown()
        guard seen >= devices else { throw TestSupportError("the fill gateway published \(seen) of \(devices) states") }
        return database
    }

    /// One cold start over `database`: a fresh broker (nothing retained), the same vendor id now unreachable.
    /// `brokerConfiguration`: lines for the fresh broker's config (`set_tcp_nodelay true`, as deploy/mosquitto ships).
    static func run(database: String, devices: Int, directory: TemporaryDirectory, brokerConfiguration: String = "") async throws -> Result {
        let fresh = try await MosquittoBroker.started(extraConfiguration: brokerConfiguration)
        let milestones = try await Milestones(url: fresh.url, expected: devices)
        let cold = directory.file("cold.yaml")
        try "mqtt: {url: \(fresh.url), client_id: coldstart}\nlog_level: error\nstorage: {path: \(database)}\nvendors: [{type: consciousness, id: demo, url: \"http://127.0.0.1:9\", username: u, password_env: COLDSTART_PW, poll_interval: 60}]\n"
            .write(toFile: cold, atomically: true, encoding: .utf8)
        var environment = ProcessInfo.processInfo.environment
        environment["COLDSTART_PW"] = "unused"
        let started = ContinuousClock.now
        let gateway = try ProcessRunner(executable: binary, arguments: ["run", "--config", cold], environment: environment,
                                        outputDirectory: directory.path, name: "cold")
        let seen = await milestones.wait()
        _ = await gateway.stop()
        await milestones.client.shutdown()
        await fresh.stop()
        func millis(_ instant: ContinuousClock.Instant?) -> Double { instant.map { ($0 - started).inSeconds * 1000 } ?? .nan }
        return Result(firstState: millis(seen.first), allStates: millis(seen.all), online: millis(seen.online), received: seen.count)
    }
}
