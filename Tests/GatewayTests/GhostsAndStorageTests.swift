import Cache
import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayTesting
import MQTT
import TestTraits
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Against a real broker and the real binary: devices an earlier run published are cleared even without
/// a cache, and a full disk refuses commands instead of sending them unstored.
@Suite(.integration) struct GhostsAndStorageTests {
    @Test func devicesNoVendorReportsAnyMoreAreClearedWithoutACache() async throws {
        let broker = try await MosquittoBroker.started()
        let first = try await GatewayHarness.start(broker: broker, vendors: "  - {type: demo, id: demo, poll_interval: 3600, devices: 3}")
        try await waitUntil("sim devices published") {
            let retained = (try? await TestMQTTClient.retainedSnapshot(url: broker.url, filter: "#")) ?? [:]
            return retained["homeassistant/device/lbs_demo_sim_3/config"] != nil && retained["lbs/device/demo_sim_3/availability"] != nil
        }
        await first.stop()

        // The smallest config (no storage:), now without the extra devices.
        let second = try await GatewayHarness.start(broker: broker, vendors: "  - {type: demo, id: demo, poll_interval: 3600}")
        defer { Task { await second.stop() } }
        try await waitUntil("ghost devices cleared", timeout: .seconds(15)) {
            let retained = (try? await TestMQTTClient.retainedSnapshot(url: broker.url, filter: "#")) ?? [:]
            return !retained.keys.contains { $0.contains("sim_") } && retained["homeassistant/device/lbs_demo_light/config"] != nil
        }
        let retained = try await TestMQTTClient.retainedSnapshot(url: broker.url, filter: "#")
        #expect(retained["lbs/device/demo_light"] != nil, "devices the vendor still reports stay")
    }

    @Test func devicesOfAVendorThatHasNotAnsweredYetAreKept() async throws {
        let broker = try await MosquittoBroker.started()
        // Retained topics of a device of a configured vendor that is down at start: they must stay.
        let publisher = try await TestMQTTClient.connect(to: broker.url)
        try await publisher.publish("lbs/device/house_lamp/availability", #"{"state":"offline"}"#, qos: .atLeastOnce, retain: true)
        try await publisher.publish("homeassistant/device/lbs_house_lamp/config", #"{"state_topic":"lbs/device/house_lamp"}"#, qos: .atLeastOnce, retain: true)
        try await publisher.publish("lbs/device/gone_lamp/availability", #"{"state":"online"}"#, qos: .atLeastOnce, retain: true)
        await publisher.shutdown()
        let directory = try TemporaryDirectory()
        try "x".write(toFile: directory.file("password"), atomically: true, encoding: .utf8)
        let vendors = """
          - {type: demo, id: demo, poll_interval: 3600}
          - {type: consciousness, id: house, url: "http://127.0.0.1:9", username: u, password_file: password, timeout: 1}
        """
        let gateway = try await GatewayHarness.start(broker: broker, directory: directory, vendors: vendors)
        defer { Task { await gateway.stop() } }
        try await waitUntil("the device of a vendor no longer configured is cleared", timeout: .seconds(15)) {
            let retained = (try? await TestMQTTClient.retainedSnapshot(url: broker.url, filter: "lbs/device/#")) ?? [:]
            return retained["lbs/device/gone_lamp/availability"] == nil
        }
        let retained = try await TestMQTTClient.retainedSnapshot(url: broker.url, filter: "#")
        #expect(retained["lbs/device/house_lamp/availability"] != nil)
        #expect(retained["homeassistant/device/lbs_house_lamp/config"] != nil)
    }

    /// A tmpfs needs root (CAP_SYS_ADMIN); CI and the development machine run as root.
    static let canMount: Bool = {
        guard geteuid() == 0, let directory = try? TemporaryDirectory() else { return false }
        let point = directory.file("probe")
        try? FileManager.default.createDirectory(atPath: point, withIntermediateDirectories: true)
        guard mount("tmpfs", point, "tmpfs", 0, "size=64k") == 0 else { return false }
        umount(point)
        return true
    }()

    /// The real gateway (demo vendor) with its cache on a 2 MB tmpfs, and a client subscribed to `lbs/#`
    /// and `replies/acks/#` that has seen the gateway online.
    struct GatewayOnSmallDisk {
        let broker: MosquittoBroker
        let process: ProcessRunner
        let client: TestMQTTClient
        let directory: TemporaryDirectory
        let disk: String

        static func start() async throws -> GatewayOnSmallDisk {
            let binary = try #require(Binaries.gateway, "lbs-gateway is not built")
            let broker = try await MosquittoBroker.started()
            let directory = try TemporaryDirectory()
            let disk = directory.file("disk")
            try FileManager.default.createDirectory(atPath: disk, withIntermediateDirectories: true)
            #expect(mount("tmpfs", disk, "tmpfs", 0, "size=2m") == 0)
            let config = directory.file("config.yaml")
            try """
            mqtt: {url: \(broker.url), client_id: full-\(UInt32.random(in: 0...UInt32.max))}
            http: {enabled: false}
            storage: {path: \(disk)/gateway.sqlite}
            log_level: warning
            vendors:
              - {type: demo, id: demo, poll_interval: 3600}
            """.write(toFile: config, atomically: true, encoding: .utf8)
            let process = try ProcessRunner(executable: binary, arguments: ["run", "--config", config], outputDirectory: directory.path, name: "full")
            let client = try await TestMQTTClient.connect(to: broker.url)
            try await client.subscribe("lbs/#")
            try await client.subscribe("replies/acks/#")
            try await client.waitForMessage(topic: "lbs/device/demo_lock", timeout: .seconds(10))
            // Online comes after the gateway's SUBSCRIBE; a state can come before it (queued while connecting).
            try await client.waitForMessage(topic: "lbs/bridge/state", timeout: .seconds(10)) { $0.json?["state"] as? String == "online" }
            return GatewayOnSmallDisk(broker: broker, process: process, client: client, directory: directory, disk: disk)
        }

        /// Fills the disk to the last byte.
        func fill() {
            let filler = FileManager.default.createFile(atPath: disk + "/filler", contents: nil)
            #expect(filler)
            if let handle = FileHandle(forWritingAtPath: disk + "/filler") {
                let block = Data(count: 64 * 1024)
                while (try? handle.write(contentsOf: block)) != nil {}
                try? handle.close()
            }
        }

        /// Sends `payload` to `topic` and returns the v5 reply.
        func command(_ topic: String, _ payload: String, reply: String) async throws -> MQTTMessage {
            try await client.publish(topic, payload, qos: .atLeastOnce, responseTopic: "replies/acks/\(reply)")
            do {
                return try await client.waitForMessage(topic: "replies/acks/\(reply)", timeout: .seconds(10))
            } catch {
                Issue.record("no answer; gateway log:\n\(process.standardError())")
                throw error
            }
        }

        func stop() async {
            await client.shutdown()
            process.kill()
            await broker.stop()
            umount2(disk, Int32(MNT_DETACH))
        }
    }

    @Test(.enabled(if: canMount, "needs root to mount a tmpfs"))
    func aFullDiskRefusesCommandsAndHealthSaysWhy() async throws {
        let gateway = try await GatewayOnSmallDisk.start()
        let client = gateway.client
        gateway.fill()
        let answer = try await gateway.command("lbs/device/demo_lock/set/lock", "UNLOCK", reply: "unlock")
        #expect(((answer.json?["error"] as? [String: Any])?["code"] as? String) == "storage_unavailable", "\(answer.text)")
        #expect(client.messages(on: "lbs/device/demo_lock").allSatisfy { $0.json?["lock"] as? String == "LOCKED" })
        try await client.publish("lbs/bridge/request/health", "{}", qos: .atLeastOnce)
        let health = try await client.waitForMessage(topic: "lbs/bridge/response/health", timeout: .seconds(5))
        let storage = ((health.json?["data"] as? [String: Any])?["storage"] as? [String: Any])
        #expect(storage?["state"] as? String == "error", "\(health.text)")
        try await client.waitForMessage(topic: "lbs/bridge/info", timeout: .seconds(5)) {
            (($0.json?["storage"] as? [String: Any])?["state"] as? String) == "error"
        }
        let log = gateway.process.standardError()
        await gateway.stop()
        #expect(!log.contains("sending anyway"))
        #expect(log.components(separatedBy: "\n").filter { $0.contains("outbox") }.count < 5, "log lines are rate-limited:\n\(log)")
    }

    /// A switch command is sent while its outbox row is committed: the one that meets a disk failing right
    /// then has already left, and says so by its outcome; the failed commit makes storage unhealthy, and from
    /// then on commands are stored first and refused. A lock is always stored first.
    @Test(.enabled(if: canMount, "needs root to mount a tmpfs"))
    func theCommandThatMeetsAFailingDiskIsReportedAndTheNextAreRefused() async throws {
        let gateway = try await GatewayOnSmallDisk.start()
        let client = gateway.client
        let before = try await gateway.command("lbs/device/demo_plug/set", #"{"state":"ON"}"#, reply: "before")
        #expect(before.json?["status"] as? String == "ok", "\(before.text)")
        // The command's own writes behind it (its state, every 100 ms; its outcome) must be on disk before it fills:
        // one of them failing first would make storage unhealthy, and `first` would be refused before it is sent.
        try await quietPeriod(.seconds(1))
        gateway.fill()
        let first = try await gateway.command("lbs/device/demo_plug/set", #"{"state":"OFF"}"#, reply: "first")
        #expect(first.json?["status"] as? String == "ok", "sent while stored, carried out: \(first.text)")
        try await client.waitForMessage(topic: "lbs/device/demo_plug", timeout: .seconds(5)) { $0.json?["state"] as? String == "OFF" }
        let next = try await gateway.command("lbs/device/demo_plug/set", #"{"state":"ON"}"#, reply: "next")
        #expect(((next.json?["error"] as? [String: Any])?["code"] as? String) == "storage_unavailable", "\(next.text)")
        let unlock = try await gateway.command("lbs/device/demo_lock/set/lock", "UNLOCK", reply: "unlock")
        #expect(((unlock.json?["error"] as? [String: Any])?["code"] as? String) == "storage_unavailable", "\(unlock.text)")
        try await quietPeriod(.milliseconds(300))
        #expect(client.messages(on: "lbs/device/demo_plug").last?.json?["state"] as? String == "OFF", "the refused command never ran")
        #expect(client.messages(on: "lbs/device/demo_lock").allSatisfy { $0.json?["lock"] as? String == "LOCKED" })
        let log = gateway.process.standardError()
        await gateway.stop()
        #expect(log.contains("was sent while the outbox failed to store it"), "\(log)")
    }

    @Test func checkConfigReportsAStoragePathRunWouldRefuse() async throws {
        let binary = try #require(Binaries.gateway, "lbs-gateway is not built")
        let directory = try TemporaryDirectory()
        let corrupt = directory.file("corrupt.sqlite")
        try Data(repeating: 0x41, count: 8192).write(to: URL(fileURLWithPath: corrupt))
        let config = directory.file("config.yaml")
        try "mqtt: {url: mqtt://127.0.0.1:1}\nstorage: {path: \(corrupt)}\nvendors: [{type: demo, id: demo}]\n"
            .write(toFile: config, atomically: true, encoding: .utf8)
        let process = try ProcessRunner(executable: binary, arguments: ["check-config", "--config", config], outputDirectory: directory.path, name: "check")
        let status = await process.waitForExit(timeout: .seconds(20))
        #expect(status == .exited(1), "\(process.standardOutput())")
        #expect(process.standardOutput().contains("storage.path"))
        #expect(process.standardOutput().contains("not a usable SQLite database") || process.standardOutput().contains("damaged"))
    }
}
