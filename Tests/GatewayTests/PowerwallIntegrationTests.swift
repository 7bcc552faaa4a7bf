import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayTesting
import MQTT
import TestTraits
import Testing
import VendorSimulators

/// `type: powerwall` end to end: the gateway's services, a real broker and the Powerwall simulator serving a
/// real gateway's recorded responses. What a user sees on MQTT and in Home Assistant.
@Suite(.integration, .timeLimit(.minutes(2))) struct PowerwallIntegrationTests {
    func start(writable: Bool) async throws -> (PowerwallSimulator, GatewayHarness) {
        let simulator = try PowerwallSimulator(configuration: .init(
            password: "TESLA", fixtures: Fixtures.path("powerwall", ""), customerMayWriteOperation: writable
        ))
        try await simulator.start()
        let directory = try TemporaryDirectory()
        try "TESLA\n".write(toFile: directory.file("pw-password"), atomically: true, encoding: .utf8)
        let vendors = """
              - {type: powerwall, id: pw, url: "\(await simulator.baseURL)", password_file: pw-password, poll_interval: 1}
            """
        let gateway = try await GatewayHarness.start(directory: directory, vendors: vendors, storage: true)
        return (simulator, gateway)
    }

    @Test func theSiteIsPublishedDiscoveredAndItsReserveIsSetFromMQTT() async throws {
        let (simulator, gateway) = try await start(writable: true)
        defer { Task { await gateway.stop(); await simulator.stop() } }
        let client = try await gateway.observer("lbs/device/pw_site", "lbs/bridge/vendors/pw", "homeassistant/device/lbs_pw_site/config", "replies/#")

        let state = try await client.waitForMessage(topic: "lbs/device/pw_site", timeout: .seconds(15))
        let values = try #require(state.json)
        #expect(values["grid_power"] as? Double == -5347.5)
        #expect(values["battery_level"] as? Double == 42.4)
        #expect(values["grid_status"] as? String == "connected")
        #expect(values["operation_mode"] as? String == "self_consumption")
        let discovery = try await client.waitForMessage(topic: "homeassistant/device/lbs_pw_site/config", timeout: .seconds(10)) { ($0.json?["components"] as? [String: Any])?["stale"] != nil }
        let components = try #require(discovery.json?["components"] as? [String: [String: Any]])
        #expect(components["backup_reserve"]?["platform"] as? String == "number")
        #expect(components["grid_connected"]?["device_class"] as? String == "power")
        let health = try await client.waitForMessage(topic: "lbs/bridge/vendors/pw", timeout: .seconds(10)) { $0.json?["state"] as? String == "ok" }
        #expect(health.json?["breaker"] as? String == "closed")

        // The number entity's command: the bare value on /set/backup_reserve.
        try await client.publish("lbs/device/pw_site/set/backup_reserve", "20")
        let updated = try await client.waitForMessage(topic: "lbs/device/pw_site", timeout: .seconds(10)) { $0.json?["backup_reserve"] as? Double == 20 }
        #expect(updated.json?["grid_status"] as? String == "connected")
        #expect(simulator.counters.operationWrites == 1)
    }

    @Test func aRefusedWriteIsAnsweredVendorRejectedAndTheSiteStaysOnline() async throws {
        let (simulator, gateway) = try await start(writable: false)
        defer { Task { await gateway.stop(); await simulator.stop() } }
        let client = try await gateway.observer("lbs/device/pw_site", "lbs/device/pw_site/availability", "lbs/bridge/event")
        _ = try await client.waitForMessage(topic: "lbs/device/pw_site", timeout: .seconds(15))
        try await client.publish("lbs/device/pw_site/set", #"{"operation_mode":"backup"}"#)
        let failed = try await client.waitForMessage(topic: "lbs/bridge/event", timeout: .seconds(10)) { $0.text.contains("command_failed") }
        #expect(failed.text.contains("vendor_rejected") && failed.text.contains("installer"))
        let availability = try await client.waitForMessage(topic: "lbs/device/pw_site/availability", timeout: .seconds(5))
        #expect(availability.text.contains("online"))
    }
}
