import ConsciousnessSimulator
import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayTesting
import MQTT
import TestTraits
import Testing

/// After an outage the backend's devices came back 38–58 s after it was serving again, because one
/// failed half-open probe cost the whole configured wait. With the default `open_duration` (30 s) the first
/// probe now comes 5 s after the trip, the next 10 s after a failed one, and the poll loop makes that probe.
@Suite(.integration, .serialized, .timeLimit(.minutes(2))) struct BreakerRecoveryTests {
    static let kitchen = "consciousness_lights-kitchen"

    @Test func devicesAreBackWithinSecondsOfTheBackend() async throws {
        let simulator = try await ResilienceIntegrationTests.simulator()
        // The default breaker waits (open_duration 30); two failed calls trip it.
        let vendors = """
              - {type: consciousness, id: consciousness, url: "\(await simulator.baseURL)", username: admin, password_file: backend-password, poll_interval: 2, timeout: 1, breaker: {minimum_calls: 2}}
            """
        let gateway = try await GatewayHarness.start(directory: try ResilienceIntegrationTests.directory(), vendors: vendors)
        defer { Task { await gateway.stop(); await simulator.stop() } }
        let client = try await gateway.observer("lbs/#")
        try await client.waitForMessage(topic: "lbs/device/\(Self.kitchen)/availability", timeout: .seconds(10)) { $0.text.contains("online") }

        await simulator.stop()
        try await client.waitForMessage(topic: "lbs/bridge/vendors/consciousness", timeout: .seconds(15)) {
            $0.json?["breaker"] as? String == "open"
        }
        try await client.waitForMessage(topic: "lbs/device/\(Self.kitchen)/availability", timeout: .seconds(10)) { $0.text.contains("offline") }
        // Down long enough for a probe to fail (5 s after the trip), so the wait has doubled once.
        try await hold(for: .seconds(7))
        _ = try await simulator.start()
        let back = ContinuousClock.now
        try await waitUntil("the kitchen light online again", timeout: .seconds(25)) {
            client.messages(on: "lbs/device/\(Self.kitchen)/availability").last?.text.contains("online") == true
        }
        let took = ContinuousClock.now - back
        #expect(took <= .seconds(11), "devices were back \(took) after the backend")
        await client.shutdown()
    }
}
