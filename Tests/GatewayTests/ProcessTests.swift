import Foundation
import Glibc
import GatewayTesting
import MQTT
import TestTraits
import Testing

/// The `lbs-gateway` executable as a user runs it: signals, the Last Will, the CLI.
@Suite(.integration, .timeLimit(.minutes(2))) struct ProcessTests {
    func writeConfig(_ directory: TemporaryDirectory, broker: MosquittoBroker, extra: String = "") throws -> String {
        let path = directory.file("config.yaml")
        try """
        mqtt:
          url: \(broker.url)
          client_id: proc-\(UInt32.random(in: 0...UInt32.max))
          keepalive: 5
          username: gateway
          password_file: password
        log_level: debug
        \(extra.contains("http:") ? "" : "http: {enabled: false}")
        vendors:
          - type: demo
            id: demo
        \(extra)
        """.write(toFile: path, atomically: true, encoding: .utf8)
        try "hunter2-very-secret\n".write(toFile: directory.file("password"), atomically: true, encoding: .utf8)
        return path
    }

    @Test func killMinus9LeavesTheLastWillAndSigtermExitsCleanly() async throws {
        let binary = try #require(Binaries.gateway, "lbs-gateway is not built")
        let broker = try await MosquittoBroker.started()
        let directory = try TemporaryDirectory()
        let config = try writeConfig(directory, broker: broker)
        let watcher = try await TestMQTTClient.connect(to: broker.url)
        try await watcher.subscribe("lbs/bridge/state")

        let first = try ProcessRunner(executable: binary, arguments: ["run", "--config", config], outputDirectory: directory.path, name: "first")
        try await watcher.waitForMessage(topic: "lbs/bridge/state", timeout: .seconds(10)) { $0.text.contains("online") }
        first.kill()
        _ = await first.waitForExit(timeout: .seconds(5))
        // The broker notices the vanished client and publishes its will (keepalive 5 s → within ~8 s).
        try await watcher.waitForMessage(topic: "lbs/bridge/state", timeout: .seconds(12)) { $0.text.contains("offline") }

        let second = try ProcessRunner(executable: binary, arguments: ["run", "--config", config], outputDirectory: directory.path, name: "second")
        let online = watcher.received.count
        try await waitUntil("online again", timeout: .seconds(10)) {
            watcher.received.dropFirst(online).contains { $0.topic == "lbs/bridge/state" && $0.text.contains("online") }
        }
        let stopping = ContinuousClock.now
        second.terminate()
        let status = await second.waitForExit(timeout: .seconds(5))
        #expect(ContinuousClock.now - stopping < .seconds(5))
        #expect(status == .exited(0), "exit status \(String(describing: status))")
        let retained = try await TestMQTTClient.retainedSnapshot(url: broker.url, filter: "lbs/bridge/state")
        #expect(retained["lbs/bridge/state"]?.text == #"{"state":"offline"}"#)
        // The password never reaches a log line, even at debug level.
        #expect(!second.standardError().contains("hunter2"))
        #expect(!first.standardError().contains("hunter2"))
        await watcher.shutdown()
    }

    @Test func checkConfigListsEveryProblemAndRunStopsWithOneClearLine() async throws {
        let binary = try #require(Binaries.gateway, "lbs-gateway is not built")
        let directory = try TemporaryDirectory()
        let path = directory.file("bad.yaml")
        try "mqtt:\n  url: http://x\n  keepalive: soon\nvendors:\n  - type: nope\n".write(toFile: path, atomically: true, encoding: .utf8)

        let check = try ProcessRunner(executable: binary, arguments: ["check-config", "--config", path], outputDirectory: directory.path, name: "check")
        let checkStatus = await check.waitForExit(timeout: .seconds(10))
        #expect(checkStatus == .exited(1))
        let report = check.standardOutput()
        #expect(report.contains("mqtt.url") && report.contains("mqtt.keepalive") && report.contains("vendors[0].type"))

        let run = try ProcessRunner(executable: binary, arguments: ["run", "--config", path], outputDirectory: directory.path, name: "run")
        _ = await run.waitForExit(timeout: .seconds(10))
        let stderr = run.standardError()
        #expect(stderr.contains("config error: mqtt.url"))
        #expect(!stderr.contains("Fatal error") && !stderr.contains("Stack dump"))

        let missing = try ProcessRunner(executable: binary, arguments: ["run", "--config", directory.file("absent.yaml")], outputDirectory: directory.path, name: "missing")
        _ = await missing.waitForExit(timeout: .seconds(10))
        #expect(missing.standardError().split(separator: "\n").count == 1)

        let version = try ProcessRunner(executable: binary, arguments: ["--version"], outputDirectory: directory.path, name: "version")
        _ = await version.waitForExit(timeout: .seconds(10))
        #expect(version.standardOutput().contains("."))
    }
}
