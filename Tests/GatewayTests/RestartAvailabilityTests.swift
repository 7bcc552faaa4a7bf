import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayTesting
import MQTT
import TestTraits
import Testing
import VendorSimulators

/// A restart must not make Home Assistant's entities flap (available → unavailable → available within a second,
/// 230 of them after one kill -9), and every vendor's health is there from the start.
@Suite(.integration, .serialized, .timeLimit(.minutes(3))) struct RestartAvailabilityTests {
    /// Live (not retained) availability messages seen after `mark`.
    static func live(_ client: TestMQTTClient, after mark: Int) -> [MQTTMessage] {
        client.received.dropFirst(mark).filter { $0.topic.hasSuffix("/availability") && !$0.retain }
    }

    /// A vendor that answers over the network a moment after the broker connection is up (the Powerwall
    /// simulator: sign-in, then the site's meters): its cached devices used to go offline, then online again.
    @Test func aRestartKeepsCachedDevicesAvailableWhileTheirVendorAnswers() async throws {
        let powerwall = try PowerwallSimulator(configuration: .init(password: "TESLA", fixtures: Fixtures.path("powerwall", "")))
        _ = try await powerwall.start()
        defer { Task { await powerwall.stop() } }
        let broker = try await MosquittoBroker.started()
        let directory = try TemporaryDirectory()
        try "TESLA\n".write(toFile: directory.file("pw-password"), atomically: true, encoding: .utf8)
        let vendors = """
              - {type: demo, id: demo, poll_interval: 1}
              - {type: powerwall, id: pw, url: "\(await powerwall.baseURL)", password_file: pw-password, poll_interval: 1}
            """
        let first = try await GatewayHarness.start(broker: broker, directory: directory, vendors: vendors, storage: true)
        let client = try await first.observer("lbs/device/+/availability", "lbs/device/pw_site", "lbs/device/demo_light")
        try await client.waitForMessage(topic: "lbs/device/pw_site/availability", timeout: .seconds(15)) { $0.text.contains("online") }
        await first.stop()

        let mark = client.received.count
        let second = try await GatewayHarness.start(broker: broker, directory: directory, vendors: vendors, storage: true)
        defer { Task { await second.stop() } }
        // Until both vendors have answered with fresh values (no `stale`), and a moment after.
        try await waitUntil("fresh states after the restart", timeout: .seconds(15)) {
            ["lbs/device/pw_site", "lbs/device/demo_light"].allSatisfy { topic in
                client.received.dropFirst(mark).contains { $0.topic == topic && $0.json?["stale"] == nil && !$0.retain }
            }
        }
        try await quietPeriod( .seconds(1))
        let offline = Self.live(client, after: mark).filter { $0.text.contains("offline") }
        #expect(offline.isEmpty, "restarting flapped: \(offline.map(\.topic).prefix(5))")
        await client.shutdown()
    }

    @Test func cachedDevicesOfAVendorThatDoesNotAnswerGoOfflineAfterAPollInterval() async throws {
        let rig = try await PowerwallRig.started()
        let powerwall = rig.simulator
        let directory = rig.directory
        let broker = try await MosquittoBroker.started()
        let vendors = "  - " + rig.vendorLine(pollInterval: 2)
        let first = try await GatewayHarness.start(broker: broker, directory: directory, vendors: vendors, storage: true)
        let client = try await first.observer("lbs/device/+/availability")
        try await client.waitForMessage(topic: "lbs/device/pw_site/availability", timeout: .seconds(15)) { $0.text.contains("online") }
        await first.stop()
        await powerwall.stop()

        let mark = client.received.count
        let second = try await GatewayHarness.start(broker: broker, directory: directory, vendors: vendors, storage: true)
        defer { Task { await second.stop() } }
        try await waitUntil("the Powerwall's devices offline", timeout: .seconds(20)) {
            Self.live(client, after: mark).contains { $0.topic == "lbs/device/pw_site/availability" && $0.text.contains("offline") }
        }
        // Straight from the previous run's online to offline: never offline-online-offline.
        let seen = Self.live(client, after: mark).filter { $0.topic == "lbs/device/pw_site/availability" }.map(\.text)
        #expect(!seen.contains { $0.contains("online") }, "\(seen)")
        await client.shutdown()
    }

    @Test func everyVendorPublishesItsHealthAndHasMetricsFromTheStart() async throws {
        let port = try freeLoopbackPort()
        let gateway = try await GatewayHarness.start(
            yaml: "http: {listen: \"127.0.0.1:\(port)\"}", vendors: "  - {type: demo, id: demo, poll_interval: 3600}")
        defer { Task { await gateway.stop() } }
        let client = try await gateway.observer("lbs/bridge/vendors/+")
        // The demo reports no health of its own: `starting`, then `ok` once it answered.
        let health = try await client.waitForMessage(topic: "lbs/bridge/vendors/demo", timeout: .seconds(10)) { $0.json?["state"] as? String == "ok" }
        #expect(health.json?["last_success"] as? String != nil)
        let metrics = try await HTTPSecurityTests.curl(["http://127.0.0.1:\(port)/metrics"])
        #expect(metrics.body.contains(#"lbs_breaker_state{vendor="demo"}"#), "\(metrics.body.prefix(400))")
        #expect(metrics.body.contains(#"lbs_vendor_up{vendor="demo"} 1"#))
        await client.shutdown()
    }
}
