import Foundation
import GatewayModel
import Resilience
import Testing

@Suite("ErrorClassifier")
struct ClassifierTests {
    /// The 2xx HTML check every answer passes: a byte order mark and leading whitespace are skipped, anything else
    /// decides at its first byte, and only the first 64 bytes are read.
    @Test(arguments: [
        ("<!DOCTYPE html><html>", true), ("  \r\n\t<html>", true), ("\u{FEFF}<html>", true), ("\u{FEFF} \n<h1>", true),
        ("{\"a\":1}", false), ("[1]", false), ("", false), ("   ", false), (" \u{FEFF}<html>", false),
        (String(repeating: " ", count: 64) + "<html>", false), (String(repeating: " ", count: 63) + "<html>", true),
    ])
    func htmlIsToldByItsFirstByte(body: String, isHTML: Bool) {
        #expect(ErrorClassifier.looksLikeHTML(Array(body.utf8)) == isHTML)
        #expect(ErrorClassifier.looksLikeHTML(Data(body.utf8)) == isHTML)
    }

    @Test func aPartialByteOrderMarkIsNoPage() {
        #expect(!ErrorClassifier.looksLikeHTML([0xEF, 0xBB, UInt8(ascii: "<")]))
        #expect(!ErrorClassifier.looksLikeHTML([0xEF, UInt8(ascii: "<")]))
        #expect(!ErrorClassifier.looksLikeHTML([0xEF, 0xBB, 0xBF, 0xEF, UInt8(ascii: "<")]))
    }

    let classifier = ErrorClassifier(vendor: "solar")
    let now = Date(timeIntervalSince1970: 784_111_777) // Sun, 06 Nov 1994 08:49:37 GMT

    struct StatusCase: Sendable, CustomTestStringConvertible {
        var status: Int
        var code: GatewayError.Code
        var counts: Bool
        var retryable: Bool
        var reauth = false
        var testDescription: String { "HTTP \(status) → \(code.rawValue)" }
    }

    static let statusTable: [StatusCase] = [
        .init(status: 400, code: .badRequest, counts: false, retryable: false),
        .init(status: 401, code: .authFailed, counts: false, retryable: false, reauth: true),
        .init(status: 403, code: .authFailed, counts: false, retryable: false, reauth: true),
        .init(status: 404, code: .notFound, counts: false, retryable: false),
        .init(status: 405, code: .badRequest, counts: false, retryable: false),
        .init(status: 409, code: .badRequest, counts: false, retryable: false),
        .init(status: 410, code: .notFound, counts: false, retryable: false),
        .init(status: 422, code: .badRequest, counts: false, retryable: false),
        .init(status: 408, code: .vendorTimeout, counts: true, retryable: true),
        .init(status: 429, code: .rateLimited, counts: true, retryable: true),
        .init(status: 500, code: .vendorServerError, counts: true, retryable: true),
        .init(status: 502, code: .vendorServerError, counts: true, retryable: true),
        .init(status: 503, code: .vendorServerError, counts: true, retryable: true),
        .init(status: 504, code: .vendorTimeout, counts: true, retryable: true),
        .init(status: 301, code: .notFound, counts: false, retryable: false),
        .init(status: 99, code: .malformedResponse, counts: true, retryable: true),
    ]

    @Test(arguments: statusTable)
    func statusCodes(_ row: StatusCase) throws {
        let error = try #require(classifier.classify(status: row.status, body: Array("{}".utf8)))
        #expect(error.code == row.code)
        #expect(error.countsAgainstVendor == row.counts)
        #expect(error.retryable == row.retryable)
        #expect(error.requiresReauthentication == row.reauth)
        #expect(error.httpStatus == row.status)
        #expect(error.message.contains("solar"))
        #expect(!error.suggestion.isEmpty)
    }

    @Test func a502WithAnEmptyBodyIsADeviceNotServingNotAServerError() throws {
        let empty = try #require(classifier.classify(status: 502, body: [UInt8]()))
        #expect(empty.code == .vendorUnavailable && empty.retryable && empty.countsAgainstVendor && empty.severity == .warning)
        #expect(empty.message.contains("empty body"))
        #expect(classifier.classify(status: 502, body: Array("<h1>502 Bad Gateway</h1>".utf8))?.code == .vendorServerError)
    }

    @Test func successIsNotAnError() {
        #expect(classifier.classify(status: 200, body: Array(#"{"ok":true}"#.utf8)) == nil)
        #expect(classifier.classify(status: 204, body: [UInt8]()) == nil)
        #expect(classifier.classify(status: 200) == nil)
    }

    @Test func htmlPageWithSuccessStatusIsMalformed() throws {
        for page in ["<!DOCTYPE html><html><body>Login</body></html>", "\u{FEFF}  \n<html><h1>Portal</h1>", "<h1>oops</h1>"] {
            let error = try #require(classifier.classify(status: 200, body: Array(page.utf8)))
            #expect(error.code == .malformedResponse)
            #expect(error.countsAgainstVendor)
        }
        // Endpoints that legitimately answer HTML (Enphase check_jwt) opt out.
        #expect(classifier.classify(status: 200, body: Array("<!DOCTYPE html><h2>Valid token.</h2>".utf8), expectsJSON: false) == nil)
    }

    @Test func tomcatHTMLErrorBecomesReadableBadRequest() throws {
        let page = "<html><head><title>Error</title></head><body><h1>HTTP Status 400 – Bad Request</h1>"
            + "<p><b>Message</b> Required parameter &#39;startDate&#39; is not present</p></body></html>"
        let error = try #require(ErrorClassifier(vendor: "solar", settings: .init(snippetLength: 400)).classify(status: 400, body: Array(page.utf8)))
        #expect(error.code == .badRequest)
        #expect(error.message.contains("Required parameter 'startDate' is not present"))
        #expect(!error.message.contains("<"))
    }

    @Test func secretsInBodiesAreRedacted() throws {
        let token = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abc123"
        let body = #"{"error":"bad token \#(token)","url":"https://monitoringapi.solaredge.com/site/1/overview?api_key=L4QLVQ1LOKCQX2193VSEICXW61NP6B1O"}"#
        let error = try #require(classifier.classify(status: 400, body: Array(body.utf8)))
        #expect(!error.message.contains(token))
        #expect(!error.message.contains("L4QLVQ1LOKCQX2193VSEICXW61NP6B1O"))
        #expect(error.message.contains("bad token"))
        let transport = classifier.classify(.other("Failed to connect to host?key=SECRETSECRETSECRET12345678 port 443"))
        #expect(!transport.message.contains("SECRETSECRETSECRET12345678"))
    }

    @Test func longBodiesAreClipped() throws {
        let body = String(repeating: "error text ", count: 500)
        let error = try #require(classifier.classify(status: 500, body: Array(body.utf8)))
        #expect(error.message.count < 300)
    }

    @Test func rateLimitCarriesCappedRetryAfter() throws {
        let error = try #require(classifier.classify(status: 429, headers: ["Retry-After": "120"], body: [UInt8](), now: now))
        #expect(error.retryAfter == .seconds(120))
        let capped = try #require(
            ErrorClassifier(vendor: "solar", settings: .init(retryAfterCap: .seconds(60)))
                .classify(status: 503, headers: ["retry-after": "3600"], body: [UInt8](), now: now)
        )
        #expect(capped.retryAfter == .seconds(60))
        #expect(capped.code == .vendorServerError)
    }

    struct TransportCase: Sendable, CustomTestStringConvertible {
        var failure: TransportFailure
        var code: GatewayError.Code
        var counts: Bool
        var retryable: Bool
        var testDescription: String { "\(failure) → \(code.rawValue)" }
    }

    static let transportTable: [TransportCase] = [
        .init(failure: .timeout, code: .vendorTimeout, counts: true, retryable: true),
        .init(failure: .connectFailed, code: .vendorUnreachable, counts: true, retryable: true),
        .init(failure: .dnsFailed, code: .vendorUnreachable, counts: true, retryable: true),
        .init(failure: .tls, code: .tlsError, counts: true, retryable: false),
        .init(failure: .pinMismatch, code: .tlsPinMismatch, counts: true, retryable: false),
        .init(failure: .responseTooLarge, code: .malformedResponse, counts: true, retryable: false),
        .init(failure: .cancelled, code: .interrupted, counts: false, retryable: false),
        .init(failure: .other("connection reset by peer"), code: .vendorUnreachable, counts: true, retryable: true),
    ]

    @Test(arguments: transportTable)
    func transportFailures(_ row: TransportCase) {
        let error = classifier.classify(row.failure, timeout: .seconds(10))
        #expect(error.code == row.code)
        #expect(error.countsAgainstVendor == row.counts)
        #expect(error.retryable == row.retryable)
        #expect(error.httpStatus == nil)
    }

    @Test func pinMismatchIsCritical() {
        #expect(classifier.classify(.pinMismatch).severity == .critical)
        #expect(classifier.classify(.timeout, timeout: .seconds(10)).message.contains("10 s"))
    }

    @Test func decodingFailuresAreMalformedAndNameThePlace() throws {
        struct Overview: Decodable { var power: Double }
        let decodeError = try #require(throws: DecodingError.self) {
            try JSONDecoder().decode(Overview.self, from: Data(#"{"energy":1}"#.utf8))
        }
        let error = classifier.classifyDecoding(decodeError, context: "site overview")
        #expect(error.code == .malformedResponse)
        #expect(error.countsAgainstVendor)
        #expect(error.message.contains("power"))
        #expect(error.message.contains("site overview"))
        let notJSON = try #require(throws: (any Error).self) {
            try JSONDecoder().decode(Overview.self, from: Data("<html>".utf8))
        }
        #expect(classifier.classifyDecoding(notJSON, context: "site overview").message.contains("not valid JSON"))
    }
}

@Suite("Retry-After and HTTP dates")
struct RetryAfterTests {
    let now = Date(timeIntervalSince1970: 784_111_777) // Sun, 06 Nov 1994 08:49:37 GMT

    @Test func httpDateForms() throws {
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == now)
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT") == now)
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994") == now)
        #expect(HTTPDate.parse("Sun, 06 Foo 1994 08:49:37 GMT") == nil)
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 25:49:37 GMT") == nil)
        #expect(HTTPDate.parse("yesterday") == nil)
        #expect(HTTPDate.parse("") == nil)
    }

    @Test func deltaSeconds() {
        #expect(RetryAfter.parse("120", now: now, cap: .seconds(600)) == .seconds(120))
        #expect(RetryAfter.parse(" 0 ", now: now, cap: .seconds(600)) == .zero)
        #expect(RetryAfter.parse("86400", now: now, cap: .seconds(600)) == .seconds(600))
        #expect(RetryAfter.parse("99999999999999999999999", now: now, cap: .seconds(600)) == .seconds(600))
        #expect(RetryAfter.parse("-5", now: now, cap: .seconds(600)) == nil)
        #expect(RetryAfter.parse("1.5", now: now, cap: .seconds(600)) == nil)
    }

    @Test func httpDateIsRelativeToNowAndCapped() {
        #expect(RetryAfter.parse("Sun, 06 Nov 1994 08:51:07 GMT", now: now, cap: .seconds(600)) == .seconds(90))
        #expect(RetryAfter.parse("Sun, 06 Nov 1994 08:00:00 GMT", now: now, cap: .seconds(600)) == .zero)
        #expect(RetryAfter.parse("Mon, 07 Nov 1994 08:49:37 GMT", now: now, cap: .seconds(600)) == .seconds(600))
    }
}
