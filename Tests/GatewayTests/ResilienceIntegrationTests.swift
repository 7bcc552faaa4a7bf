import Cache
import ConsciousnessSimulator
import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayTesting
import MQTT
import TestTraits
import Testing

/// End to end: real broker, real SQLite file, the consciousness backend simulator.
@Suite(.integration, .timeLimit(.minutes(3))) struct ResilienceIntegrationTests {
    static let kitchen = "consciousness_lights-kitchen"
    static let garage = "consciousness_garage-door-main"

    static func vendorYAML(_ simulator: ConsciousnessSimulator, pollInterval: Double = 0.2) async -> String {
        """
          - type: consciousness
            id: consciousness
            url: \(await simulator.baseURL)
            username: admin
            password_file: backend-password
            poll_interval: \(pollInterval)
            timeout: 1
            breaker: {minimum_calls: 2, failure_ratio: 0.5, window: 10, open_duration: 1, max_open_duration: 2}
        """
    }

    static func simulator() async throws -> ConsciousnessSimulator {
        let simulator = ConsciousnessSimulator(configuration: .init(password: "backend-secret"))
        _ = try await simulator.start()
        return simulator
    }

    static func directory() throws -> TemporaryDirectory {
        let directory = try TemporaryDirectory()
        try "backend-secret\n".write(toFile: directory.file("backend-password"), atomically: true, encoding: .utf8)
        return directory
    }

    @Test func outageQueuesCommandsRunsThemOnceOnRecoveryAndExpiresStaleOnes() async throws {
        let simulator = try await Self.simulator()
        let directory = try Self.directory()
        let gateway = try await GatewayHarness.start(directory: directory, yaml: "commands: {ttl: 60, security_ttl: 1}",
                                                     vendors: await Self.vendorYAML(simulator), storage: true)
        defer { Task { await gateway.stop(); await simulator.stop() } }
        let client = try await gateway.observer("lbs/#")
        try await client.waitForMessage(topic: "lbs/device/\(Self.kitchen)", timeout: .seconds(10))
        try await client.waitForMessage(topic: "lbs/device/\(Self.garage)", timeout: .seconds(10))

        await simulator.stop()
        let down = try await client.waitForMessage(topic: "lbs/bridge/vendors/consciousness", timeout: .seconds(15)) {
            $0.json?["state"] as? String == "down"
        }
        #expect(down.json?["breaker"] as? String == "open")
        // Refused connections, or a request the stopping simulator left unanswered (on a loaded machine).
        let code = (down.json?["last_error"] as? [String: Any])?["code"] as? String
        #expect(code == "vendor_unreachable" || code == "vendor_timeout", "\(code ?? "no code")")
        try await client.waitForMessage(topic: "lbs/device/\(Self.kitchen)/availability") { $0.text.contains("offline") }
        try await client.waitForMessage(topic: "lbs/bridge/event") { $0.text.contains("vendor_state_changed") && $0.text.contains("down") }

        try await client.publish("lbs/device/\(Self.kitchen)/set", "OFF", qos: .atLeastOnce)
        try await client.publish("lbs/device/\(Self.garage)/set", "OFF", qos: .atLeastOnce)
        // The garage door's command may wait 1 s at most: then it is dropped and reported.
        try await client.waitForMessage(topic: "lbs/bridge/event", timeout: .seconds(5)) {
            $0.text.contains("command_failed") && $0.text.contains("expired") && $0.text.contains(Self.garage)
        }
        try await hold(for: .milliseconds(500))
        _ = try await simulator.start()
        try await client.waitForMessage(topic: "lbs/device/\(Self.kitchen)", timeout: .seconds(15)) {
            $0.json?["state"] as? String == "OFF" && $0.json?["stale"] == nil
        }
        try await client.waitForMessage(topic: "lbs/device/\(Self.kitchen)/availability", timeout: .seconds(10)) { $0.text.contains("online") }
        try await quietPeriod( .seconds(1))
        let counters = simulator.counters
        #expect(counters.controlCalls(deviceID: "lights-kitchen", action: "turn_off") == 1)
        #expect(counters.controlCalls(deviceID: "garage-door-main", action: "turn_off") == 0)
        let store = try gateway.directoryStore()
        var outbox: [OutboxState: Int] = [:]
        // The outbox row is marked after the state went out; give that write a moment.
        try? await waitUntil("outbox settled", timeout: .seconds(5)) {
            outbox = try store.outboxCounts()
            return outbox[.acked] == 1 && outbox[.expired] == 1
        }
        #expect(outbox[.acked] == 1 && outbox[.expired] == 1 && outbox[.pending] == 0 && outbox[.sending] == 0,
                "outbox: \(outbox); events: \(client.messages(on: "lbs/bridge/event").map(\.text).filter { $0.contains("command_failed") })")
        try store.close()
        await client.shutdown()
    }

    @Test func startWithTheBackendDownPublishesCachedStateAsStale() async throws {
        let simulator = try await Self.simulator()
        let directory = try Self.directory()
        let vendors = await Self.vendorYAML(simulator)
        let first = try await GatewayHarness.start(directory: directory, vendors: vendors, storage: true)
        let watcher = try await first.observer("lbs/device/\(Self.kitchen)")
        try await watcher.waitForMessage(topic: "lbs/device/\(Self.kitchen)", timeout: .seconds(10))
        await watcher.shutdown()
        await first.stop()
        await simulator.stop()

        // A new, empty broker: everything retained must come from the gateway's cache.
        let broker = try await MosquittoBroker.started()
        let second = try await GatewayHarness.start(broker: broker, directory: directory, vendors: vendors, storage: true)
        defer { Task { await second.stop() } }
        let client = try await second.observer("lbs/#", "homeassistant/#")
        let cached = try await client.waitForMessage(topic: "lbs/device/\(Self.kitchen)", timeout: .seconds(5))
        #expect(cached.json?["stale"] as? Bool == true)
        #expect(cached.json?["last_seen"] as? String != nil)
        #expect(cached.json?["state"] as? String == "ON")
        try await client.waitForMessage(topic: "homeassistant/device/lbs_\(Self.kitchen)/config")
        try await client.waitForMessage(topic: "lbs/bridge/vendors/consciousness", timeout: .seconds(15)) { $0.json?["state"] as? String == "down" }
        try await client.waitForMessage(topic: "lbs/device/\(Self.kitchen)/availability") { $0.text.contains("offline") }
        await client.shutdown()
    }

    @Test func startWithTheBrokerDownThenUp() async throws {
        let broker = try await MosquittoBroker.started()
        await broker.stop()
        let gateway = try await GatewayHarness.start(broker: broker)
        defer { Task { await gateway.stop() } }
        try await hold(for: .seconds(1))
        try await broker.start()
        try await waitUntil("gateway online", timeout: .seconds(5)) {
            let retained = (try? await TestMQTTClient.retainedSnapshot(url: broker.url, filter: "lbs/#")) ?? [:]
            return retained["lbs/bridge/state"]?.text.contains("online") == true && retained["lbs/device/demo_light"] != nil
        }
    }

    @Test func killMinus9DuringHeavyWritesKeepsTheDatabaseAndTheOutboxWhole() async throws {
        let binary = try #require(Binaries.gateway, "lbs-gateway is not built")
        let broker = try await MosquittoBroker.started()
        let directory = try TemporaryDirectory()
        let database = directory.file("gateway.sqlite")
        let config = directory.file("config.yaml")
        try """
        mqtt: {url: \(broker.url), client_id: heavy-\(UInt32.random(in: 0...UInt32.max))}
        http: {enabled: false}
        storage: {path: \(database)}
        log_level: error
        vendors:
          - {type: demo, id: demo, poll_interval: 0.05, devices: 1000}
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let process = try ProcessRunner(executable: binary, arguments: ["run", "--config", config], outputDirectory: directory.path, name: "heavy")
        let client = try await TestMQTTClient.connect(to: broker.url)
        try await client.subscribe("replies/acks/#")
        try await client.subscribe("lbs/bridge/state")
        try await client.waitForMessage(topic: "lbs/bridge/state", timeout: .seconds(10)) { $0.text.contains("online") }
        let commands = 20
        // One command per plug (sim_1, sim_3, … are plugs): commands for one key of one device would supersede each other.
        for index in 0..<commands {
            try await client.publish("lbs/device/demo_sim_\(2 * index + 1)/set/state", "OFF", qos: .atLeastOnce, responseTopic: "replies/acks/\(index)")
        }
        try await waitUntil("every command answered", timeout: .seconds(60)) {
            (0..<commands).allSatisfy { index in client.received.contains { $0.topic == "replies/acks/\(index)" } }
        }
        let refused = client.received.filter { $0.topic.hasPrefix("replies/acks/") && !$0.text.contains("ok") }
        #expect(refused.isEmpty, "\(refused.map { "\($0.topic): \($0.text)" })")
        // Acknowledged on MQTT means written as acked in the outbox a moment later (off the reply's path):
        // wait until it is, while the demo keeps writing, then pull the plug mid-write.
        let reader = try CacheStore(path: database)
        try await waitUntil("outbox marks written", timeout: .seconds(60)) { try reader.outboxCounts()[.acked, default: 0] == commands }
        try await waitUntil("history written", timeout: .seconds(60)) {
            try reader.history(deviceID: "demo_sim_2", key: "temperature", from: 0, to: Date().timeIntervalSince1970 + 60, resolution: .raw).count > 5
        }
        try reader.close()
        process.kill()
        _ = await process.waitForExit(timeout: .seconds(5))
        await client.shutdown()

        let store = try CacheStore(path: database)
        #expect(try store.integrityCheck() == "ok")
        let counts = try store.outboxCounts()
        #expect(counts[.acked] == commands, "outbox after kill -9: \(counts)")
        #expect(counts[.pending] == 0 && counts[.sending] == 0)
        // A sensor no command touched (a plug switched off reports power 0 once, then nothing new).
        let readings = try store.history(deviceID: "demo_sim_2", key: "temperature", from: 0, to: Date().timeIntervalSince1970 + 60, resolution: .raw)
        #expect(readings.count > 5)
        try store.close()
    }

    @Test func queuedCommandsSurviveKillMinus9AndRunOnceAfterRestart() async throws {
        let binary = try #require(Binaries.gateway, "lbs-gateway is not built")
        let simulator = try await Self.simulator()
        let broker = try await MosquittoBroker.started()
        let directory = try Self.directory()
        let config = directory.file("config.yaml")
        try """
        mqtt: {url: \(broker.url), client_id: resume-\(UInt32.random(in: 0...UInt32.max))}
        http: {enabled: false}
        storage: {path: gateway.sqlite}
        commands: {ttl: 120}
        vendors:
        \(await Self.vendorYAML(simulator))
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let client = try await TestMQTTClient.connect(to: broker.url)
        try await client.subscribe("lbs/#")
        let first = try ProcessRunner(executable: binary, arguments: ["run", "--config", config], outputDirectory: directory.path, name: "first")
        try await client.waitForMessage(topic: "lbs/device/\(Self.kitchen)", timeout: .seconds(10))
        await simulator.stop()
        try await client.waitForMessage(topic: "lbs/bridge/vendors/consciousness", timeout: .seconds(15)) { $0.json?["state"] as? String == "down" }
        try await client.publish("lbs/device/\(Self.kitchen)/set", "OFF", qos: .atLeastOnce)
        // Kill only once the command is durably in the outbox (a command never stored was never accepted).
        let observer = try CacheStore(path: directory.file("gateway.sqlite"))
        try await waitUntil("command and device registry stored", timeout: .seconds(10)) {
            let counts = try observer.outboxCounts()
            let devices = try observer.devices().count
            return (counts[.pending] ?? 0) + (counts[.sending] ?? 0) == 1 && devices >= 7
        }
        try observer.close()
        first.kill()
        _ = await first.waitForExit(timeout: .seconds(5))

        _ = try await simulator.start()
        let second = try ProcessRunner(executable: binary, arguments: ["run", "--config", config], outputDirectory: directory.path, name: "second")
        do {
            try await waitUntil("queued command ran after the restart", timeout: .seconds(15)) {
                simulator.counters.controlCalls(deviceID: "lights-kitchen", action: "turn_off") >= 1
            }
        } catch {
            Issue.record("\(error); gateway log:\n\(second.standardError().suffix(3000))")
            throw error
        }
        try await quietPeriod( .seconds(1))
        #expect(simulator.counters.controlCalls(deviceID: "lights-kitchen", action: "turn_off") == 1)
        _ = await second.stop()
        let store = try CacheStore(path: directory.file("gateway.sqlite"))
        #expect(try store.outboxCounts()[.acked] == 1)
        try store.close()
        await simulator.stop()
        await client.shutdown()
    }
}

extension GatewayHarness {
    /// The harness's SQLite file, opened by a second connection (WAL allows it).
    func directoryStore() throws -> CacheStore { try CacheStore(path: directory.file("gateway.sqlite")) }
}
