import CurlHTTP
import GatewayModel
import Logging
import Resilience
import Synchronization

/// Turns a vendor's `TLSPolicy` into the `TLSTrust` of each request.
///
/// For `first_use` the pin of a `host:port` is loaded from the pin store before the first request; when there
/// is none, the server's key is fetched once (`HTTPClient.fetchPublicKeyPin`), stored, and logged at notice level.
/// Every request then carries that pin, so a changed key fails with `tls_pin_mismatch` and nothing from the
/// server is accepted. A stored pin is never replaced here; after a mismatch the pin is re-read from the store,
/// so an operator's `lbs-gateway tls-pin --forget` takes effect on the next attempt without a restart.
public final class TLSTrustResolver: Sendable {
    private typealias Lookup = Task<Result<String, GatewayError>, Never>

    private struct State {
        /// Pins in force, by `host:port`.
        var pins: [String: String] = [:]
        /// Running lookups, shared by concurrent requests to one endpoint.
        var lookups: [String: Lookup] = [:]
        /// Endpoints whose mismatch was logged (once per mismatch streak).
        var mismatchLogged: Set<String> = []
    }

    /// The configured policy.
    public let policy: TLSPolicy
    private let vendorID: String
    private let store: any TLSPinStore
    private let client: HTTPClient
    private let classifier: ErrorClassifier
    private let logger: Logger
    private let state = Mutex(State())

    /// Creates a resolver; `store` keeps first-use pins (the gateway passes its SQLite cache).
    public init(
        vendorID: String, policy: TLSPolicy, store: any TLSPinStore, client: HTTPClient, classifier: ErrorClassifier, logger: Logger
    ) {
        self.vendorID = vendorID
        self.policy = policy
        self.store = store
        self.client = client
        self.classifier = classifier
        self.logger = logger
    }

    /// The trust for a request to `url`. Fetch failures are classified like any transport failure.
    public func trust(for url: String, connectTimeout: Duration) async throws(GatewayError) -> TLSTrust {
        // Plain http has no certificate (the config refuses a pin or first_use with an http:// url).
        guard Self.isHTTPS(url) else { return .systemDefault }
        switch policy {
        case .system:
            return .systemDefault
        case .pinned(let pin):
            return .pinned(spkiSHA256Base64: pin)
        case .firstUse:
            guard let hostPort = Self.hostPort(of: url) else { return .systemDefault }
            return .pinned(spkiSHA256Base64: try await pin(for: hostPort, url: url, connectTimeout: connectTimeout))
        }
    }

    /// The server at `url` presented a key that does not match: forget the in-memory pin so the next attempt
    /// re-reads the store, and tell the operator once.
    public func recordMismatch(url: String) {
        guard let hostPort = Self.hostPort(of: url) else { return }
        let (firstReport, forgotten) = state.withLock { state in
            (state.mismatchLogged.insert(hostPort).inserted, policy == .firstUse ? state.pins.removeValue(forKey: hostPort) : nil)
        }
        guard firstReport else { return }
        var pinned = ""
        if case .pinned(let pin) = policy { pinned = " (configured pin \(TLSPolicy.curlForm(pin)))" }
        if let forgotten { pinned = " (stored pin \(TLSPolicy.curlForm(forgotten)))" }
        logger.warning(
            "vendor \(vendorID): \(hostPort) presented a TLS key that does not match the pinned one\(pinned); nothing from it is accepted. \(mismatchAdvice)"
        )
    }

    /// A request to `url` succeeded: a later mismatch is news again.
    public func recordSuccess(url: String) {
        guard policy != .system, let hostPort = Self.hostPort(of: url) else { return }
        state.withLock { state in
            if !state.mismatchLogged.isEmpty { state.mismatchLogged.remove(hostPort) }
        }
    }

    /// What the operator can do about a `tls_pin_mismatch` (or a `tls_error` under system trust).
    public var mismatchAdvice: String {
        switch policy {
        case .firstUse:
            "The server's key changed since it was first trusted. Verify the device; to accept its new key run "
                + "'lbs-gateway tls-pin --vendor \(vendorID) --forget'."
        case .pinned:
            "Verify the device, then update tls.pin of vendor '\(vendorID)' ('lbs-gateway tls-pin --vendor \(vendorID)' shows the key it presents)."
        case .system:
            "Check the system time and the CA bundle on the gateway. If the vendor is a local device with a self-signed "
                + "certificate, set tls: first_use (or tls: {pin: …}) for vendor '\(vendorID)'."
        }
    }

    // MARK: First use

    private func pin(for hostPort: String, url: String, connectTimeout: Duration) async throws(GatewayError) -> String {
        let (known, lookup): (String?, Lookup?) = state.withLock { state in
            if let pin = state.pins[hostPort] { return (pin, nil) }
            if let running = state.lookups[hostPort] { return (nil, running) }
            // The task cannot finish before this closure releases the lock, so it is registered first.
            let task = Lookup { await self.load(hostPort: hostPort, url: url, connectTimeout: connectTimeout) }
            state.lookups[hostPort] = task
            return (nil, task)
        }
        if let known { return known }
        guard let lookup else { throw GatewayError.internal("no TLS pin lookup for \(hostPort)") }
        // Cancelling a waiter (shutdown) cancels the fetch, so it never holds shutdown up for a connect timeout.
        let result = await withTaskCancellationHandler { await lookup.value } onCancel: { lookup.cancel() }
        state.withLock { state in
            guard state.lookups[hostPort] == lookup else { return }
            state.lookups.removeValue(forKey: hostPort)
            // A failed lookup is not remembered: the next attempt tries again.
            if case .success(let pin) = result { state.pins[hostPort] = pin }
        }
        return try result.get()
    }

    private func load(hostPort: String, url: String, connectTimeout: Duration) async -> Result<String, GatewayError> {
        do {
            if let stored = try await store.pin(for: hostPort) { return .success(stored) }
        } catch {
            return .failure(.internal("cannot read the TLS pin of \(hostPort) from the cache: \(error)"))
        }
        let presented: String
        do {
            presented = try await client.fetchPublicKeyPin(url: url, connectTimeout: connectTimeout)
        } catch {
            return .failure(classifier.classify(VendorHTTP.transportFailure(error), timeout: connectTimeout))
        }
        let inForce: String
        do {
            inForce = try await store.savePinIfAbsent(presented, for: hostPort)
        } catch {
            return .failure(.internal("cannot store the TLS pin of \(hostPort) in the cache: \(error)"))
        }
        if inForce == presented {
            // A pin is a public-key hash, not a secret: log it so the operator can compare it with the device.
            logger.notice("vendor \(vendorID): trusted on first use: \(hostPort) presented key \(TLSPolicy.curlForm(presented)); pinned")
        }
        return .success(inForce)
    }

    // MARK: Endpoints

    /// `host:port` of an `http(s)://` URL, the key pins are stored under (`192.168.1.20:8443`; port 443 for
    /// https and 80 for http when the URL has none; IPv6 hosts keep their brackets). Nil for anything else.
    public static func hostPort(of url: String) -> String? {
        let lower = url.lowercased()
        let defaultPort: String
        let rest: Substring
        if lower.hasPrefix("https://") {
            defaultPort = "443"
            rest = lower.dropFirst("https://".count)
        } else if lower.hasPrefix("http://") {
            defaultPort = "80"
            rest = lower.dropFirst("http://".count)
        } else {
            return nil
        }
        var authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        let host: Substring
        var port: Substring = ""
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            host = authority[...close]
            let after = authority[authority.index(after: close)...]
            if after.hasPrefix(":") { port = after.dropFirst() } else if !after.isEmpty { return nil }
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            port = authority[authority.index(after: colon)...]
        } else {
            host = authority
        }
        guard !host.isEmpty, !host.contains(":") || host.hasPrefix("[") else { return nil }
        if port.isEmpty { port = Substring(defaultPort) }
        guard let number = Int(port), (1...65535).contains(number) else { return nil }
        return "\(host):\(number)"
    }

    /// True for an `https://` URL.
    public static func isHTTPS(_ url: String) -> Bool { url.lowercased().hasPrefix("https://") }

    /// The key the server at `url` presents now (SPKI SHA-256, base64), without verifying it; for `lbs-gateway tls-pin`.
    public static func presentedPin(url: String, vendorID: String, connectTimeout: Duration = .seconds(5)) async throws(GatewayError) -> String {
        let client: HTTPClient
        do {
            client = try HTTPClient()
        } catch {
            throw GatewayError.internal("could not start the HTTP client: \(error.message)")
        }
        defer { client.shutdown() }
        do {
            return try await client.fetchPublicKeyPin(url: url, connectTimeout: connectTimeout)
        } catch {
            throw ErrorClassifier(vendor: vendorID).classify(VendorHTTP.transportFailure(error), timeout: connectTimeout)
        }
    }
}
