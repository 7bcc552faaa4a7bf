import Cache
import Foundation
import GatewayTesting
import Synchronization
import Testing

/// Simulates a power cut: the database and WAL files are copied while writes are in progress.
///
/// With automatic checkpoints off, SQLite only appends to the WAL during the run, so copying the
/// database file and then the WAL yields what a disk could hold at a power cut (a WAL prefix, maybe
/// with a torn last frame). Every command whose `enqueue` returned before the copy must be in it.
@Suite("Durability")
struct DurabilityTests {
    @Test func snapshotTakenMidWriteIsConsistentAndKeepsConfirmedCommands() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("gateway.sqlite").path
            var options = CacheStore.Options()
            options.walAutoCheckpointPages = 0
            let store = try CacheStore(path: path, options: options)
            defer { try? store.close() }

            let shared = SharedProgress()
            let readingsLoop = Task.detached {
                // Bounded in count: with checkpoints off the WAL keeps every written page.
                var round = 0.0
                while !shared.stop.load(ordering: .relaxed), round < 300 {
                    let batch = (0..<500).map {
                        Reading(deviceID: "dev-\($0 % 100)", key: "power_w", time: baseHour + round * 20 + Double($0 / 100), value: Double($0))
                    }
                    // `run` keeps these blocking writes off the cooperative threads the test needs.
                    _ = try? await store.run { try $0.appendReadings(batch) }
                    shared.readingBatches.add(1, ordering: .relaxed)
                    round += 1
                }
            }
            let outboxLoop = Task.detached {
                var index = 0
                while !shared.stop.load(ordering: .relaxed), index < 400 {
                    let id = "cmd-\(index)"
                    let entry = OutboxEntry(id: id, vendorID: "hue", deviceID: "lamp", json: #"{"on":true}"#, createdAt: baseHour, expiresAt: nil)
                    if (try? await store.run { try $0.enqueue(entry) }) == true {
                        shared.confirmed.withLock { $0.append(id) }
                    }
                    index += 1
                }
            }

            for snapshot in 0..<3 {
                let target = (snapshot + 1) * 30
                try await waitUntil("\(target) confirmed commands", timeout: .seconds(60)) { shared.confirmed.withLock { $0.count } >= target }
                let confirmedBefore = shared.confirmed.withLock { $0 }
                // The cut must fall while readings are still being written.
                #expect(shared.readingBatches.load(ordering: .relaxed) < 300)
                let copyDirectory = directory.appendingPathComponent("snapshot-\(snapshot)", isDirectory: true)
                try FileManager.default.createDirectory(at: copyDirectory, withIntermediateDirectories: true)
                let copyPath = copyDirectory.appendingPathComponent("gateway.sqlite").path
                // Database file first, then the WAL: the order a disk holds them in at a cut.
                try Data(contentsOf: URL(fileURLWithPath: path)).write(to: URL(fileURLWithPath: copyPath))
                try Data(contentsOf: URL(fileURLWithPath: path + "-wal")).write(to: URL(fileURLWithPath: copyPath + "-wal"))

                let copy = try CacheStore(path: copyPath)
                #expect(try copy.integrityCheck() == "ok")
                let present = Set(try copy.pending().map(\.id))
                let missing = confirmedBefore.filter { !present.contains($0) }
                #expect(missing.isEmpty, "confirmed commands missing after the cut: \(missing.prefix(5))")
                try copy.close()
            }

            shared.stop.store(true, ordering: .relaxed)
            await readingsLoop.value
            await outboxLoop.value
            #expect(try store.integrityCheck() == "ok")
        }
    }
}

/// State shared between the writer tasks and the test body.
private final class SharedProgress: Sendable {
    /// Ids whose `enqueue` returned true.
    let confirmed = Mutex<[String]>([])
    let stop = Atomic<Bool>(false)
    /// Reading batches committed so far.
    let readingBatches = Atomic<Int>(0)
}
