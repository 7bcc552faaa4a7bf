import Foundation
@testable import Gateway
import GatewayTesting
import MQTT
import Testing

/// `deploy/mosquitto/bridge.conf` with three real brokers: two sites, each with its own gateway
/// (`base_topic: site/<name>`), bridged to a central broker. State and discovery reach the centre, a command sent
/// centrally reaches its site's gateway only, a site keeps working while the central link is down, and what it
/// published meanwhile reaches the centre when the link returns.
@Suite(.serialized, .timeLimit(.minutes(3))) struct MultiSiteTests {
    static let shipped = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("deploy/mosquitto/bridge.conf").path

    /// The shipped bridge for `site`, pointed at the central broker on loopback without TLS or password.
    static func bridge(site: String, central: MosquittoBroker) throws -> String {
        try String(contentsOfFile: shipped, encoding: .utf8)
            .replacingOccurrences(of: "SITE", with: site)
            .replacingOccurrences(of: "central.example.net:8883", with: "127.0.0.1:\(central.port)")
            .split(separator: "\n").filter { line in
                !["bridge_cafile", "bridge_insecure", "remote_username", "remote_password"].contains { line.hasPrefix($0) }
            }
            .map { $0.hasPrefix("restart_timeout") ? "restart_timeout 1 2" : String($0) }
            .joined(separator: "\n")
    }

    @Test func sitesReachTheCentreCommandsReachTheirSiteAndAnOutageIsBridged() async throws {
        let central = try await MosquittoBroker.started()
        let siteA = try await MosquittoBroker.started(extraConfiguration: try Self.bridge(site: "a", central: central))
        let siteB = try await MosquittoBroker.started(extraConfiguration: try Self.bridge(site: "b", central: central))
        let gatewayA = try await GatewayHarness.start(broker: siteA, mqtt: "base_topic: site/a")
        let gatewayB = try await GatewayHarness.start(broker: siteB, mqtt: "base_topic: site/b")
        defer { Task { await gatewayA.stop(); await gatewayB.stop(); await siteA.stop(); await siteB.stop(); await central.stop() } }

        let centre = try await TestMQTTClient.connect(to: central.url)
        try await centre.subscribe("site/#")
        try await centre.subscribe("homeassistant/#")
        try await centre.waitForMessage(topic: "site/a/device/demo_light", timeout: .seconds(20))
        try await centre.waitForMessage(topic: "site/b/device/demo_light", timeout: .seconds(20))
        try await centre.waitForMessage(topic: "homeassistant/device/site_a_demo_light/config", timeout: .seconds(10))
        try await centre.waitForMessage(topic: "homeassistant/device/site_b_demo_light/config", timeout: .seconds(10))
        #expect(centre.messages(on: "site/a/bridge/state").last?.text.contains("online") == true)

        // A command at the centre reaches site A's gateway, and only it.
        try await centre.publish("site/a/device/demo_light/set", #"{"state":"ON","brightness":33}"#, qos: .atLeastOnce)
        try await centre.waitForMessage(topic: "site/a/device/demo_light", timeout: .seconds(10)) { $0.json?["brightness"] as? Double == 33 }
        #expect(!centre.messages(on: "site/b/device/demo_light").contains { $0.json?["brightness"] as? Double == 33 })
        // State never flows down: a forged state at the centre does not reach site B's broker.
        let localB = try await TestMQTTClient.connect(to: siteB.url)
        try await localB.subscribe("site/b/device/demo_plug")
        try await centre.publish("site/b/device/demo_plug", #"{"state":"FORGED"}"#, qos: .atLeastOnce)

        // The central link goes down: site A's broker and gateway carry on.
        await centre.shutdown()
        await central.stop()
        let localA = try await TestMQTTClient.connect(to: siteA.url)
        try await localA.subscribe("site/a/device/demo_light")
        try await localA.publish("site/a/device/demo_light/set", #"{"brightness":61}"#, qos: .atLeastOnce)
        try await localA.waitForMessage(topic: "site/a/device/demo_light", timeout: .seconds(10)) { $0.json?["brightness"] as? Double == 61 }
        #expect(!localB.messages(on: "site/b/device/demo_plug").contains { $0.text.contains("FORGED") })

        // The link returns: what site A published meanwhile reaches the centre.
        try await central.start()
        let back = try await TestMQTTClient.connect(to: central.url)
        try await back.subscribe("site/a/#")
        try await back.waitForMessage(topic: "site/a/device/demo_light", timeout: .seconds(20)) { $0.json?["brightness"] as? Double == 61 }
        try await back.waitForMessage(topic: "site/a/bridge/link", timeout: .seconds(20)) { $0.text == "1" }
        await back.shutdown()
        await localA.shutdown()
        await localB.shutdown()
    }
}
