#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel

/// How a request failed below HTTP. The HTTP client has its own error type; vendor code maps it here.
public enum TransportFailure: Sendable, Hashable {
    case timeout
    case connectFailed
    case dnsFailed
    /// Handshake or certificate failure.
    case tls
    /// The certificate does not match the configured pin.
    case pinMismatch
    /// The body exceeded the configured maximum size.
    case responseTooLarge
    /// We cancelled the request (shutdown or caller went away).
    case cancelled
    /// Anything else, with a short description (sanitized before it reaches a message).
    case other(String)
}

/// The single place that turns primitive failure facts (HTTP status, headers, body, transport failure,
/// JSON decoding failure) into a `GatewayError` with the right retry and vendor-health flags.
///
/// Whether a failed request may have been carried out is recorded as `outcomeUnknown` (see `mayHaveBeenCarriedOut`);
/// `resilientCall` never repeats such a failure for a command.
///
/// Rules: timeouts, connection errors, 5xx and 429 count against the vendor and are retryable;
/// 4xx caused by our request do not count and are not retried; 401/403 ask for one re-login;
/// malformed answers count (the vendor is unhealthy) and `RetryPolicy` retries them only briefly.
public struct ErrorClassifier: Sendable {
    public struct Settings: Sendable, Hashable {
        /// Longest `Retry-After` we honour; a vendor asking for more gets this.
        public var retryAfterCap: Duration
        /// Characters of the response body quoted in messages.
        public var snippetLength: Int

        public init(retryAfterCap: Duration = .seconds(600), snippetLength: Int = 160) {
            self.retryAfterCap = retryAfterCap
            self.snippetLength = snippetLength
        }
    }

    /// The vendor instance id, used in messages.
    public var vendor: String
    public var settings: Settings
    /// The vendor's secrets, cut out of every body excerpt before it is sanitized and shortened (so a
    /// password cut in half by the length limit cannot leak either).
    public let redactor: SecretRedactor

    public init(vendor: String, settings: Settings = Settings(), redactor: SecretRedactor = SecretRedactor()) {
        self.vendor = vendor
        self.settings = settings
        self.redactor = redactor
    }

    // MARK: HTTP responses

    /// Classifies an HTTP response; nil when it is a usable success.
    /// - Parameters:
    ///   - body: the body (only the first bytes are read).
    ///   - expectsJSON: a 2xx HTML page (a captive portal or error page served with 200) is then malformed.
    ///   - now: wall-clock time for `Retry-After` HTTP dates.
    public func classify(
        status: Int, headers: [String: String] = [:], body: some Collection<UInt8>, expectsJSON: Bool = true,
        now: Date = Date()
    ) -> GatewayError? {
        var error = classifyStatus(status: status, headers: headers, body: body, expectsJSON: expectsJSON, now: now)
        error?.outcomeUnknown = Self.mayHaveBeenCarriedOut(status: status)
        return error.map(redactor.redact)
    }

    /// Whether a request answered with `status` may have been carried out by the server. 2xx (an unreadable
    /// answer to a request that worked), 500, 502 and 504 (the server or the proxy behind it got the request
    /// and failed while or after working on it) may have been; 408, 429 and 503 are refusals before any work,
    /// and other 4xx are refusals of the request itself.
    public static func mayHaveBeenCarriedOut(status: Int) -> Bool {
        switch status {
        case 200..<300, 500, 502, 504: true
        default: false
        }
    }

    private func classifyStatus(
        status: Int, headers: [String: String], body: some Collection<UInt8>, expectsJSON: Bool, now: Date
    ) -> GatewayError? {
        // Most answers are fine: they return before the error's parts are made (copying, redacting and sanitizing
        // 4 KB of every poll's and command's answer cost more than a tenth of a command's time in the gateway).
        switch status {
        case 200..<300 where !expectsJSON || !Self.looksLikeHTML(body), 304: return nil
        default: break
        }
        let head = Array(body.prefix(4096))
        let retryAfter = retryAfter(headers: headers, now: now)
        let snippet = Self.sanitizedSnippet(Array(redactor.redact(String(decoding: head, as: UTF8.self)).utf8), maxLength: settings.snippetLength)
        let quoted = snippet.isEmpty ? "" : ": \(snippet)"

        switch status {
        case 200..<300:
            guard expectsJSON, Self.looksLikeHTML(head) else { return nil }
            return GatewayError(
                .malformedResponse, message: "Vendor '\(vendor)' answered with an HTML page instead of JSON\(quoted).",
                httpStatus: status
            )
        case 304:
            return nil
        case 300..<400:
            return GatewayError(
                .notFound,
                message: "Vendor '\(vendor)' redirected the request (HTTP \(status)); the endpoint probably does not exist.",
                httpStatus: status
            )
        case 401, 403:
            return GatewayError(
                .authFailed, message: "Vendor '\(vendor)' refused the credentials (HTTP \(status))\(quoted).",
                httpStatus: status, requiresReauthentication: true
            )
        case 404:
            return GatewayError(.notFound, message: "Vendor '\(vendor)' does not know this resource (HTTP 404)\(quoted).", httpStatus: status)
        case 410:
            return GatewayError(
                .notFound, message: "Vendor '\(vendor)' says this API is gone (HTTP 410)\(quoted).",
                suggestion: "The vendor retired this API; switch the vendor configuration to its current API.",
                httpStatus: status
            )
        case 408:
            return GatewayError(
                .vendorTimeout, message: "Vendor '\(vendor)' timed out reading the request (HTTP 408).",
                retryAfter: retryAfter, httpStatus: status
            )
        case 429:
            let wait = retryAfter.map { "; it asked to wait \(GatewayError.readable($0))" } ?? ""
            return GatewayError(
                .rateLimited, message: "Vendor '\(vendor)' is rate limiting the gateway (HTTP 429)\(wait).",
                retryAfter: retryAfter, httpStatus: status
            )
        case 400..<500:
            return GatewayError(.badRequest, message: "Vendor '\(vendor)' rejected the request (HTTP \(status))\(quoted).", httpStatus: status)
        case 502 where head.isEmpty:
            return GatewayError(
                .vendorUnavailable, message: "Vendor '\(vendor)' answered 502 with an empty body: the device is up but not serving data.",
                retryAfter: retryAfter, httpStatus: status
            )
        case 504:
            return GatewayError(
                .vendorTimeout, message: "Vendor '\(vendor)' timed out behind its gateway (HTTP 504).",
                retryAfter: retryAfter, httpStatus: status
            )
        case 500..<600:
            return GatewayError(
                .vendorServerError, message: "Vendor '\(vendor)' had a server error (HTTP \(status))\(quoted).",
                retryAfter: retryAfter, httpStatus: status
            )
        default:
            return GatewayError(
                .malformedResponse, message: "Vendor '\(vendor)' answered with an invalid HTTP status \(status).",
                httpStatus: status
            )
        }
    }

    /// Classifies a response whose body is not at hand.
    public func classify(status: Int, headers: [String: String] = [:], now: Date = Date()) -> GatewayError? {
        classify(status: status, headers: headers, body: EmptyCollection<UInt8>(), expectsJSON: false, now: now)
    }

    /// The capped `Retry-After` of a response, if it has a valid one.
    public func retryAfter(headers: [String: String], now: Date = Date()) -> Duration? {
        guard let value = headers.first(where: { $0.key.lowercased() == "retry-after" })?.value else { return nil }
        return RetryAfter.parse(value, now: now, cap: settings.retryAfterCap)
    }

    // MARK: Transport and decoding

    /// Classifies a failure below HTTP. `timeout` is the limit that was hit, for the message. `requestSent`:
    /// bytes of the request had left before it failed, so the vendor may have carried it out (`outcomeUnknown`).
    public func classify(_ failure: TransportFailure, timeout: Duration? = nil, requestSent: Bool = false) -> GatewayError {
        var error = redactor.redact(classifyTransport(failure, timeout: timeout))
        switch failure {
        case .timeout, .connectFailed, .other:
            error.outcomeUnknown = requestSent
        case .dnsFailed, .tls, .pinMismatch, .responseTooLarge, .cancelled:
            // Never sent, or (too large, cancelled) handled by their own codes.
            break
        }
        return error
    }

    private func classifyTransport(_ failure: TransportFailure, timeout: Duration?) -> GatewayError {
        switch failure {
        case .timeout:
            return .vendorTimeout(vendor: vendor, after: timeout)
        case .connectFailed:
            return .vendorUnreachable(vendor: vendor, detail: "the connection was refused or could not be made")
        case .dnsFailed:
            return GatewayError(
                .vendorUnreachable, message: "Cannot reach vendor '\(vendor)': its host name could not be resolved.",
                suggestion: "Check the host name in the vendor configuration and the gateway's DNS settings."
            )
        case .tls:
            return GatewayError(
                .tlsError, message: "The secure connection to vendor '\(vendor)' failed (TLS handshake or certificate)."
            )
        case .pinMismatch:
            return GatewayError(
                .tlsPinMismatch, message: "Vendor '\(vendor)' presented a certificate that does not match the pinned one."
            )
        case .responseTooLarge:
            return GatewayError(
                .malformedResponse, message: "Vendor '\(vendor)' sent a response larger than the configured limit.",
                retryable: false
            )
        case .cancelled:
            return GatewayError(
                .interrupted, message: "The request to vendor '\(vendor)' was cancelled before it finished; its outcome is unknown.",
                retryable: false, countsAgainstVendor: false
            )
        case .other(let detail):
            return .vendorUnreachable(vendor: vendor, detail: Self.sanitized(detail, maxLength: settings.snippetLength))
        }
    }

    /// A 2xx body that could not be decoded. `context` names what was being read ("site overview").
    /// The request got a 2xx answer, so it may have been carried out (`outcomeUnknown`).
    public func classifyDecoding(_ error: any Error, context: String) -> GatewayError {
        var failure = GatewayError(
            .malformedResponse,
            message: "Vendor '\(vendor)' sent a \(context) the gateway cannot read: \(Self.describeDecoding(error))."
        )
        failure.outcomeUnknown = true
        return failure
    }

    /// A decodable answer with an unexpected shape or values (`detail` must not contain secrets).
    public func unexpectedShape(_ detail: String, context: String) -> GatewayError {
        GatewayError(
            .malformedResponse,
            message: "Vendor '\(vendor)' sent an unexpected \(context): \(Self.sanitized(redactor.redact(detail), maxLength: settings.snippetLength))."
        )
    }

    static func describeDecoding(_ error: any Error) -> String {
        func path(_ codingPath: [any CodingKey]) -> String {
            codingPath.isEmpty ? "the top level" : codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
        }
        guard let decoding = error as? DecodingError else { return "not valid JSON" }
        switch decoding {
        case .typeMismatch(let type, let context): return "expected \(type) at \(path(context.codingPath))"
        case .valueNotFound(let type, let context): return "missing \(type) value at \(path(context.codingPath))"
        case .keyNotFound(let key, let context): return "missing key '\(key.stringValue)' at \(path(context.codingPath))"
        case .dataCorrupted(let context): return context.codingPath.isEmpty ? "not valid JSON" : "invalid value at \(path(context.codingPath))"
        @unknown default: return "not valid JSON"
        }
    }

    // MARK: Body inspection

    private static let byteOrderMark: [UInt8] = [0xEF, 0xBB, 0xBF]

    /// True when the body starts (after whitespace and a BOM) like an HTML page or XML document.
    public static func looksLikeHTML(_ body: some Sequence<UInt8>) -> Bool {
        // Every answer passes here: read its first bytes in place, nothing copied.
        var position = 0
        var markMatched = 0
        for byte in body.prefix(64) {
            defer { position += 1 }
            if markMatched == position, markMatched < 3, byte == Self.byteOrderMark[markMatched] {
                markMatched += 1
                continue
            }
            // A partial mark: the answer starts with 0xEF, which no page starts with.
            if markMatched > 0, markMatched < 3 { return false }
            switch byte {
            case 0x20, 0x09, 0x0A, 0x0D: continue
            // JSON never starts with '<'; a page may start with <!DOCTYPE, <html, <?xml or a bare <h1>.
            default: return byte == UInt8(ascii: "<")
            }
        }
        return false
    }

    /// A short, readable, secret-scrubbed excerpt of a body for messages: tags stripped, entities decoded,
    /// whitespace collapsed, long token-like words and URL queries removed.
    public static func sanitizedSnippet(_ body: some Sequence<UInt8>, maxLength: Int) -> String {
        let text = String(decoding: Array(body.prefix(4096)), as: UTF8.self)
        return sanitized(looksLikeHTML(text.utf8) ? stripTags(text) : text, maxLength: maxLength)
    }

    /// A URL for a message: without user info, query and fragment (they may carry credentials), control
    /// characters and excess length. Unlike `sanitized`, the path stays whole: it is what the operator must see.
    public static func displayURL(_ url: String, maxLength: Int = 200) -> String {
        var text = url
        var cut = false
        if let end = text.firstIndex(where: { $0 == "?" || $0 == "#" }) {
            text = String(text[..<end])
            cut = true
        }
        if let scheme = text.firstRange(of: "://") {
            let rest = text[scheme.upperBound...]
            let authorityEnd = rest.firstIndex(of: "/") ?? rest.endIndex
            if let at = rest[..<authorityEnd].lastIndex(of: "@") {
                text = String(text[..<scheme.upperBound]) + String(rest[rest.index(after: at)...])
            }
        }
        var out = String(text.unicodeScalars.filter { $0.value > 0x20 && $0.value != 0x7F }.map(Character.init))
        if out.count > maxLength { out = String(out.prefix(maxLength)) + "…" } else if cut { out += "?…" }
        return out
    }

    /// Collapses whitespace, removes control characters and anything that could be a credential.
    public static func sanitized(_ text: String, maxLength: Int) -> String {
        let words = text.split(whereSeparator: { $0.isWhitespace || $0.isNewline }).map { redact(String($0)) }
        var out = words.joined(separator: " ").unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }
            .reduce(into: "") { $0.unicodeScalars.append($1) }
        if out.count > maxLength { out = String(out.prefix(maxLength)) + "…" }
        return out
    }

    /// Tokens and keys are long unbroken runs of letters and digits (JWT segments, API keys, base64);
    /// a URL's query may carry a key. Both are cut out; the rest of the word stays readable.
    static func redact(_ word: String) -> String {
        var word = word
        if word.contains("://") || word.hasPrefix("/"), let query = word.firstIndex(of: "?") {
            word = String(word[..<query]) + "?…"
        }
        var out = ""
        var run = ""
        func flush() {
            out += isTokenLike(run) ? "[redacted]" : run
            run = ""
        }
        for scalar in word.unicodeScalars {
            switch scalar {
            case "0"..."9", "a"..."z", "A"..."Z", "-", "_", "+", "/", "=": run.unicodeScalars.append(scalar)
            default:
                flush()
                out.unicodeScalars.append(scalar)
            }
        }
        flush()
        return out
    }

    static func isTokenLike(_ run: String) -> Bool {
        guard run.utf8.count >= 20 else { return false }
        let hasDigit = run.utf8.contains { $0 >= 48 && $0 <= 57 }
        let hasLetter = run.unicodeScalars.contains { ("a"..."z").contains($0) || ("A"..."Z").contains($0) }
        return hasDigit && hasLetter
    }

    static func stripTags(_ html: String) -> String {
        var out = ""
        var inTag = false
        for character in html {
            if character == "<" { inTag = true; out.append(" ") }
            else if character == ">" { inTag = false }
            else if !inTag { out.append(character) }
        }
        // &amp; last, so "&amp;lt;" stays the text "&lt;".
        let entities = [("&#39;", "'"), ("&quot;", "\""), ("&lt;", "<"), ("&gt;", ">"), ("&nbsp;", " "), ("&ndash;", "–"), ("&amp;", "&")]
        for (entity, replacement) in entities { out = out.replacing(entity, with: replacement) }
        return out
    }
}
