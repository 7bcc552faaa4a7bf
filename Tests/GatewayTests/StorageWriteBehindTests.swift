import Cache
import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayModel
import GatewayTesting
import Logging
import Testing

/// The cache's write-behind is bounded: while the writer is behind, batches merge (latest state per device
/// wins) and readings beyond the bound are dropped and counted; shutdown writes what waits.
@Suite struct StorageWriteBehindTests {
    @Test func aWriterThatFallsBehindHoldsOneStatePerDeviceAndBoundedReadings() async throws {
        let directory = try TemporaryDirectory()
        let store = try CacheStore(path: directory.file("gateway.sqlite"))
        let persistence = CacheLink(store: store, logger: Logger(label: "test"), maxPendingReadings: 1_000)
        // The writer is not running yet: everything waits, as when the disk is slow.
        for tick in 0..<500 {
            var batch = TelemetryBatch()
            for device in 0..<10 {
                batch.states.append(StoredState(deviceID: "demo_d\(device)", json: #"{"power":\#(tick)}"#, sourceTime: Double(tick), updatedAt: Double(tick)))
                batch.readings.append(Reading(deviceID: "demo_d\(device)", key: "power", time: Double(tick), value: Double(tick),
                                              kind: .measurement, category: .energy))
            }
            persistence.submit(batch)
        }
        #expect(persistence.pendingRows == 10 + 1_000, "one state per device plus the readings bound")
        #expect(persistence.droppedReadings == 4_000)

        let writer = Task { await persistence.run() }
        persistence.finish()
        await writer.value
        let states = try store.states()
        #expect(states.count == 10)
        #expect(states.allSatisfy { $0.json == #"{"power":499}"# }, "the latest state wins")
        #expect(persistence.pendingRows == 0)
    }

    @Test func aRemovalAfterAnUpsertWinsAndTakesTheStateWithIt() async throws {
        let directory = try TemporaryDirectory()
        let store = try CacheStore(path: directory.file("gateway.sqlite"))
        let persistence = CacheLink(store: store, logger: Logger(label: "test"))
        let device = Device(vendorID: "demo", vendorDeviceID: "gone", name: "Gone", type: .plug, keys: ["power"])
        var first = TelemetryBatch()
        first.upserts = [try #require(CacheLink.storedDevice(device, now: Date()))]
        first.states = [StoredState(deviceID: "demo_gone", json: "{}", sourceTime: nil, updatedAt: 0)]
        persistence.submit(first)
        var second = TelemetryBatch()
        second.removals = ["demo_gone"]
        persistence.submit(second)
        let writer = Task { await persistence.run() }
        persistence.finish()
        await writer.value
        #expect(try store.devices().isEmpty)
        #expect(try store.states().isEmpty)
    }
}
