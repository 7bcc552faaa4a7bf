import Cache
import Foundation
import Synchronization

/// A fresh directory under the system temp dir, removed after `body`.
func withTemporaryDirectory<T>(_ body: (URL) async throws -> T) async throws -> T {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("lbs-cache-tests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    return try await body(directory)
}

/// Opens a store in a fresh temp dir, hands it to `body`, then closes it.
func withStore<T>(
    clock: TestClock = TestClock(), options: CacheStore.Options = CacheStore.Options(),
    _ body: (CacheStore, URL) async throws -> T
) async throws -> T {
    try await withTemporaryDirectory { directory in
        var options = options
        options.clock = { clock.now }
        let store = try CacheStore(path: directory.appendingPathComponent("gateway.sqlite").path, options: options)
        defer { try? store.close() }
        return try await body(store, directory)
    }
}

/// A settable clock for the store's `updated_at` stamps.
final class TestClock: Sendable {
    private let time: Mutex<Double>

    init(_ start: Double = 1_700_000_000) { time = Mutex(start) }

    var now: Double { time.withLock { $0 } }

    func set(_ value: Double) { time.withLock { $0 = value } }
}

let hour = 3600.0
let day = 86_400.0
/// An hour boundary used as the start of test data.
let baseHour = 1_699_999_200.0
