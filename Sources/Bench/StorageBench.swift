import Cache
import ConsciousnessSimulator
import CurlHTTP
import Foundation
import GatewayModel
import GatewayTesting
import MQTT

/// `lbs-bench storage`: what the SQLite cache adds to a command. The real `lbs-gateway` process switches a
/// consciousness-simulator light (`/set` → vendor HTTP → new state on MQTT), with and without `storage:`,
/// and the same HTTP control request is sent straight to the simulator with libcurl, for the floor.
enum StorageBench {
    struct Result {
        var plainHTTP: [Double]
        var withoutStorage: [Double]
        var withStorage: [Double]
        /// The demo vendor (no HTTP): the storage path alone.
        var demoWithoutStorage: [Double]
        var demoWithStorage: [Double]
        /// One outbox insert committed in the same cache, called synchronously: the disk's floor.
        var commitDirect: [Double]
        /// The same through `CacheStore.run` from a task (the Dispatch hop the gateway makes).
        var commitFromTask: [Double]
        /// The same command appended to the outbox journal from a task, as the gateway stores it by default.
        var journalAppend: [Double]
    }

    static let password = "bench-password"

    static func run(broker: MosquittoBroker, iterations: Int) async throws -> Result {
        let simulator = ConsciousnessSimulator(configuration: .init(password: password))
        try await simulator.start()
        defer { Task { await simulator.stop() } }
        let base = await simulator.baseURL
        let plain = try await plainHTTP(base: base, iterations: iterations)
        let without = try await roundTrips(broker: broker, vendor: .consciousness(base), storage: false, iterations: iterations)
        let with = try await roundTrips(broker: broker, vendor: .consciousness(base), storage: true, iterations: iterations)
        let demoWithout = try await roundTrips(broker: broker, vendor: .demo, storage: false, iterations: iterations)
        let demoWith = try await roundTrips(broker: broker, vendor: .demo, storage: true, iterations: iterations)
        let (direct, fromTask, journal) = try await commits(iterations: iterations)
        return Result(
            plainHTTP: plain, withoutStorage: without, withStorage: with, demoWithoutStorage: demoWithout, demoWithStorage: demoWith,
            commitDirect: direct, commitFromTask: fromTask, journalAppend: journal
        )
    }

    /// One command stored as the outbox writer stores it (a row inserted as `sending`, one transaction), timed
    /// alone: directly, and through `CacheStore.run` from a task.
    static func commits(iterations: Int) async throws -> (direct: [Double], fromTask: [Double], journal: [Double]) {
        let directory = try TemporaryDirectory(prefix: "lbs-bench-commit")
        defer { directory.remove() }
        let store = try CacheStore(path: directory.file("gateway.sqlite"))
        func entry(_ index: Int) -> OutboxEntry {
            OutboxEntry(id: "c\(index)", vendorID: "demo", deviceID: "demo_plug", json: #"{"state":"ON"}"#, createdAt: 1, expiresAt: nil)
        }
        var direct: [Double] = []
        var fromTask: [Double] = []
        for index in 0..<(iterations + 20) {
            let start = ContinuousClock.now
            _ = try store.apply([.insert(entry(index), sending: true)])
            if index >= 20 { direct.append((ContinuousClock.now - start).inSeconds * 1000) }
        }
        for index in 0..<(iterations + 20) {
            let item = entry(100_000 + index)
            let start = ContinuousClock.now
            _ = try await store.run { try $0.apply([.insert(item, sending: true)]) }
            if index >= 20 { fromTask.append((ContinuousClock.now - start).inSeconds * 1000) }
        }
        let outboxJournal = try store.openOutboxJournal()
        var journal: [Double] = []
        for index in 0..<(iterations + 20) {
            let item = entry(200_000 + index)
            let start = ContinuousClock.now
            guard case .durable = await outboxJournal.append([.insert(item, sending: true)]) else {
                throw TestSupportError("the outbox journal did not take command \(index)")
            }
            if index >= 20 { journal.append((ContinuousClock.now - start).inSeconds * 1000) }
            // The gateway's shared commit behind, so the file is reused as it is there.
            if index.isMultiple(of: 50) {
                try store.apply([], journalCheckpoint: outboxJournal.lastSequence)
                outboxJournal.checkpointed(through: outboxJournal.lastSequence)
            }
        }
        try store.close()
        return (direct.sorted(), fromTask.sorted(), journal.sorted())
    }

    /// The control request alone, as the adapter sends it (JSON body, bearer token, one reused connection pool).
    static func plainHTTP(base: String, iterations: Int) async throws -> [Double] {
        let client = try HTTPClient()
        let login = try await client.send(HTTPClientRequest(
            method: .post, url: "\(base)/api/v1/auth/login", headers: ["Content-Type": "application/json"],
            body: Data(#"{"username":"admin","password":"\#(password)"}"#.utf8)))
        let token = ((try JSONSerialization.jsonObject(with: login.body) as? [String: Any])?["access_token"] as? String) ?? ""
        var samples: [Double] = []
        for index in 0..<(iterations + 20) {
            let action = index.isMultiple(of: 2) ? "turn_off" : "turn_on"
            let start = ContinuousClock.now
            _ = try await client.send(HTTPClientRequest(
                method: .put, url: "\(base)/api/v1/devices/lights-kitchen/control",
                headers: ["Content-Type": "application/json", "Authorization": "Bearer \(token)"],
                body: Data(#"{"action":"\#(action)"}"#.utf8)))
            if index >= 20 { samples.append((ContinuousClock.now - start).inSeconds * 1000) }
        }
        return samples.sorted()
    }

    enum BenchVendor {
        case consciousness(String)
        case demo

        var device: String {
            switch self {
            case .consciousness: "house_lights-kitchen"
            case .demo: "demo_plug"
            }
        }

        func yaml(password: String) -> String {
            switch self {
            case .consciousness(let base):
                "[{type: consciousness, id: house, url: \"\(base)\", username: admin, password_file: \(password), poll_interval: 3600}]"
            case .demo:
                "[{type: demo, id: demo, poll_interval: 3600}]"
            }
        }
    }

    /// `/set` → state through the real gateway process.
    static func roundTrips(broker: MosquittoBroker, vendor: BenchVendor, storage: Bool, iterations: Int) async throws -> [Double] {
        let directory = try TemporaryDirectory(prefix: "lbs-bench-storage")
        // A base topic of its own: no retained state of an earlier run is taken for this gateway's first state.
        let topicBase = "bench\(storage ? "s" : "n")\(vendor.device.hasPrefix("demo") ? "d" : "c")"
        defer { directory.remove() }
        let binary = ProcessInfo.processInfo.environment["LBS_BENCH_GATEWAY"]
            ?? URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("lbs-gateway").path
        try password.write(toFile: directory.file("password"), atomically: true, encoding: .utf8)
        let config = directory.file("config.yaml")
        try """
        mqtt: {url: \(broker.url), client_id: bench-storage-\(storage)-\(vendor.device), base_topic: \(topicBase)}
        log_level: error
        \(storage ? "storage: {path: \(directory.file("gateway.sqlite"))}" : "")
        vendors: \(vendor.yaml(password: directory.file("password")))
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let process = try ProcessRunner(executable: binary, arguments: ["run", "--config", config], outputDirectory: directory.path, name: "gateway")

        let samples = try await switchRoundTrips(brokerURL: broker.url, clientID: "bench-storage-client-\(storage)-\(vendor.device)",
                                                 stateTopic: "\(topicBase)/device/\(vendor.device)", iterations: iterations)
        _ = await process.stop()
        return samples.sorted()
    }

    /// `{"state":"ON"|"OFF"}` to `<stateTopic>/set`, alternating, timed until the state shows it: `iterations`
    /// round trips after 20 warm-ups, after the system's first state. Shared by `storage` and `peer`.
    static func switchRoundTrips(brokerURL: String, clientID: String, stateTopic: String, iterations: Int) async throws -> [Double] {
        let client = try MQTTClient(configuration: MQTTConfiguration(url: brokerURL, clientID: clientID))
        let (seen, continuation) = AsyncStream.makeStream(of: [UInt8].self, bufferingPolicy: .unbounded)
        let inbound = client.messages
        let forward = Task { for await message in inbound { continuation.yield(message.payload) } }
        client.start()
        try await waitUntil("bench client connected", timeout: .seconds(10)) { client.isConnected }
        try await client.subscribeAndWait([stateTopic], qos: .atMostOnce, timeout: .seconds(5))
        var iterator = seen.makeAsyncIterator()
        // The system's first state of the device (after its login and first poll).
        _ = await iterator.next()
        var samples: [Double] = []
        for index in 0..<(iterations + 20) {
            let word = index.isMultiple(of: 2) ? "OFF" : "ON"
            let needle = Array(#""state":"\#(word)""#.utf8)
            let start = ContinuousClock.now
            client.publish("\(stateTopic)/set", Array(#"{"state":"\#(word)"}"#.utf8), qos: .atMostOnce)
            while let payload = await iterator.next() {
                if payload.firstRange(of: needle) != nil { break }
            }
            if index >= 20 { samples.append((ContinuousClock.now - start).inSeconds * 1000) }
        }
        forward.cancel()
        await client.shutdown()
        return samples
    }
}
