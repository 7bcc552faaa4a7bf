import Cache
import VendorKit

/// Vendors' small lasting values in the SQLite cache (`vendor_value`), read and written on the cache's own threads (`CacheStore.run`).
package struct CacheVendorValueStore: VendorValueStore {
    package let store: CacheStore

    package init(store: CacheStore) {
        self.store = store
    }

    package func value(_ key: String, vendorID: String, storingIfAbsent value: String) async throws -> String {
        try await store.run { try $0.vendorValue(key, vendorID: vendorID, storingIfAbsent: value) }
    }

    package func storedValue(_ key: String, vendorID: String) async throws -> String? {
        try await store.runReading { try $0.storedValue(key, vendorID: vendorID) }
    }

    package func store(_ value: String, key: String, vendorID: String) async throws {
        try await store.run { try $0.storeValue(value, key: key, vendorID: vendorID) }
    }
}
