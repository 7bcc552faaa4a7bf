/// A misbehaviour the simulator can show instead of (or before) a normal answer.
public enum SimulatorFault: Sendable, Hashable {
    /// A 5xx JSON answer; successive hits cycle through 500, 502 and 503.
    case serverError
    /// 429 with `Retry-After: <seconds>`.
    case rateLimit(retryAfterSeconds: Int)
    /// Answers normally, but only after `delay` (use one longer than the client timeout).
    case slow(delay: Duration)
    /// Runs the route, then sends 200 with the JSON body cut in half.
    case malformedJSON
    /// A 502 HTML page like nginx's, `Content-Type: text/html`.
    case htmlError
    /// Authenticated routes answer 401 `{"detail":"Invalid token"}` even for a valid token.
    case expiredToken
    /// Accepts the request, then applies it and answers only after `delay` (use one longer than the client's
    /// timeout). The work goes on even when the client gave up, and late requests are applied in arrival
    /// order: a timed-out OFF still lands after a newer, fast ON, like a backend that is slow to act.
    case late(delay: Duration)
    /// Takes a control request (single or batch) and answers `success` after `delay`, but never carries it out:
    /// the device stays as it was. With a delay past the client's timeout the client never hears, so the
    /// outcome stays unknown and reading the device back never shows the change.
    case unapplied(delay: Duration)
    /// 401 whose detail repeats the submitted credentials: `Invalid credentials for <user> / <password>`.
    case echoCredentials401
    /// 422 in pydantic's shape whose `input` repeats the request body (the password of a login).
    case echoInput422
    /// 500 HTML debug page that prints the configured password (a framework's debug screen).
    case echoPasswordHTML500
}

/// Which requests a fault applies to.
public struct FaultMatch: Sendable, Hashable {
    /// Requests whose path starts with this prefix.
    public var pathPrefix: String
    /// Only this method (e.g. "PUT") when set.
    public var method: String?

    /// Creates a matcher.
    public init(pathPrefix: String = "/api/", method: String? = nil) {
        self.pathPrefix = pathPrefix
        self.method = method
    }

    /// Every `/api/...` request (the default).
    public static let api = FaultMatch()

    func matches(method: String, path: String) -> Bool {
        path.hasPrefix(pathPrefix) && (self.method.map { $0.uppercased() == method.uppercased() } ?? true)
    }
}

/// An injected fault with how many more requests it applies to (`nil`: until cleared).
struct FaultRule: Sendable {
    var fault: SimulatorFault
    var remaining: Int?
    var match: FaultMatch
}
