import Cache
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import VendorKit

/// What `lbs-gateway tls-pin` does: show a network vendor's stored (or configured) pin next to the key its
/// server presents now, and forget a stored first-use pin so the gateway pins the next key it sees.
public enum TLSPinTool {
    /// A readable failure (unknown vendor, no storage, unreadable cache).
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

    /// The state of one vendor's pin.
    public struct Report: Sendable {
        public var vendorID: String
        public var url: String
        /// The key pins are stored under, e.g. `192.168.1.20:8443`.
        public var hostPort: String
        /// `system`, `first_use` or `pin sha256//…`.
        public var policy: String
        /// The pin in force: the stored first-use pin, or the configured one; nil when there is none.
        public var pinned: String?
        /// The key the server presents now, if it could be reached.
        public var presented: String?
        /// Why the presented key could not be read.
        public var presentedError: String?
        /// The report as the command prints it.
        public var lines: [String]
    }

    /// Reads the pin of `vendorID` (from the cache for `tls: first_use`) and the key its server presents now.
    public static func inspect(config: GatewayConfig, vendors: VendorCatalog, vendorID: String, connectTimeout: Duration = .seconds(5)) async throws(Failure) -> Report {
        let (settings, url, policy, hostPort) = try endpoint(config, vendors, vendorID)
        var pinned: String?
        var pinLine: String
        switch policy {
        case .system:
            pinLine = "pin:           none (tls: system checks the certificate against the CA store)"
        case .pinned(let pin):
            pinned = pin
            pinLine = "pinned:        \(TLSPolicy.curlForm(pin)) (tls.pin in the config)"
        case .firstUse:
            pinned = try await storedPin(config, hostPort: hostPort)
            pinLine = "stored pin:    " + (pinned.map(TLSPolicy.curlForm) ?? "none (the gateway pins the key it sees on its next connection)")
        }
        var presented: String?
        var presentedError: String?
        if TLSTrustResolver.isHTTPS(url) {
            do {
                presented = try await TLSTrustResolver.presentedPin(url: url, vendorID: settings.id, connectTimeout: connectTimeout)
            } catch {
                presentedError = "\(error.code.rawValue): \(error.message)"
            }
        } else {
            presentedError = "\(url) is plain http: there is no certificate"
        }
        let verdict: String
        switch (pinned, presented) {
        case (let pin?, let key?) where pin == key:
            verdict = "the presented key matches the pin"
        case (_?, _?) where policy == .firstUse:
            verdict = "the presented key DIFFERS from the stored pin: verify the device, then run with --forget to accept its new key"
        case (_?, _?):
            verdict = "the presented key DIFFERS from tls.pin: verify the device, then put the presented pin into tls.pin"
        case (nil, let key?) where policy == .system:
            verdict = "to pin this key instead of using the CA store, set tls: {pin: \"\(key)\"}"
        case (nil, _?):
            verdict = "no pin yet: the gateway trusts the key it sees on its next connection"
        case (_, nil):
            verdict = "the server could not be reached; the pin is unchanged"
        }
        let lines = [
            "vendor:        \(settings.id) (\(ConfigReader.redactURL(url)))",
            "tls:           \(policy)",
            "endpoint:      \(hostPort)",
            pinLine,
            "presented:     " + (presented.map(TLSPolicy.curlForm) ?? "unavailable (\(presentedError ?? "unknown error"))"),
            "verdict:       \(verdict)",
        ]
        return Report(
            vendorID: settings.id, url: url, hostPort: hostPort, policy: policy.description, pinned: pinned,
            presented: presented, presentedError: presentedError, lines: lines
        )
    }

    /// Deletes the stored first-use pin of `vendorID`'s endpoint; returns the removed pin (nil: none was stored).
    /// The running gateway re-reads the cache after a key mismatch, so it pins the new key on its next attempt.
    public static func forget(config: GatewayConfig, vendors: VendorCatalog, vendorID: String) async throws(Failure) -> String? {
        let (_, _, _, hostPort) = try endpoint(config, vendors, vendorID)
        guard let storage = config.storage else {
            throw Failure(message: "storage is not configured, so no pin is stored (tls: first_use needs storage.path)")
        }
        return try await withExistingCache(storage.path, "update") { try $0.deletePin(hostPort: hostPort) } ?? nil
    }

    private static func endpoint(
        _ config: GatewayConfig, _ catalog: VendorCatalog, _ vendorID: String
    ) throws(Failure) -> (VendorSettings, String, TLSPolicy, String) {
        let network = config.vendors.filter { catalog.networkTypes.contains($0.type) }
        guard let settings = network.first(where: { $0.id == vendorID }) else {
            let known = network.map(\.id)
            throw Failure(message: "no network vendor with id '\(vendorID)' in the config"
                + (known.isEmpty ? "" : " (network vendors: \(known.joined(separator: ", ")))"))
        }
        guard let (url, policy) = catalog.tlsEndpoint(settings), let hostPort = TLSTrustResolver.hostPort(of: url) else {
            throw Failure(message: "vendor '\(vendorID)' has no usable url and tls settings; run check-config")
        }
        return (settings, url, policy, hostPort)
    }

    private static func storedPin(_ config: GatewayConfig, hostPort: String) async throws(Failure) -> String? {
        guard let storage = config.storage else { return nil }
        return try await withExistingCache(storage.path, "read") { try $0.pin(for: hostPort) } ?? nil
    }

    /// Runs `body` on the cache at `path`; nil when there is no cache file. Never creates one from here:
    /// a file made by another user could lock the gateway out of it.
    private static func withExistingCache<T: Sendable>(
        _ path: String, _ verb: String, _ body: @escaping @Sendable (CacheStore) throws -> T
    ) async throws(Failure) -> T? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        do {
            let store = try CacheStore(path: path)
            defer { try? store.close() }
            return try await store.run(body)
        } catch {
            throw Failure(message: "cannot \(verb) the cache at \(path): \(error)")
        }
    }
}
