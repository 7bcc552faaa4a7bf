import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayTesting
import MQTT
import TestTraits
import Testing

/// `deploy/mosquitto/` against a real mosquitto: certificates from `make-certs.sh`, users from `add-user.sh`
/// (password on stdin), the shipped `acl` and `mosquitto.conf` (paths and ports swapped for the test's). Home
/// Assistant's user may command (`/set`) but not forge state; the gateway connects over TLS with its client
/// certificate and password and works end to end.
@Suite(.integration, .serialized, .timeLimit(.minutes(2))) struct BrokerSecurityTests {
    static let deploy = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("deploy/mosquitto").path

    struct SecureBroker {
        let process: ProcessRunner
        let directory: TemporaryDirectory
        let tlsPort: Int
        let plainPort: Int
    }

    static func shell(_ script: String, stdin: String? = nil, in directory: TemporaryDirectory) async throws {
        let command = stdin.map { "printf '%s' '\($0)' | \(script)" } ?? script
        let process = try ProcessRunner(executable: "/bin/bash", arguments: ["-c", command], outputDirectory: directory.path,
                                        name: "sh-\(UInt32.random(in: 0...UInt32.max))")
        let status = await process.waitForExit(timeout: .seconds(60))
        #expect(status == .exited(0), "\(script): \(process.standardError())")
    }

    static func start(pair: Bool = false) async throws -> SecureBroker {
        let directory = try TemporaryDirectory()
        let folder = directory.path
        try await shell("\(deploy)/make-certs.sh \(folder) localhost 127.0.0.1", in: directory)
        for user in ["lbs-gateway", "homeassistant", "nodered"] {
            try await shell("\(deploy)/add-user.sh \(folder)/passwd \(user)", stdin: "pw-\(user)", in: directory)
        }
        if pair {
            // The pair's per-connection users, all with the gateway's password, in one call (as the README says).
            let users = ["a", "b"].flatMap { ["lbs-gateway-observer-\($0)", "lbs-gateway-lease-\($0)"] }.joined(separator: " ")
            try await shell("\(deploy)/add-user.sh \(folder)/passwd \(users)", stdin: "pw-lbs-gateway", in: directory)
        }
        try FileManager.default.copyItem(atPath: deploy + "/acl", toPath: folder + "/acl")
        let (tlsPort, plainPort) = (try freeLoopbackPort(), try freeLoopbackPort())
        let shipped = try String(contentsOfFile: deploy + "/mosquitto.conf", encoding: .utf8)
        // `user root`: a broker started as root keeps root, to read the 0600 files in the test's folder.
        let config = "user root\n" + shipped.replacingOccurrences(of: "/etc/mosquitto/lbs/", with: folder + "/")
            .replacingOccurrences(of: "listener 8883", with: "listener \(tlsPort)")
            .replacingOccurrences(of: "listener 1883 127.0.0.1", with: "listener \(plainPort) 127.0.0.1")
        try config.write(toFile: directory.file("mosquitto.conf"), atomically: true, encoding: .utf8)
        let process = try ProcessRunner(executable: "mosquitto", arguments: ["-c", directory.file("mosquitto.conf")], outputDirectory: folder, name: "mosquitto")
        guard try await waitForListener(process, port: tlsPort, timeout: .seconds(10)) else {
            throw TestSupportError("mosquitto did not start: \(process.standardError())")
        }
        return SecureBroker(process: process, directory: directory, tlsPort: tlsPort, plainPort: plainPort)
    }

    static func client(_ broker: SecureBroker, user: String, password: String? = nil, certificate: Bool = false,
                       clientID: String = TestMQTTClient.uniqueClientID()) async throws -> TestMQTTClient {
        try await TestMQTTClient.connect(to: "mqtts://localhost:\(broker.tlsPort)", clientID: clientID) { configuration in
            configuration.username = user
            configuration.password = password ?? "pw-\(user)"
            configuration.tls = MQTTTLSOptions(caFile: broker.directory.file("ca.pem"),
                                               certificateFile: certificate ? broker.directory.file("client.pem") : nil,
                                               keyFile: certificate ? broker.directory.file("client.key") : nil)
        }
    }

    @Test func homeAssistantMayCommandButNotForgeStateAndTheGatewayRunsOverTLS() async throws {
        let broker = try await Self.start()
        defer { broker.process.kill() }
        // The gateway over TLS with its client certificate and its password from a file.
        let directory = broker.directory
        try "pw-lbs-gateway".write(toFile: directory.file("gateway-password"), atomically: true, encoding: .utf8)
        let config = directory.file("gateway.yaml")
        try """
        mqtt:
          url: mqtts://localhost:\(broker.tlsPort)
          client_id: secure-gateway
          username: lbs-gateway
          password_file: gateway-password
          ca_file: ca.pem
          cert_file: client.pem
          key_file: client.key
        log_level: warning
        http: {enabled: false}
        vendors: [{type: demo, id: demo, poll_interval: 3600}]
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let binary = try #require(Binaries.gateway)
        let gateway = try ProcessRunner(executable: binary, arguments: ["run", "--config", config], outputDirectory: directory.path, name: "gateway")
        defer { gateway.kill() }

        let watcher = try await Self.client(broker, user: "nodered")
        try await watcher.subscribe("lbs/#")
        try await watcher.waitForMessage(topic: "lbs/bridge/state", timeout: .seconds(15)) { $0.text.contains("online") }
        try await watcher.waitForMessage(topic: "lbs/device/demo_light", timeout: .seconds(10))

        let homeAssistant = try await Self.client(broker, user: "homeassistant")
        // Forged state: the broker refuses it (MQTT v5 PUBACK 135, not authorized) and nobody sees it.
        let forged = await #expect(throws: (any Error).self) { try await homeAssistant.publish("lbs/device/forged", #"{"state":"ON"}"#, qos: .atLeastOnce) }
        #expect("\(forged.map { "\($0)" } ?? "")".contains("Not authorized"))
        // A command: allowed, and the gateway carries it out.
        try await homeAssistant.publish("lbs/device/demo_light/set", #"{"state":"ON","brightness":77}"#, qos: .atLeastOnce)
        try await watcher.waitForMessage(topic: "lbs/device/demo_light", timeout: .seconds(10)) { $0.json?["brightness"] as? Double == 77 }
        #expect(watcher.messages(on: "lbs/device/forged").isEmpty, "a state topic is the gateway's alone")
        // Node-RED may not write Home Assistant's discovery either.
        await #expect(throws: (any Error).self) { try await watcher.publish("homeassistant/device/lbs_demo_light/config", "", qos: .atLeastOnce) }

        // A wrong password and a client without the CA are refused.
        await #expect(throws: (any Error).self) { _ = try await Self.client(broker, user: "homeassistant", password: "wrong") }
        await #expect(throws: (any Error).self) {
            _ = try await TestMQTTClient.connect(to: "mqtts://localhost:\(broker.tlsPort)") { configuration in
                configuration.username = "homeassistant"
                configuration.password = "pw-homeassistant"
            }
        }
        await watcher.shutdown()
        await homeAssistant.shutdown()
    }

    /// A gateway on the broker's loopback listener with the shipped users (`extra`: more YAML).
    static func gatewayConfig(_ broker: SecureBroker, name: String, extra: String = "") throws -> String {
        try "pw-lbs-gateway".write(toFile: broker.directory.file("gateway-password"), atomically: true, encoding: .utf8)
        let path = broker.directory.file("\(name).yaml")
        try """
        mqtt:
          url: mqtt://127.0.0.1:\(broker.plainPort)
          username: lbs-gateway
          password_file: gateway-password
          reconnect_min_delay: 0.1
          reconnect_max_delay: 0.5
        http: {enabled: false}
        vendors: [{type: demo, id: demo, poll_interval: 3600}]
        \(extra)
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// The shipped config binds client ids to users: Home Assistant's login asking for the gateway's client id
    /// gets its own, and the gateway is not kicked off (it was, over and over, losing its persistent session).
    @Test func anotherLoginCannotTakeTheGatewaysClientID() async throws {
        let broker = try await Self.start()
        defer { broker.process.kill() }
        let binary = try #require(Binaries.gateway)
        let config = try Self.gatewayConfig(broker, name: "gateway", extra: "log_level: warning")
        let gateway = try ProcessRunner(executable: binary, arguments: ["run", "--config", config], outputDirectory: broker.directory.path, name: "gateway")
        defer { gateway.kill() }
        let watcher = try await Self.client(broker, user: "nodered")
        try await watcher.subscribe("lbs/#")
        try await watcher.waitForMessage(topic: "lbs/bridge/state", timeout: .seconds(15)) { $0.text.contains("online") }
        try await watcher.waitForMessage(topic: "lbs/device/demo_light", timeout: .seconds(10))

        let homeAssistant = try await Self.client(broker, user: "homeassistant", clientID: "lbs-gateway")
        try await homeAssistant.publish("lbs/device/demo_light/set", #"{"state":"ON","brightness":55}"#, qos: .atLeastOnce)
        try await watcher.waitForMessage(topic: "lbs/device/demo_light", timeout: .seconds(10)) { $0.json?["brightness"] as? Double == 55 }
        #expect(!gateway.standardError().contains("disconnected from the broker"), "the gateway was kicked off: \(gateway.standardError().suffix(600))")
        #expect(homeAssistant.connectCount == 1, "Home Assistant's own connection stays too")
        #expect(!watcher.messages(on: "lbs/bridge/state").contains { $0.text.contains("offline") })
        await homeAssistant.shutdown()
        await watcher.shutdown()
    }

    /// An active/standby pair works with the shipped config (`per_connection_usernames`: each node's observer and
    /// lease connection have users, so client ids, of their own), and a login asking for the active's lease client
    /// id neither stops the active (it did: its lease connection was kicked) nor keeps the standby from taking over.
    @Test func thePairWorksWithClientIDsBoundToUsers() async throws {
        let broker = try await Self.start(pair: true)
        defer { broker.process.kill() }
        let binary = try #require(Binaries.gateway)
        func node(_ id: String) throws -> ProcessRunner {
            let config = try Self.gatewayConfig(broker, name: id, extra: "high_availability: {node_id: \(id), nodes: [a, b], per_connection_usernames: true}")
            return try ProcessRunner(executable: binary, arguments: ["run", "--config", config], outputDirectory: broker.directory.path, name: "gateway-\(id)")
        }
        let watcher = try await Self.client(broker, user: "nodered")
        try await watcher.subscribe("lbs/#")
        let nodeA = try node("a")
        defer { nodeA.kill() }
        try await ActiveStandbyTests.waitFor("node a to take the lease") { ActiveStandbyTests.leaseHolder(watcher, topic: "lbs/bridge/lease") == "a" }
        try await watcher.waitForMessage(topic: "lbs/bridge/state", timeout: .seconds(15)) { $0.text.contains("online") }
        let nodeB = try node("b")
        defer { nodeB.kill() }
        try await ActiveStandbyTests.waitFor("node b to report standby") { nodeB.standardError().contains("standby: node a holds the lease") }

        let homeAssistant = try await Self.client(broker, user: "homeassistant", clientID: "lbs-gateway-lease-a")
        let seen = watcher.received.count
        // The active renews its lease every lease_keepalive (5 s): a renewal after the login shows it kept it.
        try await ActiveStandbyTests.waitFor("a renewal of node a's lease") {
            watcher.received.dropFirst(seen).contains { $0.topic == "lbs/bridge/lease" && $0.json?["node"] as? String == "a" }
        }
        #expect(nodeA.isRunning, "the active stopped: \(nodeA.standardError().suffix(600))")
        try await homeAssistant.publish("lbs/device/demo_light/set", #"{"state":"ON","brightness":66}"#, qos: .atLeastOnce)
        try await watcher.waitForMessage(topic: "lbs/device/demo_light", timeout: .seconds(10)) { $0.json?["brightness"] as? Double == 66 }

        // The active dies: the standby takes over, through the shipped ACL and users.
        nodeA.kill()
        try await ActiveStandbyTests.waitFor("node b to take the lease", timeout: .seconds(30)) {
            ActiveStandbyTests.leaseHolder(watcher, topic: "lbs/bridge/lease") == "b"
        }
        try await ActiveStandbyTests.waitFor("node b's gateway connected") { nodeB.standardError().contains("active: this node (b) holds the lease") }
        try await homeAssistant.publish("lbs/device/demo_light/set", #"{"brightness":67}"#, qos: .atLeastOnce)
        try await watcher.waitForMessage(topic: "lbs/device/demo_light", timeout: .seconds(15)) { $0.json?["brightness"] as? Double == 67 }
        await homeAssistant.shutdown()
        await watcher.shutdown()
    }
}
