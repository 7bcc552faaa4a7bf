import Cache
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The cache holds vendor health and command payloads, so only the gateway's user may read it.
@Suite struct FilePermissionTests {
    static func mode(_ path: String) -> mode_t? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return info.st_mode & 0o777
    }

    @Test func databaseAndItsWALFilesAre0600() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("gateway.sqlite").path
            // A permissive umask must not matter.
            let old = umask(0o022)
            defer { umask(old) }
            let store = try CacheStore(path: path)
            defer { try? store.close() }
            try store.saveVendorHealth(vendorID: "v", json: "{\"state\":\"ok\"}")
            #expect(Self.mode(path) == 0o600)
            for suffix in ["-wal", "-shm"] where FileManager.default.fileExists(atPath: path + suffix) {
                #expect(Self.mode(path + suffix) == 0o600, "\(suffix)")
            }
        }
    }

    @Test func anExistingReadableDatabaseIsNarrowed() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("gateway.sqlite").path
            do {
                let store = try CacheStore(path: path)
                try store.close()
            }
            _ = chmod(path, 0o644)
            let store = try CacheStore(path: path)
            defer { try? store.close() }
            #expect(Self.mode(path) == 0o600)
        }
    }
}
