import ConsciousnessSimulator
import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayTesting
import MQTT
import TestTraits
import Testing

/// Against the real backend one OFF was sent 5 times, about every 65 s (its settle window plus the
/// timeout), until it expired, although the rule is "sent once more". A backend that takes the command but never
/// shows it gets it twice at most; then the sender hears an error with a code.
@Suite(.integration, .serialized, .timeLimit(.minutes(2))) struct UnknownOutcomeResendTests {
    static let kitchen = "consciousness_lights-kitchen"

    @Test func anOffTheBackendNeverShowsIsSentOnceMoreThenFailsWithACode() async throws {
        let simulator = try await ResilienceIntegrationTests.simulator()
        let vendors = """
              - {type: consciousness, id: consciousness, url: "\(await simulator.baseURL)", username: admin, password_file: backend-password, poll_interval: 30, timeout: 1}
            """
        let gateway = try await GatewayHarness.start(
            directory: try ResilienceIntegrationTests.directory(), yaml: "commands: {ttl: 15, settle_window: 1}", vendors: vendors, storage: true)
        defer { Task { await gateway.stop(); await simulator.stop() } }
        let client = try await gateway.observer("lbs/#", "replies/#")
        try await client.waitForMessage(topic: "lbs/device/\(Self.kitchen)", timeout: .seconds(10))

        // Every control request is taken, answered too late (after the 1 s timeout) and never carried out.
        simulator.inject(.unapplied(delay: .seconds(2)), times: nil, matching: FaultMatch(pathPrefix: "/api/v1/devices/lights-kitchen/control"))
        try await client.publish("lbs/device/\(Self.kitchen)/set", #"{"state":"OFF"}"#, qos: .atLeastOnce, responseTopic: "replies/off")
        let answer = try await client.waitForMessage(topic: "replies/off", timeout: .seconds(30))
        let error = try #require((answer.json?["error"] as? [String: Any]), "\(answer.text)")
        #expect(error["code"] as? String == "vendor_timeout", "\(answer.text)")
        #expect((error["message"] as? String)?.contains("already sent once more") == true, "\(answer.text)")
        // Nothing more goes out for it.
        try await quietPeriod( .seconds(3))
        #expect(simulator.counters.controlCalls(deviceID: "lights-kitchen", action: "turn_off") == 2)
        await client.shutdown()
    }
}
