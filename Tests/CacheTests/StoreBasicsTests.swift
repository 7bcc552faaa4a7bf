import Cache
import Foundation
import Testing

@Suite("CacheStore basics")
struct StoreBasicsTests {
    @Test func migrationsCreateEveryTableAndReopenKeepsData() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("gateway.sqlite").path
            let store = try CacheStore(path: path)
            #expect(try store.tableNames() == [
                "alert", "device", "device_state", "outbox", "outbox_journal", "reading", "reading_hourly", "scene", "series", "tls_pin", "vendor_health", "vendor_value",
            ])
            #expect(try store.appliedMigrations() == ["v1", "v2", "v3", "v4", "v5"])
            try store.upsertDevices([StoredDevice(id: "d1", vendorID: "v", json: "{}", updatedAt: 1)])
            #expect(try store.vendorValue("device_id", vendorID: "sense", storingIfAbsent: "first") == "first")
            try store.close()

            // Re-running the migrator on an existing file changes nothing and keeps the data.
            let reopened = try CacheStore(path: path)
            defer { try? reopened.close() }
            #expect(try reopened.appliedMigrations() == ["v1", "v2", "v3", "v4", "v5"])
            #expect(try reopened.devices().map(\.id) == ["d1"])
            #expect(try reopened.vendorValue("device_id", vendorID: "sense", storingIfAbsent: "second") == "first", "kept, never replaced")
            #expect(try reopened.vendorValue("device_id", vendorID: "sense2", storingIfAbsent: "other") == "other")
            #expect(throws: CacheError.self) { try reopened.vendorValue("", vendorID: "sense", storingIfAbsent: "x") }
            #expect(try reopened.integrityCheck() == "ok")
        }
    }

    @Test func writerRunsWALWithSynchronousFull() async throws {
        try await withStore { store, _ throws in
            #expect(try store.journalMode() == "wal")
            // GRDB sets NORMAL while enabling WAL; the store must have put FULL (2) back.
            #expect(try store.synchronousMode() == 2)
        }
    }

    @Test func telemetryIsOneTransactionAndTheOutboxStaysFullySynchronous() async throws {
        try await withStore { store, _ in
            try store.upsertDevices([StoredDevice(id: "old", vendorID: "v", json: "{}", updatedAt: 1)])
            var batch = TelemetryBatch()
            batch.removals = ["old"]
            batch.upserts = [StoredDevice(id: "a", vendorID: "v", json: #"{"name":"A"}"#, updatedAt: 2)]
            batch.states = [StoredState(deviceID: "a", json: #"{"power":5}"#, sourceTime: 2, updatedAt: 2)]
            batch.readings = [Reading(deviceID: "a", key: "power", time: 2, value: 5), Reading(deviceID: "a", key: "power", time: 3, value: .nan)]
            batch.health = [(vendorID: "v", json: #"{"state":"ok"}"#)]
            let before = store.committedTransactions
            try store.writeTelemetry(batch)
            #expect(store.committedTransactions == before + 1, "one commit for the whole batch")
            #expect(try store.devices().map(\.id) == ["a"])
            #expect(try store.states().map(\.json) == [#"{"power":5}"#])
            #expect(try store.history(deviceID: "a", key: "power", from: 0, to: 10, resolution: .raw).map(\.last) == [5])
            #expect(try store.vendorHealth() == ["v": #"{"state":"ok"}"#])
            // The relaxed durability was for that transaction only: the next outbox commit waits for the disk.
            #expect(try store.synchronousMode() == 2)
        }
    }

    @Test func deviceRegistryRoundTripAndRemoval() async throws {
        try await withStore { store, _ in
            try store.upsertDevices([
                StoredDevice(id: "b", vendorID: "hue", json: #"{"name":"B"}"#, updatedAt: 10),
                StoredDevice(id: "a", vendorID: "tesla", json: #"{"name":"A"}"#, updatedAt: 11),
            ])
            try store.upsertDevices([StoredDevice(id: "b", vendorID: "hue", json: #"{"name":"B2"}"#, updatedAt: 12)])
            #expect(try store.devices() == [
                StoredDevice(id: "a", vendorID: "tesla", json: #"{"name":"A"}"#, updatedAt: 11),
                StoredDevice(id: "b", vendorID: "hue", json: #"{"name":"B2"}"#, updatedAt: 12),
            ])
            #expect(try store.devices(vendorID: "hue").map(\.id) == ["b"])

            try store.saveStates([StoredState(deviceID: "b", json: "{}", sourceTime: nil, updatedAt: 1)])
            #expect(try store.removeDevices(ids: ["b", "ghost"]) == 1)
            #expect(try store.devices().map(\.id) == ["a"])
            #expect(try store.states().isEmpty)
        }
    }

    @Test func latestStatesUpsertInOneBatch() async throws {
        try await withStore { store, _ in
            let states = (0..<500).map {
                StoredState(deviceID: "dev-\($0)", json: #"{"on":true}"#, sourceTime: Double($0), updatedAt: 100)
            }
            try store.saveStates(states)
            try store.saveStates([StoredState(deviceID: "dev-7", json: #"{"on":false}"#, sourceTime: nil, updatedAt: 200)])
            let stored = try store.states()
            #expect(stored.count == 500)
            #expect(stored.first { $0.deviceID == "dev-7" } == StoredState(
                deviceID: "dev-7", json: #"{"on":false}"#, sourceTime: nil, updatedAt: 200))
            #expect(stored.first { $0.deviceID == "dev-8" }?.sourceTime == 8)
        }
    }

    @Test func vendorHealthAndTLSPins() async throws {
        try await withStore { store, _ in
            try store.saveVendorHealth(vendorID: "hue", json: #"{"breaker":"closed"}"#)
            try store.saveVendorHealth(vendorID: "hue", json: #"{"breaker":"open"}"#)
            try store.saveVendorHealth(vendorID: "tesla", json: #"{"breaker":"closed"}"#)
            #expect(try store.vendorHealth() == ["hue": #"{"breaker":"open"}"#, "tesla": #"{"breaker":"closed"}"#])

            #expect(try store.pin(for: "10.0.0.5:443") == nil)
            try store.savePin(hostPort: "10.0.0.5:443", spki: "abc123")
            #expect(try store.pin(for: "10.0.0.5:443") == "abc123")
            #expect(throws: CacheError.self) { try store.savePin(hostPort: "", spki: "x") }
        }
    }

    @Test func badInputAndClosedStoreBecomeTypedErrors() async throws {
        try await withTemporaryDirectory { directory in
            let missing = directory.appendingPathComponent("no/such/dir/gateway.sqlite").path
            let openError = #expect(throws: CacheError.self) { try CacheStore(path: missing) }
            #expect(openError?.code == .openFailed)

            let garbage = directory.appendingPathComponent("garbage.sqlite")
            try Data(repeating: 0x5A, count: 8192).write(to: garbage)
            let garbageError = #expect(throws: CacheError.self) { try CacheStore(path: garbage.path) }
            #expect(garbageError?.code == .openFailed)

            let store = try CacheStore(path: directory.appendingPathComponent("gateway.sqlite").path)
            let rangeError = #expect(throws: CacheError.self) {
                try store.history(deviceID: "d", key: "k", from: .nan, to: 1, resolution: .raw)
            }
            #expect(rangeError?.code == .invalidInput)
            try store.close()
            let closedError = #expect(throws: CacheError.self) { try store.devices() }
            #expect(closedError?.code == .closed)
        }
    }
}

/// `run` and `runReading` go through GRDB's async API: store calls inside them share the access's connection,
/// each keeps its own transaction, a read-only access refuses writes, and a cancelled caller's write still lands.
@Suite("CacheStore async access")
struct StoreAsyncAccessTests {
    @Test func callsInsideOneAccessShareItsConnection() async throws {
        try await withStore { store, _ in
            let commitsBefore = store.committedTransactions
            let (first, second, read) = try await store.run { store in
                (try store.vendorValue("k", vendorID: "v", storingIfAbsent: "a"),
                 try store.vendorValue("k", vendorID: "v", storingIfAbsent: "b"),
                 try store.storedValue("k", vendorID: "v"))
            }
            #expect(first == "a" && second == "a" && read == "a")
            #expect(store.committedTransactions - commitsBefore == 2, "each store call inside keeps its own transaction")
            #expect(try await store.runReading { try $0.storedValue("k", vendorID: "v") } == "a")
            await #expect(throws: CacheError.self, "a reader connection cannot write") {
                try await store.runReading { try $0.storeValue("x", key: "k", vendorID: "v") }
            }
            #expect(try store.storedValue("k", vendorID: "v") == "a")
        }
    }

    @Test func aCancelledCallerStillCompletesItsWrite() async throws {
        try await withStore { store, _ in
            let task = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                try await store.run { try $0.storeValue("written", key: "k", vendorID: "v") }
            }
            try await task.value
            #expect(try store.storedValue("k", vendorID: "v") == "written")
        }
    }
}
