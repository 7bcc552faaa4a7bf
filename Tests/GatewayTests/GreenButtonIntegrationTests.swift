import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayTesting
import MQTT
import TestTraits
import Testing

/// `type: green_button` through the gateway: the usage point's counters on MQTT, Energy-dashboard discovery,
/// and the interval readings in the history at the file's own times (2026-11-01), not at the time read.
@Suite(.integration, .timeLimit(.minutes(2))) struct GreenButtonIntegrationTests {
    @Test func intervalReadingsLandInTheHistoryAtTheirOwnTimes() async throws {
        let directory = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.file("exports"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: Fixtures.path("green_button", "electricity_hourly.xml"), toPath: directory.file("exports/nov.xml"))
        let gateway = try await GatewayHarness.start(directory: directory, vendors: "  - {type: green_button, id: utility, path: exports}", storage: true)
        defer { Task { await gateway.stop() } }
        let client = try await gateway.observer("lbs/device/utility_1", "homeassistant/device/lbs_utility_1/config", "lbs/bridge/response/#")

        let state = try await client.waitForMessage(topic: "lbs/device/utility_1", timeout: .seconds(15))
        #expect(state.json?["grid_import_energy"] as? Double == 13.106)
        #expect(state.json?["last_seen"] as? String == "2026-11-02T00:00:00.000Z", "as of the file's last interval")
        let discovery = try await client.waitForMessage(topic: "homeassistant/device/lbs_utility_1/config", timeout: .seconds(10)) {
            ($0.json?["components"] as? [String: Any])?["stale"] != nil
        }
        let counter = (discovery.json?["components"] as? [String: [String: Any]])?["grid_export_energy"]
        #expect(counter?["state_class"] as? String == "total_increasing" && counter?["device_class"] as? String == "energy")

        var points: [[String: Any]] = []
        var attempt = 0
        // Asked until the write-behind has landed (within a second or so).
        try await waitUntil("24 hourly points", timeout: .seconds(20)) {
            attempt += 1
            let tag = attempt
            let request = #"{"device":"utility_1","key":"grid_import_energy","from":"2026-11-01T00:00:00Z","to":"2026-11-02T01:00:00Z","resolution":"hourly","transaction":"gb\#(tag)"}"#
            try await client.publish("lbs/bridge/request/history", request)
            let answer = try await client.waitForMessage(topic: "lbs/bridge/response/history", timeout: .seconds(5)) { $0.text.contains("\"gb\(tag)\"") }
            points = ((answer.json?["data"] as? [String: Any])?["points"] as? [[String: Any]]) ?? []
            return points.count >= 24
        }
        #expect(points.count == 24, "one hour per interval of the file")
        #expect(points.first?["time"] as? String == "2026-11-01T01:00:00.000Z")
        #expect(points.last?["last"] as? Double == 13.106)
        await client.shutdown()
    }
}
