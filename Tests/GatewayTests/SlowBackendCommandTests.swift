import ConsciousnessSimulator
import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayTesting
import MQTT
import TestTraits
import Testing

/// The command sequence seen against a real backend that answered after 30 s: one `/set` reached it seven
/// times, and `slow → OFF → fast → ON` ended OFF. Here the simulator applies a control request 3 s late
/// (after the gateway's 1 s timeout, the work goes on) — the gateway must send each command once and
/// the device must end as the last command said.
@Suite(.integration) struct SlowBackendCommandTests {
    static let kitchen = "consciousness_lights-kitchen"
    static let control = FaultMatch(pathPrefix: "/api/v1/devices/lights-kitchen/control")

    /// The simulator, a gateway with a cache polling it every 30 s (1 s timeout), and an observer that saw the kitchen.
    static func start(yaml: String = "") async throws -> (ConsciousnessSimulator, GatewayHarness, TestMQTTClient) {
        let simulator = try await ResilienceIntegrationTests.simulator()
        let gateway = try await GatewayHarness.start(
            directory: try ResilienceIntegrationTests.directory(), yaml: yaml,
            vendors: await ResilienceIntegrationTests.vendorYAML(simulator, pollInterval: 30), storage: true)
        let client = try await gateway.observer("lbs/#", "replies/#")
        try await client.waitForMessage(topic: "lbs/device/\(kitchen)", timeout: .seconds(10))
        return (simulator, gateway, client)
    }

    @Test func aCommandToASlowBackendIsSentOnceAndConfirmedByReadingBack() async throws {
        let (simulator, gateway, client) = try await Self.start()
        defer { Task { await gateway.stop(); await simulator.stop() } }

        simulator.inject(.late(delay: .seconds(3)), times: 1, matching: Self.control)
        try await client.publish("lbs/device/\(Self.kitchen)/set", #"{"state":"OFF"}"#, qos: .atLeastOnce, responseTopic: "replies/off")
        let answer = try await client.waitForMessage(topic: "replies/off", timeout: .seconds(20))
        #expect(answer.text.contains(#""status":"ok""#), "\(answer.text)")
        #expect(simulator.counters.controlCalls(deviceID: "lights-kitchen", action: "turn_off") == 1)
        await client.shutdown()
    }

    @Test func slowOffThenFastOnEndsOnAndEachIsSentOnce() async throws {
        let (simulator, gateway, client) = try await Self.start()
        defer { Task { await gateway.stop(); await simulator.stop() } }

        simulator.inject(.late(delay: .seconds(3)), times: 1, matching: Self.control)
        try await client.publish("lbs/device/\(Self.kitchen)/set", #"{"state":"OFF"}"#, qos: .atLeastOnce, responseTopic: "replies/off")
        try await waitUntil("OFF reached the backend") { simulator.counters.requestsByRoute["PUT /api/v1/devices/lights-kitchen/control"] == 1 }
        // The backend is fast again (the fault was for one request); the user switches it back on.
        try await client.publish("lbs/device/\(Self.kitchen)/set", #"{"state":"ON"}"#, qos: .atLeastOnce, responseTopic: "replies/on")
        let on = try await client.waitForMessage(topic: "replies/on", timeout: .seconds(30))
        #expect(on.text.contains(#""status":"ok""#), "\(on.text)")
        let off = try await client.waitForMessage(topic: "replies/off", timeout: .seconds(5))
        #expect(off.text.contains(#""status":"ok""#), "the late OFF was carried out: \(off.text)")
        // Nothing is still on its way to the backend: the device stays as the last command said.
        try await quietPeriod( .seconds(1))
        #expect(simulator.counters.controlCalls(deviceID: "lights-kitchen", action: "turn_off") == 1)
        #expect(simulator.counters.controlCalls(deviceID: "lights-kitchen", action: "turn_on") == 1)
        // The backend's own view of the light, not only what the gateway published.
        let backend = try JSONSerialization.jsonObject(with: Data(simulator.devicesJSON().utf8))
        let list = (backend as? [[String: Any]]) ?? ((backend as? [String: Any])?["devices"] as? [[String: Any]]) ?? []
        let light = try #require(list.first { $0["id"] as? String == "lights-kitchen" })
        #expect(light["status"] as? String == "active", "backend: \(light)")
        let state = try #require(client.messages(on: "lbs/device/\(Self.kitchen)").last?.json)
        #expect(state["state"] as? String == "ON")
        await client.shutdown()
    }

    @Test func aCommandIsNeverSentAfterItsDeadlineEvenWhenTheVendorAsksToWait() async throws {
        let (simulator, gateway, client) = try await Self.start(yaml: "commands: {ttl: 3}")
        defer { Task { await gateway.stop(); await simulator.stop() } }

        // The backend asks for a 30 s pause; the command may wait 3 s at most.
        simulator.injectRateLimit(count: 10, retryAfterSeconds: 30, matching: Self.control)
        try await client.publish("lbs/device/\(Self.kitchen)/set", #"{"state":"OFF"}"#, qos: .atLeastOnce, responseTopic: "replies/late")
        let answer = try await client.waitForMessage(topic: "replies/late", timeout: .seconds(20))
        #expect(answer.text.contains(#""status":"error""#), "\(answer.text)")
        try await quietPeriod( .seconds(4))
        #expect(simulator.counters.requestsByRoute["PUT /api/v1/devices/lights-kitchen/control"] == 1,
                "requests after the deadline: \(simulator.counters.requestsByRoute)")
        await client.shutdown()
    }
}
