import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayTesting
import MQTT
import TestTraits
import Testing

/// `deploy/mosquitto/bridge.conf` with three real brokers: two sites, each with its own gateway
/// (`base_topic: site/<name>`, `homeassistant.node_id: site_<name>`), bridged to a central broker. State and
/// discovery reach the centre, a command sent centrally reaches its site's gateway only, a site keeps working while
/// the central link is down, and what it published meanwhile reaches the centre when the link returns. With the
/// shipped site `acl` and the central ACL from `central-acl.sh`, no site's logins can write another site's topics.
@Suite(.integration, .serialized, .timeLimit(.minutes(3))) struct MultiSiteTests {
    static let shipped = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("deploy/mosquitto/bridge.conf").path

    /// The shipped bridge for `site`, pointed at the central broker on loopback without TLS (and without a
    /// password unless `password` is given: then the shipped remote_username site-<site> logs in with it).
    static func bridge(site: String, central: MosquittoBroker, password: String? = nil) throws -> String {
        try String(contentsOfFile: shipped, encoding: .utf8)
            .replacingOccurrences(of: "SITE", with: site)
            .replacingOccurrences(of: "central.example.net:8883", with: "127.0.0.1:\(central.port)")
            .replacingOccurrences(of: "remote_password CHANGE-ME", with: "remote_password \(password ?? "")")
            .split(separator: "\n").filter { line in
                let dropped = ["bridge_cafile", "bridge_insecure"] + (password == nil ? ["remote_username", "remote_password"] : [])
                return !dropped.contains { line.hasPrefix($0) }
            }
            .map { $0.hasPrefix("restart_timeout") ? "restart_timeout 1 2" : String($0) }
            .joined(separator: "\n")
    }

    @Test func sitesReachTheCentreCommandsReachTheirSiteAndAnOutageIsBridged() async throws {
        let central = try await MosquittoBroker.started()
        let siteA = try await MosquittoBroker.started(extraConfiguration: try Self.bridge(site: "a", central: central))
        let siteB = try await MosquittoBroker.started(extraConfiguration: try Self.bridge(site: "b", central: central))
        let gatewayA = try await GatewayHarness.start(broker: siteA, mqtt: "base_topic: site/a", homeAssistant: "node_id: site_a")
        let gatewayB = try await GatewayHarness.start(broker: siteB, mqtt: "base_topic: site/b", homeAssistant: "node_id: site_b")
        defer { Task { await gatewayA.stop(); await gatewayB.stop(); await siteA.stop(); await siteB.stop(); await central.stop() } }

        let centre = try await TestMQTTClient.connect(to: central.url)
        try await centre.subscribe("site/#")
        try await centre.subscribe("homeassistant/#")
        try await centre.waitForMessage(topic: "site/a/device/demo_light", timeout: .seconds(20))
        try await centre.waitForMessage(topic: "site/b/device/demo_light", timeout: .seconds(20))
        try await centre.waitForMessage(topic: "homeassistant/device/site_a/site_a_demo_light/config", timeout: .seconds(10))
        try await centre.waitForMessage(topic: "homeassistant/device/site_b/site_b_demo_light/config", timeout: .seconds(10))
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

    /// A password file (made by the shipped add-user.sh) and an ACL file in `directory`.
    static func credentials(_ users: [String], acl: String, in directory: TemporaryDirectory) async throws {
        for user in users {
            try await BrokerSecurityTests.shell("\(BrokerSecurityTests.deploy)/add-user.sh \(directory.file("passwd")) \(user)", stdin: "pw-\(user)", in: directory)
        }
        try acl.write(toFile: directory.file("acl"), atomically: true, encoding: .utf8)
    }

    static func authentication(_ directory: TemporaryDirectory) -> String {
        "allow_anonymous false\npassword_file \(directory.file("passwd"))\nacl_file \(directory.file("acl"))\n"
    }

    /// Site A's logins (its Home Assistant at the site, its bridge's credentials at the centre) can neither replace
    /// site B's discovery (a lock's `payload_lock` turned into UNLOCK) nor write its state, and Home Assistant's
    /// birth message at site A stays at site A; every site's own state, discovery and commands still flow.
    @Test func noSiteCanWriteAnotherSitesTopicsAndABirthMessageStaysAtItsSite() async throws {
        let deploy = BrokerSecurityTests.deploy
        // The centre: the ACL central-acl.sh generates, and one password per site's bridge.
        let centralFiles = try TemporaryDirectory()
        let generated = try ProcessRunner(executable: "/bin/bash", arguments: ["-c", "\(deploy)/central-acl.sh a b > \(centralFiles.file("acl"))"],
                                          outputDirectory: centralFiles.path, name: "central-acl")
        #expect(await generated.waitForExit(timeout: .seconds(10)) == .exited(0))
        let centralACL = try String(contentsOfFile: centralFiles.file("acl"), encoding: .utf8)
        try await Self.credentials(["site-a", "site-b", "homeassistant"], acl: centralACL, in: centralFiles)
        let central = try await MosquittoBroker.started(extraConfiguration: Self.authentication(centralFiles))
        // The sites: the shipped acl for base_topic site/<name>.
        let shippedACL = try String(contentsOfFile: deploy + "/acl", encoding: .utf8)
        var sites: [MosquittoBroker] = []
        var gateways: [GatewayHarness] = []
        for site in ["a", "b"] {
            let files = try TemporaryDirectory()
            let acl = shippedACL.replacingOccurrences(of: " lbs/", with: " site/\(site)/")
            try await Self.credentials(["lbs-gateway", "homeassistant"], acl: acl, in: files)
            try "pw-lbs-gateway".write(toFile: files.file("gateway-password"), atomically: true, encoding: .utf8)
            let broker = try await MosquittoBroker.started(
                extraConfiguration: Self.authentication(files) + (try Self.bridge(site: site, central: central, password: "pw-site-\(site)")))
            sites.append(broker)
            gateways.append(try await GatewayHarness.start(
                broker: broker, directory: files, mqtt: "base_topic: site/\(site)\n  username: lbs-gateway\n  password_file: gateway-password",
                homeAssistant: "node_id: site_\(site)"))
        }
        let (siteA, siteB) = (sites[0], sites[1])
        let (gatewayA, gatewayB) = (gateways[0], gateways[1])
        defer { Task { await gatewayA.stop(); await gatewayB.stop(); await siteA.stop(); await siteB.stop(); await central.stop() } }
        func login(_ broker: MosquittoBroker, _ user: String) async throws -> TestMQTTClient {
            try await TestMQTTClient.connect(to: broker.url) { $0.username = user; $0.password = "pw-\(user)" }
        }

        let centre = try await login(central, "homeassistant")
        try await centre.subscribe("site/#")
        try await centre.subscribe("homeassistant/#")
        let lockB = "homeassistant/device/site_b/site_b_demo_lock/config"
        try await centre.waitForMessage(topic: "homeassistant/device/site_a/site_a_demo_light/config", timeout: .seconds(20))
        let original = try await centre.waitForMessage(topic: lockB, timeout: .seconds(20))
        try await centre.waitForMessage(topic: "site/b/device/demo_lock", timeout: .seconds(10))

        // Site A's Home Assistant may not write discovery at its site (so none can go up the bridge).
        let homeAssistantA = try await login(siteA, "homeassistant")
        let forged = original.text.replacingOccurrences(of: "LOCK", with: "UNLOCK")
        await #expect(throws: (any Error).self) { try await homeAssistantA.publish(lockB, forged, qos: .atLeastOnce, retain: true) }
        await #expect(throws: (any Error).self) {
            try await homeAssistantA.publish("homeassistant/device/site_a/site_a_demo_lock/config", forged, qos: .atLeastOnce, retain: true)
        }
        // Site A's bridge credentials at the centre may not write site B's discovery or state, nor the birth message.
        let bridgeA = try await login(central, "site-a")
        await #expect(throws: (any Error).self) { try await bridgeA.publish(lockB, forged, qos: .atLeastOnce, retain: true) }
        await #expect(throws: (any Error).self) { try await bridgeA.publish("site/b/device/demo_lock", #"{"lock":"UNLOCKED"}"#, qos: .atLeastOnce, retain: true) }
        await #expect(throws: (any Error).self) { try await bridgeA.publish("homeassistant/status", "online", qos: .atLeastOnce) }
        await bridgeA.shutdown()

        // Home Assistant's birth message at site A, then a command to site A: the state it causes goes up the same
        // bridge after the birth message would have, so once the centre has it, anything forwarded is there.
        let localB = try await login(siteB, "homeassistant")
        try await localB.subscribe("homeassistant/status")
        try await homeAssistantA.publish("homeassistant/status", "forged-at-a", qos: .atLeastOnce)
        try await homeAssistantA.publish("site/a/device/demo_light/set", #"{"state":"ON","brightness":44}"#, qos: .atLeastOnce)
        try await centre.waitForMessage(topic: "site/a/device/demo_light", timeout: .seconds(10)) { $0.json?["brightness"] as? Double == 44 }
        // The central Home Assistant's birth message does reach site B (after anything the centre had forwarded).
        try await centre.publish("homeassistant/status", "online", qos: .atLeastOnce)
        try await localB.waitForMessage(topic: "homeassistant/status", timeout: .seconds(10)) { $0.text == "online" }
        #expect(!localB.received.contains { $0.text == "forged-at-a" }, "site A's birth message reached site B")
        #expect(!centre.received.contains { $0.text == "forged-at-a" }, "site A's birth message reached the centre")
        // A central command still reaches site B, and site B's lock discovery at the centre is the gateway's.
        try await centre.publish("site/b/device/demo_light/set", #"{"state":"ON","brightness":45}"#, qos: .atLeastOnce)
        try await centre.waitForMessage(topic: "site/b/device/demo_light", timeout: .seconds(10)) { $0.json?["brightness"] as? Double == 45 }
        #expect(!centre.messages(on: lockB).contains { $0.text == forged })
        #expect(!centre.messages(on: "site/b/device/demo_lock").contains { $0.text == #"{"lock":"UNLOCKED"}"# })
        await localB.shutdown()
        await homeAssistantA.shutdown()
        await centre.shutdown()
    }
}
