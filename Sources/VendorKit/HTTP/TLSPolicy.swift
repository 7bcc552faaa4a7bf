#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

/// How a network vendor checks its server's TLS identity: the `tls` key of its config entry.
public enum TLSPolicy: Sendable, Hashable, CustomStringConvertible {
    /// Full verification against the system CA store (cloud APIs); the default.
    case system
    /// Trust on first use: pin the key the server presents on the first connection, refuse any other later.
    case firstUse
    /// Accept only the key with this SubjectPublicKeyInfo SHA-256 (base64), given by the operator.
    case pinned(String)

    public var description: String {
        switch self {
        case .system: "system"
        case .firstUse: "first_use"
        case .pinned(let pin): "pin \(TLSPolicy.curlForm(pin))"
        }
    }

    /// The canonical base64 SPKI SHA-256 in `text` (bare or in curl's `sha256//` form);
    /// nil unless it is base64 of exactly 32 bytes.
    public static func normalizedPin(_ text: String) -> String? {
        var pin = Substring(text)
        while pin.first?.isWhitespace == true { pin.removeFirst() }
        while pin.last?.isWhitespace == true { pin.removeLast() }
        if pin.lowercased().hasPrefix("sha256//") { pin = pin.dropFirst("sha256//".count) }
        guard let digest = Data(base64Encoded: String(pin)), digest.count == 32 else { return nil }
        return digest.base64EncodedString()
    }

    /// `sha256//<base64>`, the form curl and `lbs-gateway tls-pin` print.
    public static func curlForm(_ pin: String) -> String { "sha256//\(pin)" }
}

/// Where trust-on-first-use pins are kept, by `host:port`. The gateway backs it with its SQLite cache.
public protocol TLSPinStore: Sendable {
    /// The pin stored for `hostPort`, if any.
    func pin(for hostPort: String) async throws -> String?
    /// Stores `pin` for `hostPort` unless a pin is stored already; returns the pin in force afterwards.
    /// A stored pin is never replaced here: only the operator removes one (`lbs-gateway tls-pin --forget`).
    func savePinIfAbsent(_ pin: String, for hostPort: String) async throws -> String
}

/// Pins in memory only (lost on restart): for a vendor used without the gateway's cache, and for tests.
public final class InMemoryTLSPinStore: TLSPinStore {
    private let pins: Mutex<[String: String]>

    /// Creates a store holding `pins` (by `host:port`).
    public init(_ pins: [String: String] = [:]) {
        self.pins = Mutex(pins)
    }

    public func pin(for hostPort: String) async throws -> String? {
        pins.withLock { $0[hostPort] }
    }

    public func savePinIfAbsent(_ pin: String, for hostPort: String) async throws -> String {
        pins.withLock { pins in
            if let existing = pins[hostPort] { return existing }
            pins[hostPort] = pin
            return pin
        }
    }

    /// Removes the pin of `hostPort` (the operator accepted a new key); returns the one removed.
    @discardableResult
    public func forgetPin(for hostPort: String) -> String? {
        pins.withLock { $0.removeValue(forKey: hostPort) }
    }

    /// Every stored pin, by `host:port`.
    public var all: [String: String] { pins.withLock { $0 } }
}
