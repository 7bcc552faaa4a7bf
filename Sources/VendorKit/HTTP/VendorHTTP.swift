#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import CurlHTTP
import GatewayModel
import Logging
import Resilience
import Synchronization

/// Adds a vendor's credentials to its requests and renews them when the vendor refuses them.
public protocol VendorAuthorizer: Sendable {
    /// Makes sure usable credentials exist, logging in when there are none or they are about to expire.
    /// Runs before the call takes a breaker permit, so a login never competes with the half-open probe.
    func prepare() async throws(GatewayError)
    /// Adds the current credentials to `request`; returns a tag naming them for `reauthenticate(after:)`.
    func authorize(_ request: inout HTTPClientRequest) -> UInt64
    /// The vendor refused the credentials tagged `tag`: get new ones, unless another call already did.
    func reauthenticate(after tag: UInt64) async throws(GatewayError)
}

/// The resilient HTTP layer every network vendor instance owns exactly one of.
///
/// Every call (poll, refresh, command, login) goes through `send`/`sendJSON`, which run it under the
/// instance's one circuit breaker, retry policy and optional quota (`resilientCall`), map transport
/// failures and statuses to `GatewayError` through the `ErrorClassifier` only, and keep the vendor's
/// health. A `.health` event goes out through the sink whenever the health state, the breaker state,
/// the last error or `next_attempt` changes — not on every success.
///
/// Failures that trying again soon cannot fix — the credentials were refused, or the API's URL answers 404 —
/// are held off (`holdOff(after:)`): calls fail locally with the same error, without a request, for a back-off
/// that doubles from `holdOffBase` up to `holdOffCap`; the vendor is `down` with `next_attempt` set until a
/// call succeeds. Every error's text passes the vendor's `SecretRedactor` before anyone sees it.
public final class VendorHTTP: Sendable {
    public struct Settings: Sendable {
        public var breaker: CircuitBreaker.Settings
        public var retry: RetryPolicy
        /// Request budgets; nil means unlimited.
        public var quota: QuotaScheduler.Settings?
        public var classifier: ErrorClassifier.Settings
        /// Consecutive attempts that could not reach the vendor (connect failure, timeout) after which it is `down`
        /// even before the breaker opens.
        public var unreachableThreshold: Int
        /// How the server's TLS identity is checked (`tls:` in the vendor's config).
        public var tls: TLSPolicy
        /// First wait after a held-off failure (refused credentials, 404 API); doubles on each repeat.
        public var holdOffBase: Duration
        /// Longest wait between attempts while held off.
        public var holdOffCap: Duration
        /// A daily window when failing to reach the vendor is expected (`vendor_unavailable`, not a fault).
        public var expectedOutage: ExpectedOutage?

        public init(
            breaker: CircuitBreaker.Settings = .init(), retry: RetryPolicy = .init(), quota: QuotaScheduler.Settings? = nil,
            classifier: ErrorClassifier.Settings = .init(), unreachableThreshold: Int = 3, tls: TLSPolicy = .system,
            holdOffBase: Duration = .seconds(15), holdOffCap: Duration = .seconds(300), expectedOutage: ExpectedOutage? = nil
        ) {
            self.expectedOutage = expectedOutage
            self.holdOffBase = max(.seconds(1), holdOffBase)
            self.holdOffCap = max(self.holdOffBase, holdOffCap)
            self.breaker = breaker
            self.retry = retry
            self.quota = quota
            self.classifier = classifier
            self.unreachableThreshold = max(1, unreachableThreshold)
            self.tls = tls
        }
    }

    private struct Published: Equatable {
        var state: VendorHealth.State
        var breaker: String?
        var lastError: GatewayError?
        /// Whole seconds, so the jitter of computing it from "now + remaining" does not count as a move.
        var nextAttempt: Int64?
        /// The first success is news (the vendor is no longer `starting`); later ones are not.
        var answered: Bool
    }

    private struct Tracking {
        var lastSuccess: Date?
        var lastError: GatewayError?
        var lastAttemptFailed = false
        var consecutiveUnreachable = 0
        var published: Published?
        /// Held-off failures since the last success; > 0 means the vendor is `down`.
        var holdOffs = 0
        /// Until when calls fail locally (on `time`), and the same moment on the wall clock for `next_attempt`.
        var heldUntil: Duration?
        var heldUntilDate: Date?
        /// The error held-off calls fail with: one error, one text.
        var heldError: GatewayError?
    }

    public let vendorID: String
    public let client: HTTPClient
    public let breaker: CircuitBreaker
    public let retry: RetryPolicy
    public let quota: QuotaScheduler?
    public let classifier: ErrorClassifier
    /// The TLS trust of every request (system CA store, first-use pin or configured pin).
    public let trust: TLSTrustResolver
    /// The clock of breaker, quota and retry waits; vendors sleep between polls on it too.
    public let time: TimeSource
    /// Wall-clock time for health dates and `Retry-After` HTTP dates.
    public let now: @Sendable () -> Date
    private let unreachableThreshold: Int
    private let holdOffBase: Duration
    private let holdOffCap: Duration
    private let expectedOutage: ExpectedOutage?
    /// The vendor's secrets (password, current token), cut out of every vendor-derived message.
    public let redactor: SecretRedactor
    private let sink: VendorEventSink
    private let tracking = Mutex(Tracking())

    /// Creates the layer. `pinStore` keeps `tls: first_use` pins (in memory only when nil); `logger` receives
    /// the few events an operator must see (a key trusted on first use, a changed key).
    public init(
        vendorID: String, client: HTTPClient, settings: Settings, sink: VendorEventSink, time: TimeSource,
        now: @escaping @Sendable () -> Date = { Date() }, pinStore: (any TLSPinStore)? = nil,
        logger: Logger = Logger(label: "lbs-gateway.vendor")
    ) {
        self.vendorID = vendorID
        self.client = client
        self.sink = sink
        self.time = time
        self.now = now
        breaker = CircuitBreaker(vendor: vendorID, settings: settings.breaker, time: time)
        retry = settings.retry
        quota = settings.quota.map { QuotaScheduler(vendor: vendorID, settings: $0, time: time) }
        let redactor = SecretRedactor()
        self.redactor = redactor
        classifier = ErrorClassifier(vendor: vendorID, settings: settings.classifier, redactor: redactor)
        unreachableThreshold = settings.unreachableThreshold
        holdOffBase = settings.holdOffBase
        holdOffCap = settings.holdOffCap
        expectedOutage = settings.expectedOutage
        trust = TLSTrustResolver(
            vendorID: vendorID, policy: settings.tls, store: pinStore ?? InMemoryTLSPinStore(), client: client,
            classifier: classifier, logger: logger
        )
    }

    /// A new libcurl client for one vendor instance; a failure to start it is the gateway's, not the vendor's.
    public static func newClient() throws(GatewayError) -> HTTPClient {
        do {
            return try HTTPClient()
        } catch {
            throw GatewayError.internal("could not start the HTTP client: \(error.message)")
        }
    }

    // MARK: Calls

    /// Sends `request` resiliently; returns the response once the classifier accepts its status.
    /// `deadline` (a command's `expiresAt`) bounds every retry and wait inside the call.
    /// `accepting`: statuses that are an answer, not a failure (a 404 of an endpoint some models do not serve);
    /// the response is returned as it is for the caller to read.
    public func send(
        _ request: HTTPClientRequest, use: QuotaScheduler.Use, expectsJSON: Bool = true, authorizer: (any VendorAuthorizer)? = nil,
        deadline: Date? = nil, accepting: Set<Int> = []
    ) async throws(GatewayError) -> HTTPClientResponse {
        try await call(request, use: use, authorizer: authorizer, deadline: deadline) { response throws(GatewayError) in
            if accepting.contains(response.status) { return response }
            try self.check(response, expectsJSON: expectsJSON)
            return response
        }
    }

    /// Sends `request` resiliently and decodes its 2xx JSON body. A body that cannot be decoded (HTML page,
    /// truncated JSON, wrong shape) is `malformed_response` and counts against the vendor; `context` names
    /// what was expected ("device list") for the message.
    public func sendJSON<T: Decodable>(
        _ request: HTTPClientRequest, as type: T.Type, context: String, use: QuotaScheduler.Use,
        authorizer: (any VendorAuthorizer)? = nil, deadline: Date? = nil
    ) async throws(GatewayError) -> T {
        try await call(request, use: use, authorizer: authorizer, deadline: deadline) { response throws(GatewayError) in
            try self.decode(type, from: response, context: context)
        }
    }

    /// `sendJSON` for an answer read from the strict parse's tree by `read` (see `JSONObjectReader`), not
    /// decoded a second time by `JSONDecoder`; `read` throws `DecodingError`s as JSONDecoder would.
    public func sendJSON<T>(
        _ request: HTTPClientRequest, context: String, use: QuotaScheduler.Use, authorizer: (any VendorAuthorizer)? = nil,
        deadline: Date? = nil, read: (JSONValue) throws -> T
    ) async throws(GatewayError) -> T {
        try await call(request, use: use, authorizer: authorizer, deadline: deadline) { response throws(GatewayError) in
            try self.decode(from: response, context: context, read: read)
        }
    }

    /// Classifies `response` and decodes its JSON body (no network; the building block of `sendJSON`).
    public func decode<T: Decodable>(_ type: T.Type, from response: HTTPClientResponse, context: String) throws(GatewayError) -> T {
        _ = try tree(of: response, context: context)
        do {
            return try JSONDecoder().decode(type, from: response.body)
        } catch {
            throw classifier.classifyDecoding(error, context: context)
        }
    }

    /// Classifies `response` and reads its JSON body with `read` from the strict parse's tree.
    public func decode<T>(from response: HTTPClientResponse, context: String, read: (JSONValue) throws -> T) throws(GatewayError) -> T {
        let tree = try tree(of: response, context: context)
        do {
            return try read(tree)
        } catch {
            throw classifier.classifyDecoding(error, context: context)
        }
    }

    /// The body of a usable answer as a JSON tree. Strict, linear and depth-limited: a 500-deep body never
    /// reaches JSONDecoder.
    private func tree(of response: HTTPClientResponse, context: String) throws(GatewayError) -> JSONValue {
        try check(response, expectsJSON: true)
        switch StrictJSON.parse(response.body) {
        case .success(let tree): return tree
        case .failure(let problem): throw classifier.unexpectedShape("the gateway cannot read it as JSON: \(problem)", context: context)
        }
    }

    /// Throws the classifier's verdict for a response that is not a usable success.
    public func check(_ response: HTTPClientResponse, expectsJSON: Bool) throws(GatewayError) {
        var headers: [String: String] = [:]
        for field in response.headers where headers[field.name] == nil { headers[field.name] = field.value }
        if var error = classifier.classify(
            status: response.status, headers: headers, body: response.body, expectsJSON: expectsJSON, now: now()
        ) {
            if error.code == .notFound, !response.effectiveURL.isEmpty {
                // Name the URL: a wrong `url` setting answers 404 everywhere, and the URL shows it at once.
                error.message += " URL: \(ErrorClassifier.displayURL(response.effectiveURL))"
            }
            throw redactor.redact(error)
        }
    }

    private func call<T>(
        _ request: HTTPClientRequest, use: QuotaScheduler.Use, authorizer: (any VendorAuthorizer)?, deadline: Date? = nil,
        interpret: (HTTPClientResponse) throws(GatewayError) -> T
    ) async throws(GatewayError) -> T {
        if let held = heldError() {
            publishHealthIfChanged()
            throw held
        }
        do throws(GatewayError) {
            if let authorizer { try await authorizer.prepare() }
            let credentials = CredentialsTag()
            let reauthenticate = authorizer.map { Self.renewal(of: $0, credentials: credentials) }
            // The wall-clock deadline as an instant of the retry clock.
            let limit = deadline.map { time.now() + .clampedSeconds(max(0, $0.timeIntervalSince(now()))) }
            let value = try await resilientCall(
                breaker: breaker, retry: retry, quota: quota, use: use, time: time, deadline: limit, reauthenticate: reauthenticate
            ) { () async throws(GatewayError) -> T in
                var attempt = request
                if let authorizer { credentials.value = authorizer.authorize(&attempt) }
                return try await self.attempt(attempt, interpret: interpret)
            }
            publishHealthIfChanged()
            return value
        } catch {
            let error = redactor.redact(error)
            recordFinal(error)
            publishHealthIfChanged()
            throw error
        }
    }

    // MARK: Holding off

    /// The error to fail with while a hold-off runs (nil: calls may go out).
    private func heldError() -> GatewayError? {
        let now = time.now()
        return tracking.withLock { tracking in
            guard let until = tracking.heldUntil, now < until else { return nil }
            return tracking.heldError
        }
    }

    /// Stops calls for a back-off after a failure that an immediate retry cannot fix: refused credentials,
    /// or an API whose URL answers 404. The wait doubles from `holdOffBase` with each repeat, up to
    /// `holdOffCap`; the vendor is `down` with `next_attempt` set, and held calls throw `error` unchanged.
    /// `duration` replaces the doubling back-off when the vendor's own rule fixes the pause (a Powerwall's
    /// 5-minute cooldown after 429 or 503). While a hold-off runs, further calls change nothing: the error a held
    /// call throws may come back here, and it must not push the next attempt further away.
    public func holdOff(after error: GatewayError, for duration: Duration? = nil) {
        let error = redactor.redact(error)
        let now = time.now()
        let wallNow = self.now()
        tracking.withLock { tracking in
            // A call refused while held never reached the vendor: it tells nothing new and must not extend the wait.
            if let until = tracking.heldUntil, now < until { return }
            tracking.holdOffs += 1
            let factor = Double(sign: .plus, exponent: min(tracking.holdOffs - 1, 30), significand: 1)
            let wait = duration ?? min(holdOffCap, .clampedSeconds(holdOffBase.inSeconds * factor))
            tracking.heldUntil = now + wait
            tracking.heldUntilDate = wallNow.addingTimeInterval(wait.inSeconds.rounded())
            tracking.heldError = error
            tracking.lastError = error
            tracking.lastAttemptFailed = true
        }
        publishHealthIfChanged()
    }

    /// The `reauthenticate` step of `resilientCall`: renew the credentials the failed attempt used.
    private static func renewal(
        of authorizer: any VendorAuthorizer, credentials: CredentialsTag
    ) -> () async throws(GatewayError) -> Void {
        return { () async throws(GatewayError) -> Void in
            try await authorizer.reauthenticate(after: credentials.value)
        }
    }

    /// One exchange with the vendor (after resolving its TLS trust, which may fetch a first-use pin);
    /// its outcome feeds the health tracking.
    private func attempt<T>(
        _ request: HTTPClientRequest, interpret: (HTTPClientResponse) throws(GatewayError) -> T
    ) async throws(GatewayError) -> T {
        do throws(GatewayError) {
            var request = request
            request.tls = try await trust.trust(for: request.url, connectTimeout: request.connectTimeout)
            let response: HTTPClientResponse
            do {
                response = try await client.send(request)
            } catch {
                let failure = classifier.classify(Self.transportFailure(error), timeout: request.timeout, requestSent: error.requestSent)
                throw expectedOutage?.explain(failure, at: now()) ?? explained(failure, url: request.url)
            }
            trust.recordSuccess(url: request.url)
            let value = try interpret(response)
            recordAttempt(nil)
            return value
        } catch {
            recordAttempt(error)
            throw error
        }
    }

    /// A TLS failure with the one thing the operator can do about it under this vendor's `tls` policy.
    private func explained(_ error: GatewayError, url: String) -> GatewayError {
        var error = error
        switch error.code {
        case .tlsPinMismatch:
            trust.recordMismatch(url: url)
            error.suggestion = trust.mismatchAdvice
        case .tlsError where trust.policy == .system:
            error.suggestion = trust.mismatchAdvice
        default:
            break
        }
        return error
    }

    /// `HTTPError` kinds in the classifier's vocabulary.
    static func transportFailure(_ error: HTTPError) -> TransportFailure {
        switch error.kind {
        case .timeout: .timeout
        case .connectFailed: .connectFailed
        case .dnsFailed: .dnsFailed
        case .tls: .tls
        case .pinMismatch: .pinMismatch
        case .responseTooLarge: .responseTooLarge
        case .cancelled: .cancelled
        case .invalidRequest, .other: .other(error.message)
        }
    }

    // MARK: Health

    private func recordAttempt(_ error: GatewayError?) {
        let now = now()
        tracking.withLock { tracking in
            guard let error else {
                tracking.lastSuccess = now
                tracking.lastAttemptFailed = false
                tracking.consecutiveUnreachable = 0
                tracking.holdOffs = 0
                tracking.heldUntil = nil
                tracking.heldUntilDate = nil
                tracking.heldError = nil
                return
            }
            // A refused token is renewed by the caller; only a final refusal is news (see `recordFinal`).
            guard !error.requiresReauthentication, error.code != .interrupted else { return }
            tracking.lastError = error
            tracking.lastAttemptFailed = true
            let unreachable = error.code == .vendorUnreachable || error.code == .vendorTimeout
            tracking.consecutiveUnreachable = unreachable ? tracking.consecutiveUnreachable + 1 : 0
        }
    }

    /// The error a whole call ended with. Our own protections (breaker, quota) and cancellation say nothing
    /// new about the vendor, so the cause that tripped them stays the last error.
    private func recordFinal(_ error: GatewayError) {
        // A refusal the caller is about to turn into its final form (a login's "check the password") is not
        // recorded in between, so one failure shows one text.
        guard !error.requiresReauthentication else { return }
        switch error.code {
        case .breakerOpen, .quotaExhausted, .interrupted:
            return
        default:
            tracking.withLock { tracking in
                tracking.lastError = error
                tracking.lastAttemptFailed = true
            }
        }
    }

    /// The vendor's health now.
    public var health: VendorHealth {
        let snapshot = breaker.snapshot
        let now = now()
        return tracking.withLock { makeHealth($0, breaker: snapshot, now: now) }
    }

    /// Sends a `.health` event when state, breaker state or last error differ from the last one sent.
    public func publishHealthIfChanged() {
        publish(force: false)
    }

    /// Sends the current health unconditionally (e.g. when the vendor starts).
    public func publishHealth() {
        publish(force: true)
    }

    private func publish(force: Bool) {
        let snapshot = breaker.snapshot
        let now = now()
        tracking.withLock { tracking in
            let health = makeHealth(tracking, breaker: snapshot, now: now)
            let key = Published(
                state: health.state, breaker: health.breaker, lastError: health.lastError,
                nextAttempt: health.nextAttempt.map { Int64($0.timeIntervalSince1970.rounded()) }, answered: health.lastSuccess != nil
            )
            guard force || tracking.published != key else { return }
            tracking.published = key
            // Sent under the lock so concurrent calls cannot reorder health events.
            sink.send(.health(health))
        }
    }

    /// When the gateway will next call the vendor: the end of a hold-off or of the breaker's open time.
    /// Never a moment in the past: once it passed, the next call is simply the next poll (nil).
    private func nextAttempt(_ tracking: Tracking, breaker snapshot: CircuitBreaker.Snapshot, now: Date) -> Date? {
        var candidates: [Date] = []
        if let held = tracking.heldUntilDate, held > now { candidates.append(held) }
        if let remaining = snapshot.nextAttemptIn, remaining > .zero {
            candidates.append(now.addingTimeInterval(remaining.inSeconds.rounded()))
        }
        return candidates.max()
    }

    private func makeHealth(_ tracking: Tracking, breaker snapshot: CircuitBreaker.Snapshot, now: Date) -> VendorHealth {
        let state: VendorHealth.State
        if snapshot.state == .open || tracking.consecutiveUnreachable >= unreachableThreshold || tracking.holdOffs > 0 {
            state = .down
        } else if snapshot.state == .halfOpen || tracking.lastAttemptFailed || snapshot.failuresInWindow > 0 {
            state = .degraded
        } else {
            state = .ok
        }
        var usage: [String: [String: Double]] = [:]
        for window in quota?.snapshot ?? [] {
            usage[window.window.rawValue] = [
                "used": Double(window.used), "limit": Double(window.limit), "poll_limit": Double(window.pollLimit),
                "resets_at": (now.timeIntervalSince1970 + window.resetsIn.inSeconds).rounded(),
            ]
        }
        return VendorHealth(
            vendorID: vendorID, state: state, breaker: snapshot.state.rawValue, lastSuccess: tracking.lastSuccess,
            lastError: tracking.lastError, nextAttempt: nextAttempt(tracking, breaker: snapshot, now: now),
            quota: usage
        )
    }
}

/// The tag of the credentials the latest attempt of one call used.
private final class CredentialsTag: Sendable {
    private let tag = Mutex<UInt64>(0)

    var value: UInt64 {
        get { tag.withLock { $0 } }
        set { tag.withLock { $0 = newValue } }
    }
}
