import Cache
import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayTesting
import TestTraits
import Testing

@Suite(.integration, .timeLimit(.minutes(1))) struct RetentionIntegrationTests {
    /// Readings three days old survive the default 7-day raw window, so seeing them rolled up
    /// proves the gateway runs retention with the configured `raw_days: 1`.
    @Test func theGatewayRollsUpRawReadingsPastTheConfiguredWindow() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("gateway.sqlite")
        let hour = (Date().timeIntervalSince1970 / 3600).rounded(.down) * 3600 - 3 * 86_400
        do {
            let store = try CacheStore(path: path)
            let readings = (0..<12).map {
                Reading(deviceID: "sensor_x", key: "co2", time: hour + Double($0) * 300, value: 400 + Double($0), category: .environment)
            }
            _ = try store.appendReadings(readings)
            try store.close()
        }
        let gateway = try await GatewayHarness.start(directory: directory, yaml: """
            storage:
              path: \(path)
              retention: {raw_days: 1, interval: 1}
            """)
        defer { Task { await gateway.stop() } }

        let reader = try CacheStore(path: path)
        defer { try? reader.close() }
        try await waitUntil("the raw readings are rolled up", timeout: .seconds(20)) {
            try reader.history(deviceID: "sensor_x", key: "co2", from: hour - 1, to: hour + 3600, resolution: .raw).isEmpty
        }
        let hourly = try reader.history(deviceID: "sensor_x", key: "co2", from: hour - 1, to: hour + 3600, resolution: .hourly)
        #expect(hourly.count == 1)
        #expect(hourly.first?.count == 12)
        #expect(hourly.first?.min == 400 && hourly.first?.max == 411 && hourly.first?.last == 411)
    }
}
