import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayTesting
import MQTT
import TestTraits
import Testing

/// With broker ACLs, a client that may only send commands must not be able to make the gateway publish
/// into the gateway's namespace or Home Assistant's through the v5 Response Topic.
@Suite(.integration) struct ResponseTopicACLTests {
    @Test func aCommandOnlyClientCannotMakeTheGatewayWriteItsOwnTopics() async throws {
        let files = try TemporaryDirectory(prefix: "lbs-acl")
        for (index, (user, password)) in [("gateway", "gw-pass"), ("limited", "l-pass"), ("observer", "o-pass")].enumerated() {
            let arguments = (index == 0 ? ["-c"] : []) + ["-b", files.file("passwd"), user, password]
            let passwd = try ProcessRunner(executable: "mosquitto_passwd", arguments: arguments, outputDirectory: files.path, name: "passwd-\(user)")
            #expect(await passwd.waitForExit(timeout: .seconds(10)) == .exited(0))
        }
        try """
        user gateway
        topic readwrite #

        user limited
        topic write lbs/device/+/set
        topic read replies/#

        user observer
        topic read #
        """.write(toFile: files.file("acl"), atomically: true, encoding: .utf8)
        try "gw-pass".write(toFile: files.file("gateway-password"), atomically: true, encoding: .utf8)
        let broker = try await MosquittoBroker.started(extraConfiguration: """
            allow_anonymous false
            password_file \(files.file("passwd"))
            acl_file \(files.file("acl"))
            """)
        let gateway = try await GatewayHarness.start(
            broker: broker, directory: files, mqtt: "username: gateway\n  password_file: gateway-password")
        defer { Task { await gateway.stop() } }

        let observer = try await TestMQTTClient.connect(to: broker.url) { $0.username = "observer"; $0.password = "o-pass" }
        try await observer.subscribe("lbs/#")
        try await observer.subscribe("homeassistant/#")
        try await observer.waitForMessage(topic: "lbs/device/demo_light", timeout: .seconds(10))
        let limited = try await TestMQTTClient.connect(to: broker.url) { $0.username = "limited"; $0.password = "l-pass" }
        try await limited.subscribe("replies/#")

        let forbidden = ["lbs/bridge/state", "lbs/bridge/devices", "lbs/device/demo_lock/availability",
                         "homeassistant/status", "homeassistant/device/lbs_demo_lock/config"]
        for topic in forbidden {
            try await limited.publish("lbs/device/demo_light/set", #"{"state":"ON"}"#, qos: .atLeastOnce, responseTopic: topic)
        }
        try await limited.publish("lbs/device/demo_light/set", #"{"state":"OFF"}"#, qos: .atLeastOnce, responseTopic: "replies/1")
        let reply = try await limited.waitForMessage(topic: "replies/1", timeout: .seconds(10))
        #expect(reply.text.contains(#""status":"ok""#))
        try await observer.waitForMessage(topic: "lbs/bridge/event", timeout: .seconds(5)) { $0.text.contains("response_refused") }
        for topic in forbidden {
            #expect(!observer.messages(on: topic).contains { $0.text.contains("status") }, "the gateway answered on \(topic)")
        }
        await limited.shutdown()
        await observer.shutdown()
    }

    /// The shipped `deploy/mosquitto/acl` and the default `replies/` prefix agree: Node-RED's documented replies
    /// (`replies/nodered/…`) arrive, and a request cannot aim the reply at another system's command topic.
    @Test func repliesGoUnderRepliesByDefaultAndTheShippedACLLetsThemThrough() async throws {
        let files = try TemporaryDirectory(prefix: "lbs-acl")
        let deploy = BrokerSecurityTests.deploy
        try await BrokerSecurityTests.shell("\(deploy)/add-user.sh \(files.file("passwd")) lbs-gateway", stdin: "pw-lbs-gateway", in: files)
        try await BrokerSecurityTests.shell("\(deploy)/add-user.sh \(files.file("passwd")) nodered", stdin: "pw-nodered", in: files)
        try await BrokerSecurityTests.shell("\(deploy)/add-user.sh \(files.file("passwd")) observer", stdin: "pw-observer", in: files)
        // The shipped ACL, plus a test observer that may read everything (to see what the gateway publishes).
        let acl = try String(contentsOfFile: deploy + "/acl", encoding: .utf8) + "\nuser observer\ntopic read #\n"
        try acl.write(toFile: files.file("acl"), atomically: true, encoding: .utf8)
        try "pw-lbs-gateway".write(toFile: files.file("gateway-password"), atomically: true, encoding: .utf8)
        let broker = try await MosquittoBroker.started(extraConfiguration: """
            allow_anonymous false
            password_file \(files.file("passwd"))
            acl_file \(files.file("acl"))
            """)
        let gateway = try await GatewayHarness.start(
            broker: broker, directory: files, mqtt: "username: lbs-gateway\n  password_file: gateway-password\n  base_topic: lbs")
        defer { Task { await gateway.stop() } }

        let observer = try await TestMQTTClient.connect(to: broker.url) { $0.username = "observer"; $0.password = "pw-observer" }
        try await observer.subscribe("#")
        try await observer.waitForMessage(topic: "lbs/device/demo_light", timeout: .seconds(10))
        let nodeRed = try await TestMQTTClient.connect(to: broker.url) { $0.username = "nodered"; $0.password = "pw-nodered" }
        try await nodeRed.subscribe("replies/nodered/#")

        try await nodeRed.publish("lbs/bridge/request/info", #"{"transaction":"UNLOCK"}"#, qos: .atLeastOnce,
                                  responseTopic: "zigbee2mqtt/front_door/set")
        try await observer.waitForMessage(topic: "lbs/bridge/event", timeout: .seconds(10)) {
            $0.text.contains("response_refused") && $0.text.contains("zigbee2mqtt/front_door/set")
        }
        try await nodeRed.publish("lbs/device/demo_light/set", #"{"state":"ON"}"#, qos: .atLeastOnce, responseTopic: "replies/nodered/1",
                                  correlationData: Array("c-1".utf8))
        let reply = try await nodeRed.waitForMessage(topic: "replies/nodered/1", timeout: .seconds(10))
        #expect(reply.text.contains(#""status":"ok""#))
        #expect(reply.correlationData == Array("c-1".utf8))
        // The refused reply was never published (the observer reads every topic; the ok reply came after it).
        #expect(observer.messages(on: "zigbee2mqtt/front_door/set").isEmpty)
        await nodeRed.shutdown()
        await observer.shutdown()
    }
}
