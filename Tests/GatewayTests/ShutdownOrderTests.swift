import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayTesting
import MQTT
import TestTraits
import Testing

/// SIGTERM with the HTTP listener on: the real binary, stopped 20 times. One stop in two printed
/// "Cannot schedule tasks on an EventLoop that has already shut down" (the listener shut its event loop down
/// while the server's channels still scheduled their last close on it).
@Suite(.integration, .serialized, .timeLimit(.minutes(3))) struct ShutdownOrderTests {
    @Test func sigtermWithTheHTTPListenerLeavesNoEventLoopError() async throws {
        let binary = try #require(Binaries.gateway, "lbs-gateway is not built")
        let broker = try await MosquittoBroker.started()
        let directory = try TemporaryDirectory()
        let watcher = try await TestMQTTClient.connect(to: broker.url)
        try await watcher.subscribe("lbs/bridge/state")
        for run in 1...20 {
            let port = try freeLoopbackPort()
            let path = directory.file("config-\(run).yaml")
            try """
            mqtt: {url: \(broker.url), client_id: stop-\(run)-\(UInt32.random(in: 0...UInt32.max))}
            http: {listen: "127.0.0.1:\(port)"}
            vendors: [{type: demo, id: demo}]
            """.write(toFile: path, atomically: true, encoding: .utf8)
            let seen = watcher.messages(on: "lbs/bridge/state").count
            let gateway = try ProcessRunner(executable: binary, arguments: ["run", "--config", path], outputDirectory: directory.path, name: "gateway-\(run)")
            defer { gateway.kill() }
            try await watcher.waitForMessage(topic: "lbs/bridge/state", timeout: .seconds(15)) { message in
                message.text.contains("online") && watcher.messages(on: "lbs/bridge/state").count > seen
            }
            // The listener serves (it binds beside the MQTT start) before the stop.
            try await waitUntil("run \(run): the HTTP listener serves", timeout: .seconds(10)) {
                try await HTTPSecurityTests.curl(["http://127.0.0.1:\(port)/metrics"]).status == 200
            }
            // Stopped a moment later, as a service is (the error came on about every other stop after a few seconds).
            try await hold(for: .milliseconds(500))
            gateway.terminate()
            let status = await gateway.waitForExit(timeout: .seconds(10))
            #expect(status == .exited(0), "run \(run): \(String(describing: status))")
            let output = gateway.standardError() + gateway.standardOutput()
            #expect(!output.contains("Cannot schedule tasks"), "run \(run):\n\(output.suffix(800))")
        }
        await watcher.shutdown()
    }
}
