import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayTesting
import MQTT
import TestTraits
import Testing

/// Energy counters continue across a restart: Home Assistant must never see a `total_increasing`
/// value lower than the one before (it would log "not strictly increasing" and record a negative change).
@Suite(.integration) struct CountersAcrossRestartTests {
    static let counters = ["solar_energy", "grid_import_energy", "grid_export_energy", "battery_charge_energy",
                           "battery_discharge_energy", "home_energy"]

    @Test func demoCountersNeverGoBackwardsAcrossARestartWithTheCache() async throws {
        let broker = try await MosquittoBroker.started()
        let directory = try TemporaryDirectory()
        let vendors = "  - {type: demo, id: demo, poll_interval: 0.2}"
        let first = try await GatewayHarness.start(broker: broker, directory: directory, vendors: vendors, storage: true)
        let watcher = try await first.observer("lbs/device/demo_energy")
        try await waitUntil("a few readings", timeout: .seconds(10)) { watcher.messages(on: "lbs/device/demo_energy").count >= 4 }
        await first.stop()
        let last = try #require(watcher.messages(on: "lbs/device/demo_energy").last?.json)
        await watcher.shutdown()

        let second = try await GatewayHarness.start(broker: broker, directory: directory, vendors: vendors, storage: true)
        defer { Task { await second.stop() } }
        let client = try await second.observer("lbs/device/demo_energy")
        try await waitUntil("readings after the restart", timeout: .seconds(10)) {
            client.messages(on: "lbs/device/demo_energy").filter { $0.json?["stale"] == nil }.count >= 4
        }
        for message in client.messages(on: "lbs/device/demo_energy") {
            for key in Self.counters {
                guard let before = last[key] as? Double, let after = message.json?[key] as? Double else { continue }
                #expect(after >= before, "\(key) went from \(before) to \(after) across the restart")
            }
        }
        await client.shutdown()
    }
}
