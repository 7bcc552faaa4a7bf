import Cache
import ConsciousnessSimulator
import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayTesting
import MQTT
import TestTraits
import Testing

/// `tls:` end to end: real broker, real SQLite file, the consciousness simulator behind a socat TLS front
/// with a self-signed key, and the real `lbs-gateway tls-pin` command.
@Suite(.integration, .enabled(if: TLSFront.isAvailable), .timeLimit(.minutes(3)))
struct TLSPinningIntegrationTests {
    static let kitchen = "lbs/device/consciousness_lights-kitchen"
    static let health = "lbs/bridge/vendors/consciousness"

    static func vendorYAML(_ front: TLSFront, tls: String) -> String {
        """
          - type: consciousness
            id: consciousness
            url: \(front.url)
            username: admin
            password_file: backend-password
            poll_interval: 0.2
            timeout: 2
            tls: \(tls)
            breaker: {minimum_calls: 2, failure_ratio: 0.5, window: 10, open_duration: 1, max_open_duration: 2}
        """
    }

    /// A simulator, a TLS front before it, and a directory holding the backend password.
    static func backend() async throws -> (ConsciousnessSimulator, TLSFront, TemporaryDirectory) {
        let simulator = try await ResilienceIntegrationTests.simulator()
        let front = try await TLSFront.started(targetPort: Int(await simulator.port))
        return (simulator, front, try ResilienceIntegrationTests.directory())
    }

    static func lastErrorCode(_ message: MQTTMessage) -> String? {
        (message.json?["last_error"] as? [String: Any])?["code"] as? String
    }

    /// Runs `lbs-gateway tls-pin` and returns what it printed.
    static func tlsPin(_ binary: String, config: String, forget: Bool, directory: TemporaryDirectory, name: String) async throws -> String {
        let process = try ProcessRunner(
            executable: binary, arguments: ["tls-pin", "--config", config, "--vendor", "consciousness"] + (forget ? ["--forget"] : []),
            outputDirectory: directory.path, name: name
        )
        let status = await process.waitForExit(timeout: .seconds(30))
        #expect(status == .exited(0), "tls-pin: \(process.standardError())")
        return process.standardOutput()
    }

    @Test func firstUsePinsTheKeyInTheCacheAndDevicesAppear() async throws {
        let (simulator, front, directory) = try await Self.backend()
        let gateway = try await GatewayHarness.start(directory: directory, vendors: Self.vendorYAML(front, tls: "first_use"), storage: true)
        defer { Task { await gateway.stop(); await front.stop(); await simulator.stop() } }
        let client = try await gateway.observer("lbs/#")
        try await client.waitForMessage(topic: Self.kitchen, timeout: .seconds(10))

        // Stored before the first request went out, so it is there once a device is.
        let store = try gateway.directoryStore()
        defer { try? store.close() }
        #expect(try store.pin(for: front.hostPort) == front.pin)
        let report = try await TLSPinTool.inspect(config: gateway.config, vendorID: "consciousness")
        #expect(report.presented == front.pin)
        #expect(report.pinned == front.pin)
        #expect(report.hostPort == front.hostPort)
        #expect(report.lines.contains { $0.contains("matches") })
        await client.shutdown()
    }

    @Test func aChangedKeyIsRefusedUntilTheOperatorForgetsThePin() async throws {
        let binary = try #require(Binaries.gateway, "lbs-gateway is not built")
        let (simulator, front, directory) = try await Self.backend()
        let vendors = Self.vendorYAML(front, tls: "first_use")
        let gateway = try await GatewayHarness.start(directory: directory, vendors: vendors, storage: true)
        defer { Task { await gateway.stop(); await front.stop(); await simulator.stop() } }
        let client = try await gateway.observer("lbs/#")
        try await client.waitForMessage(topic: Self.kitchen, timeout: .seconds(10))
        let firstKey = front.pin
        let store = try gateway.directoryStore()
        defer { try? store.close() }
        #expect(try store.pin(for: front.hostPort) == firstKey)

        // The device is replaced: same address, new key.
        try await front.restart(newKey: true)
        let mismatch = try await client.waitForMessage(topic: Self.health, timeout: .seconds(15)) { Self.lastErrorCode($0) == "tls_pin_mismatch" }
        let suggestion = (mismatch.json?["last_error"] as? [String: Any])?["suggestion"] as? String
        #expect(suggestion?.contains("--forget") == true)
        // Attempts go on (every poll) while the operator looks below; none may reach the backend.
        let requests = simulator.counters.requests
        #expect(try store.pin(for: front.hostPort) == firstKey)

        // The operator looks, then accepts the new key with the CLI while the gateway runs.
        let config = directory.file("config.yaml")
        try "mqtt: {url: \(gateway.broker.url)}\nstorage: {path: gateway.sqlite}\nvendors:\n\(vendors)\n"
            .write(toFile: config, atomically: true, encoding: .utf8)
        let shown = try await Self.tlsPin(binary, config: config, forget: false, directory: directory, name: "inspect")
        #expect(shown.contains("stored pin:    sha256//\(firstKey)"), "\(shown)")
        #expect(shown.contains("presented:     sha256//\(front.pin)"), "\(shown)")
        #expect(shown.contains("DIFFERS"))
        #expect(try store.pin(for: front.hostPort) == firstKey)
        #expect(simulator.counters.requests == requests, "a request reached the backend behind a changed key")
        let forgot = try await Self.tlsPin(binary, config: config, forget: true, directory: directory, name: "forget")
        #expect(forgot.contains("forgot:        sha256//\(firstKey)"), "\(forgot)")

        // The next attempt pins the new key and data flows again.
        let before = client.messages(on: Self.health).count
        try await waitUntil("the new key is pinned", timeout: .seconds(15)) { try store.pin(for: front.hostPort) == front.pin }
        // Unchanged device values are not re-published; the vendor's health says the calls succeed again.
        try await waitUntil("the vendor answers again", timeout: .seconds(15)) {
            let health = client.messages(on: Self.health)
            return health.count > before && health.last?.json?["state"] as? String == "ok"
        }
        #expect(simulator.counters.requests > requests)
        await client.shutdown()
    }

    @Test func systemTrustRefusesTheSelfSignedFrontAndNoDataFlows() async throws {
        let (simulator, front, directory) = try await Self.backend()
        let gateway = try await GatewayHarness.start(directory: directory, vendors: Self.vendorYAML(front, tls: "system"))
        defer { Task { await gateway.stop(); await front.stop(); await simulator.stop() } }
        let client = try await gateway.observer("lbs/#")
        let refused = try await client.waitForMessage(topic: Self.health, timeout: .seconds(15)) { Self.lastErrorCode($0) == "tls_error" }
        let suggestion = (refused.json?["last_error"] as? [String: Any])?["suggestion"] as? String
        #expect(suggestion?.contains("first_use") == true)
        #expect(simulator.counters.requests == 0)
        #expect(client.messages(on: Self.kitchen).isEmpty)
        await client.shutdown()
    }

    @Test func aConfiguredPinIsAccepted() async throws {
        let (simulator, front, directory) = try await Self.backend()
        let gateway = try await GatewayHarness.start(directory: directory, vendors: Self.vendorYAML(front, tls: "{pin: \"sha256//\(front.pin)\"}"))
        defer { Task { await gateway.stop(); await front.stop(); await simulator.stop() } }
        let client = try await gateway.observer("lbs/#")
        try await client.waitForMessage(topic: Self.kitchen, timeout: .seconds(10))
        await client.shutdown()
    }

    @Test func aWrongConfiguredPinIsAMismatch() async throws {
        let (simulator, front, directory) = try await Self.backend()
        let wrong = Data(repeating: 7, count: 32).base64EncodedString()
        let gateway = try await GatewayHarness.start(directory: directory, vendors: Self.vendorYAML(front, tls: "{pin: \"\(wrong)\"}"))
        defer { Task { await gateway.stop(); await front.stop(); await simulator.stop() } }
        let client = try await gateway.observer("lbs/#")
        let refused = try await client.waitForMessage(topic: Self.health, timeout: .seconds(15)) { Self.lastErrorCode($0) == "tls_pin_mismatch" }
        #expect((refused.json?["last_error"] as? [String: Any])?["severity"] as? String == "critical")
        #expect(simulator.counters.requests == 0)
        #expect(client.messages(on: Self.kitchen).isEmpty)
        await client.shutdown()
    }
}
