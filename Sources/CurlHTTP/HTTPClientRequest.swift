#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// How the server's TLS identity is checked. Turning verification off without a pin is deliberately not expressible.
public enum TLSTrust: Sendable, Hashable {
    /// Full verification against the system CA store (cloud APIs).
    case systemDefault
    /// Accept exactly the server key whose SubjectPublicKeyInfo SHA-256 (base64) is given; for self-signed local devices.
    case pinned(spkiSHA256Base64: String)
}

/// One HTTP request for `HTTPClient.send(_:)`.
public struct HTTPClientRequest: Sendable {
    /// The supported request methods.
    public enum Method: String, Sendable, Hashable {
        case get = "GET"
        case post = "POST"
        case put = "PUT"
        case delete = "DELETE"
        case patch = "PATCH"
    }

    /// The request method.
    public var method: Method
    /// The absolute `http://` or `https://` URL.
    public var url: String
    /// Request headers; values may hold secrets and are never echoed in errors.
    public var headers: HTTPHeaderFields
    /// The request body, if any.
    public var body: Data?
    /// Limit for establishing the connection (TCP + TLS).
    public var connectTimeout: Duration
    /// Limit for the whole exchange, connect included.
    public var timeout: Duration
    /// Ask for gzip/deflate/brotli/zstd and decode transparently.
    public var acceptsCompressedResponse: Bool
    /// Largest decoded body accepted; larger responses fail with `.responseTooLarge`.
    public var maxResponseBytes: Int
    /// Follow up to five `http`/`https` redirects; off by default.
    public var followsRedirects: Bool
    /// How the server certificate is checked.
    public var tls: TLSTrust
    /// HTTP Digest credentials, answered only when the server challenges (401 with `WWW-Authenticate: Digest`).
    public var digest: (user: String, password: String)?

    /// Creates a request with conservative defaults (5 s connect, 30 s total, 8 MiB limit, no redirects).
    public init(
        method: Method = .get,
        url: String,
        headers: HTTPHeaderFields = [:],
        body: Data? = nil,
        connectTimeout: Duration = .seconds(5),
        timeout: Duration = .seconds(30),
        acceptsCompressedResponse: Bool = true,
        maxResponseBytes: Int = 8 << 20,
        followsRedirects: Bool = false,
        tls: TLSTrust = .systemDefault
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.connectTimeout = connectTimeout
        self.timeout = timeout
        self.acceptsCompressedResponse = acceptsCompressedResponse
        self.maxResponseBytes = maxResponseBytes
        self.followsRedirects = followsRedirects
        self.tls = tls
    }
}

/// A completed HTTP exchange (any status code; non-2xx is not an error at this layer).
public struct HTTPClientResponse: Sendable {
    /// The HTTP status code.
    public let status: Int
    /// Response headers of the final response, case-insensitive lookup.
    public let headers: HTTPHeaderFields
    /// The decoded response body.
    public let body: Data
    /// The URL that answered (differs from the request URL only after redirects).
    public let effectiveURL: String

    /// Creates a response value.
    public init(status: Int, headers: HTTPHeaderFields, body: Data, effectiveURL: String) {
        self.status = status
        self.headers = headers
        self.body = body
        self.effectiveURL = effectiveURL
    }

    /// `Retry-After` as delta-seconds, when the server sent that form.
    public var retryAfterSeconds: Int? {
        guard let value = headers["Retry-After"] else { return nil }
        return Int(trimmedWhitespace(value)).flatMap { $0 >= 0 ? $0 : nil }
    }
}

/// Strips ASCII spaces, tabs and line breaks from both ends (bytewise: "\r\n" is one Character).
func trimmedWhitespace(_ text: some StringProtocol) -> String {
    let isSpace: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D || $0 == 0x0A }
    let bytes = Array(text.utf8)
    guard let first = bytes.firstIndex(where: { !isSpace($0) }),
          let last = bytes.lastIndex(where: { !isSpace($0) })
    else { return "" }
    return String(decoding: bytes[first...last], as: UTF8.self)
}
