import ConsciousnessSimulator
import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayTesting
import MQTT
import TestTraits
import Testing

/// End to end: the consciousness backend can only switch power, so its lock, door and
/// brightness are read-only everywhere: bridge/devices, Home Assistant discovery and the command path.
@Suite(.integration, .timeLimit(.minutes(2))) struct ConsciousnessCapabilityTests {
    static let lock = "consciousness_lock-front-door"
    static let light = "consciousness_lights-kitchen"
    static let thermostat = "consciousness_thermostat-main"

    @Test func lockIsReadOnlyInDevicesAndDiscoveryAndSetLockIsRefusedBeforeTheVendor() async throws {
        let simulator = ConsciousnessSimulator(configuration: .init(password: "backend-secret"))
        _ = try await simulator.start()
        let directory = try TemporaryDirectory()
        try "backend-secret\n".write(toFile: directory.file("backend-password"), atomically: true, encoding: .utf8)
        let vendors = """
              - type: consciousness
                id: consciousness
                url: \(await simulator.baseURL)
                username: admin
                password_file: backend-password
                poll_interval: 30
                timeout: 2
            """
        let gateway = try await GatewayHarness.start(directory: directory, vendors: vendors)
        defer { Task { await gateway.stop(); await simulator.stop() } }
        let client = try await gateway.observer("lbs/bridge/#", "homeassistant/#", "replies/#")

        let devices = try await client.waitForMessage(topic: "lbs/bridge/devices", timeout: .seconds(15)) {
            $0.text.contains(Self.lock)
        }
        let list = try #require((try? JSONSerialization.jsonObject(with: Data(devices.payload))) as? [[String: Any]])
        func capability(_ device: String, _ key: String) -> [String: Any]? {
            let entry = list.first { $0["id"] as? String == device }
            return (entry?["capabilities"] as? [[String: Any]])?.first { $0["key"] as? String == key }
        }
        #expect(capability(Self.lock, "lock")?["writable"] as? Bool == false)
        #expect(capability(Self.lock, "lock")?["commands"] == nil)
        #expect(capability(Self.lock, "state")?["writable"] as? Bool == true)
        #expect(capability(Self.light, "brightness")?["writable"] as? Bool == false)
        #expect(capability(Self.thermostat, "target_temperature")?["writable"] as? Bool == false)

        // Discovery: the lock is a sensor, not a lock entity with a command topic; the light has no brightness.
        let lockDiscovery = try await client.waitForMessage(topic: "homeassistant/device/lbs_\(Self.lock)/config", timeout: .seconds(10)) { ($0.json?["components"] as? [String: Any])?["stale"] != nil }
        let components = try #require(lockDiscovery.json?["components"] as? [String: [String: Any]])
        #expect(!components.values.contains { $0["platform"] as? String == "lock" })
        let lockEntity = try #require(components.values.first { ($0["value_template"] as? String)?.contains("value_json.lock") == true })
        #expect(lockEntity["platform"] as? String == "sensor")
        #expect(lockEntity["command_topic"] == nil)
        let lightDiscovery = try await client.waitForMessage(topic: "homeassistant/device/lbs_\(Self.light)/config", timeout: .seconds(10)) { ($0.json?["components"] as? [String: Any])?["stale"] != nil }
        let light = try #require((lightDiscovery.json?["components"] as? [String: [String: Any]])?.values.first { $0["platform"] as? String == "light" })
        #expect(light["brightness"] == nil)
        let thermostatDiscovery = try await client.waitForMessage(topic: "homeassistant/device/lbs_\(Self.thermostat)/config", timeout: .seconds(10)) { ($0.json?["components"] as? [String: Any])?["stale"] != nil }
        #expect(!thermostatDiscovery.text.contains("temperature_command_topic"))

        // The command path refuses it before any vendor call.
        let controls = simulator.counters.totalControlCalls
        let requests = simulator.counters.requestsByRoute.filter { $0.key.hasPrefix("PUT") }.values.reduce(0, +)
        try await client.publish("lbs/device/\(Self.lock)/set/lock", "LOCK", qos: .atLeastOnce,
                                 responseTopic: "replies/lock", correlationData: [1])
        let reply = try await client.waitForMessage(topic: "replies/lock", timeout: .seconds(10))
        #expect(reply.text.contains("read_only_key"), "\(reply.text)")
        try await client.waitForMessage(topic: "lbs/bridge/event", timeout: .seconds(10)) {
            $0.text.contains("command_failed") && $0.text.contains("read_only_key")
        }
        #expect(simulator.counters.totalControlCalls == controls)
        #expect(simulator.counters.requestsByRoute.filter { $0.key.hasPrefix("PUT") }.values.reduce(0, +) == requests)
        await client.shutdown()
    }
}
