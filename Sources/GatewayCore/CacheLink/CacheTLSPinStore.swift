import Cache
import VendorKit

/// Trust-on-first-use pins in the SQLite cache (`tls_pin`, by `host:port`), so they survive restarts.
/// SQLite work runs on the cache's own threads (`CacheStore.run`), not on the cooperative pool.
package struct CacheTLSPinStore: TLSPinStore {
    package let store: CacheStore

    package func pin(for hostPort: String) async throws -> String? {
        try await store.runReading { try $0.pin(for: hostPort) }
    }

    package func savePinIfAbsent(_ pin: String, for hostPort: String) async throws -> String {
        // Read and write on the writer in one access: a pin already stored (by an earlier run) is kept, never replaced.
        try await store.run { store in
            if let existing = try store.pin(for: hostPort) { return existing }
            try store.savePin(hostPort: hostPort, spki: pin)
            return pin
        }
    }
}
