#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import Logging
import Synchronization

/// How one vendor type enters the gateway. Each vendor folder declares one (a caseless enum), and the
/// gateway's `VendorRegistry` lists them: adding a vendor is its folder plus one line there.
public protocol VendorFactory: SendableMetatype {
    /// What `parse` makes of an entry, handed to `make`.
    associatedtype Options: Sendable

    /// The `type:` of its config entries (`demo`, `consciousness`, `powerwall` …).
    static var typeName: String { get }

    /// The defaults of the shared network keys (`url`, `timeout`, `poll_interval`, `tls` …) for a vendor reached
    /// over HTTP(S); nil for a vendor without a network endpoint (the demo). `lbs-gateway tls-pin` and the
    /// `tls: first_use` check read it.
    static var network: NetworkOptions.Defaults? { get }

    /// Reads an entry's options. Every problem goes to `reader` with its key path and a fix; nil when
    /// the entry cannot be used. Secrets come from files or `environment`, never from the entry.
    static func parse(_ settings: VendorSettings, reader: inout ConfigReader, environment: [String: String]) -> Options?

    /// Builds the vendor for a parsed entry. Runs before anything starts, so a throw stops the start.
    static func make(_ settings: VendorSettings, options: Options, sink: VendorEventSink, context: VendorContext) throws -> any Vendor

    /// State keys only this vendor reports, beyond the model's (`StateKeys`); registered by the gateway at start.
    static var stateKeys: [KeySpec] { get }

    /// Why an entry of this type cannot run without `storage:` (check-config says it); nil when it can.
    static var requiresStorage: String? { get }
}

extension VendorFactory {
    public static var stateKeys: [KeySpec] { [] }
    public static var requiresStorage: String? { nil }

    /// True when entries have a `url` and a `tls` policy.
    public static var isNetworkVendor: Bool { network != nil }
}

/// What the gateway hands every vendor it builds.
public struct VendorContext: Sendable {
    public var clock: any Clock<Duration>
    public var now: @Sendable () -> Date
    /// Where `tls: first_use` pins are kept (the SQLite cache); nil without `storage:` (pins then live in memory).
    public var pinStore: (any TLSPinStore)?
    /// The gateway's logger, for the few vendor events an operator must see (a key trusted on first use).
    public var logger: Logger
    /// Small values a vendor keeps across restarts (the SQLite cache); nil without `storage:`.
    public var valueStore: (any VendorValueStore)?

    public init(
        clock: any Clock<Duration> = ContinuousClock(), now: @escaping @Sendable () -> Date = { Date() },
        pinStore: (any TLSPinStore)? = nil, logger: Logger = Logger(label: "lbs-gateway.vendor"), valueStore: (any VendorValueStore)? = nil
    ) {
        self.clock = clock
        self.now = now
        self.pinStore = pinStore
        self.logger = logger
        self.valueStore = valueStore
    }
}

/// Where a vendor keeps a value across restarts, such as an id the vendor's cloud knows this install by.
public protocol VendorValueStore: Sendable {
    /// The value stored for the vendor instance under `key`; when there is none, `value` is stored and returned.
    func value(_ key: String, vendorID: String, storingIfAbsent value: String) async throws -> String
    /// The value stored under `key`, or nil.
    func storedValue(_ key: String, vendorID: String) async throws -> String?
    /// Stores `value` under `key`, replacing what was there.
    func store(_ value: String, key: String, vendorID: String) async throws
}

/// Values in memory only (lost on restart), for tests.
public final class InMemoryVendorValueStore: VendorValueStore {
    private let values = Mutex<[String: String]>([:])

    public init() {}

    public func value(_ key: String, vendorID: String, storingIfAbsent value: String) async throws -> String {
        values.withLock { values in
            if let existing = values["\(vendorID)/\(key)"] { return existing }
            values["\(vendorID)/\(key)"] = value
            return value
        }
    }

    public func storedValue(_ key: String, vendorID: String) async throws -> String? {
        values.withLock { $0["\(vendorID)/\(key)"] }
    }

    public func store(_ value: String, key: String, vendorID: String) async throws {
        values.withLock { $0["\(vendorID)/\(key)"] = value }
    }
}
