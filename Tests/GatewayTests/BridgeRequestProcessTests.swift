import Foundation
import GatewayTesting
import MQTT
import TestTraits
import Testing

/// `bridge/request/options` (log level at runtime) and `bridge/request/restart` with the real
/// `lbs-gateway` executable against a real broker.
@Suite(.integration, .timeLimit(.minutes(2))) struct BridgeRequestProcessTests {
    @Test func logLevelChangesAtRuntimeAndRestartStartsTheSameProcessAgain() async throws {
        let binary = try #require(Binaries.gateway, "lbs-gateway is not built")
        let broker = try await MosquittoBroker.started()
        let directory = try TemporaryDirectory()
        let config = directory.file("config.yaml")
        try """
        mqtt:
          url: \(broker.url)
          client_id: restart-\(UInt32.random(in: 0...UInt32.max))
        log_level: warning
        http: {enabled: false}
        vendors:
          - {type: demo, id: demo, poll_interval: 3600}
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let watcher = try await TestMQTTClient.connect(to: broker.url)
        for filter in ["lbs/bridge/state", "lbs/bridge/info", "lbs/bridge/response/#"] { try await watcher.subscribe(filter) }
        let gateway = try ProcessRunner(executable: binary, arguments: ["run", "--config", config], outputDirectory: directory.path, name: "gateway")

        let info = try await watcher.waitForMessage(topic: "lbs/bridge/info", timeout: .seconds(15)) { $0.json?["log_level"] != nil }
        #expect(info.json?["log_level"] as? String == "warning")
        let startedAt = try #require(info.json?["started_at"] as? String)
        #expect(!gateway.standardError().contains("log level set"))

        // A level that does not exist is refused with a reason.
        try await watcher.publish("lbs/bridge/request/options", #"{"log_level":"loud","transaction":"o0"}"#)
        let refused = try await watcher.waitForMessage(topic: "lbs/bridge/response/options", timeout: .seconds(10)) { $0.json?["transaction"] as? String == "o0" }
        #expect(refused.json?["status"] as? String == "error")
        #expect((refused.json?["error"] as? String)?.contains("log_level") == true)

        try await watcher.publish("lbs/bridge/request/options", #"{"log_level":"debug","transaction":"o1"}"#)
        let changed = try await watcher.waitForMessage(topic: "lbs/bridge/response/options", timeout: .seconds(10)) { $0.json?["transaction"] as? String == "o1" }
        #expect(changed.json?["status"] as? String == "ok")
        try await watcher.waitForMessage(topic: "lbs/bridge/info", timeout: .seconds(10)) { $0.json?["log_level"] as? String == "debug" }
        // The notice about the change is only written because the level really is lower now (the config says warning).
        try await waitUntil("the notice at the new level", timeout: .seconds(5)) { gateway.standardError().contains("log level set to debug") }

        try await watcher.publish("lbs/bridge/request/restart", #"{"transaction":"r1"}"#)
        let restarted = try await watcher.waitForMessage(topic: "lbs/bridge/response/restart", timeout: .seconds(10)) { $0.json?["transaction"] as? String == "r1" }
        #expect(restarted.json?["status"] as? String == "ok")
        // A graceful stop (offline), then the same process starts again: online, a new start time, the config's level.
        try await watcher.waitForMessage(topic: "lbs/bridge/state", timeout: .seconds(15)) { $0.text.contains("offline") }
        let again = try await watcher.waitForMessage(topic: "lbs/bridge/info", timeout: .seconds(20)) { message in
            (message.json?["started_at"] as? String).map { $0 != startedAt } ?? false
        }
        #expect(again.json?["log_level"] as? String == "warning")
        let states = watcher.messages(on: "lbs/bridge/state").map(\.text)
        let lastOffline = try #require(states.lastIndex { $0.contains("offline") })
        try await waitUntil("online after the restart", timeout: .seconds(10)) {
            watcher.messages(on: "lbs/bridge/state").dropFirst(lastOffline + 1).contains { $0.text.contains("online") }
        }
        #expect(gateway.isRunning, "the gateway exited instead of restarting: \(gateway.standardError())")
        #expect(gateway.standardError().contains("restarting"))

        gateway.terminate()
        let status = await gateway.waitForExit(timeout: .seconds(10))
        #expect(status == .exited(0), "exit status \(String(describing: status))")
        await watcher.shutdown()
    }
}
