/// A failed HTTP exchange: what went wrong as a `kind`, plus a readable message without secrets.
public struct HTTPError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The failure classes callers act on (retry, breaker, re-pin, give up).
    public enum Kind: Sendable, Hashable {
        /// Connect or total timeout elapsed.
        case timeout
        /// The peer refused or was unreachable.
        case connectFailed
        /// The host (or proxy) name did not resolve.
        case dnsFailed
        /// TLS handshake or certificate verification failed.
        case tls
        /// The server's public key did not match the configured pin.
        case pinMismatch
        /// The response body exceeded the request's size limit.
        case responseTooLarge
        /// The calling task was cancelled or the client shut down.
        case cancelled
        /// The request itself was unusable (bad URL, header, pin or option).
        case invalidRequest
        /// Any other libcurl failure, with its `CURLcode`.
        case other(Int)
    }

    /// The failure class.
    public let kind: Kind
    /// Human-readable detail (curl's text for the code plus its error buffer); never request headers or bodies.
    public let message: String
    /// The raw `CURLcode` when libcurl reported the failure.
    public let curlCode: Int?
    /// True when bytes of the request had been sent before it failed (a timeout or reset while the server
    /// worked on it): the server may have carried it out. False when it surely never left (connect refused,
    /// DNS, TLS handshake, connect timeout).
    public let requestSent: Bool

    /// Creates an error; `message` must not contain secrets.
    public init(kind: Kind, message: String, curlCode: Int? = nil, requestSent: Bool = false) {
        self.kind = kind
        self.message = message
        self.curlCode = curlCode
        self.requestSent = requestSent
    }

    /// A stable machine-readable code such as `http.timeout`.
    public var code: String {
        switch kind {
        case .timeout: "http.timeout"
        case .connectFailed: "http.connect_failed"
        case .dnsFailed: "http.dns_failed"
        case .tls: "http.tls"
        case .pinMismatch: "http.pin_mismatch"
        case .responseTooLarge: "http.response_too_large"
        case .cancelled: "http.cancelled"
        case .invalidRequest: "http.invalid_request"
        case .other(let curlCode): "http.curl_\(curlCode)"
        }
    }

    public var description: String { "\(code): \(message)" }
}
