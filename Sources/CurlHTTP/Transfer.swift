import CCurl
import Synchronization
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What a finished transfer hands back to its caller.
enum TransferOutcome: Sendable {
    case response(HTTPClientResponse)
    case publicKeyPin(String)
}

/// One libcurl easy handle plus the buffers its callbacks fill.
///
/// Unchecked Sendable because ownership moves: the submitting task configures it, then (after the
/// engine lock hands it over) only the engine thread touches the handle and buffers until completion.
/// The cancel flag is the only state shared concurrently, and it is atomic.
final class Transfer: @unchecked Sendable {
    enum Purpose {
        case request
        case publicKeyPin
    }

    let easy: UnsafeMutableRawPointer
    let purpose: Purpose
    private let maxResponseBytes: Int
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer: UnsafeMutablePointer<CChar>
    private var body = Data()
    private var headers = HTTPHeaderFields()
    private var exceededSizeLimit = false
    private let cancelFlag = Atomic<Bool>(false)
    var continuation: CheckedContinuation<TransferOutcome, any Error>?

    var isCancelRequested: Bool { cancelFlag.load(ordering: .acquiring) }

    func requestCancel() {
        cancelFlag.store(true, ordering: .releasing)
    }

    /// Only through `HTTPClient`, whose engine loaded libcurl (`CurlGlobal`) before any transfer exists.
    private init(purpose: Purpose, maxResponseBytes: Int) throws(HTTPError) {
        guard let easy = lbs_curl_easy_init() else {
            throw HTTPError(kind: .other(Int(CURLE_FAILED_INIT.rawValue)), message: "curl_easy_init failed")
        }
        self.easy = easy
        self.purpose = purpose
        self.maxResponseBytes = maxResponseBytes
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
    }

    deinit {
        lbs_curl_easy_cleanup(easy)
        lbs_curl_slist_free_all(headerList)
        errorBuffer.deallocate()
    }

    /// Builds a configured handle for an HTTP request.
    static func makeRequest(_ request: HTTPClientRequest, configuration: HTTPClient.Configuration) throws(HTTPError) -> Transfer {
        guard request.maxResponseBytes >= 0 else {
            throw HTTPError(kind: .invalidRequest, message: "maxResponseBytes must not be negative")
        }
        let transfer = try Transfer(purpose: .request, maxResponseBytes: request.maxResponseBytes)
        try transfer.applyCommonOptions(
            url: request.url,
            connectTimeout: request.connectTimeout,
            timeout: request.timeout,
            configuration: configuration
        )
        try transfer.applyMethodAndBody(request)
        try transfer.applyHeaders(request)
        try transfer.applyTLS(request.tls)
        if request.maxResponseBytes > 0 {
            // Rejects an announced Content-Length early; 0 would mean "unlimited" to curl, so it is left unset
            // and the write callback enforces the limit.
            try transfer.set(CURLOPT_MAXFILESIZE_LARGE, offset: curl_off_t(request.maxResponseBytes))
        }
        if request.acceptsCompressedResponse {
            // "" lets curl offer every encoding it was built with and decode transparently.
            try transfer.set(CURLOPT_ACCEPT_ENCODING, string: "")
        }
        if let digest = request.digest {
            // CURLAUTH_DIGEST (1 << 1): the macro is a cast curl's Swift import does not carry.
            try transfer.set(CURLOPT_HTTPAUTH, long: 2)
            try transfer.set(CURLOPT_USERNAME, string: digest.user)
            try transfer.set(CURLOPT_PASSWORD, string: digest.password)
        }
        try transfer.set(CURLOPT_FOLLOWLOCATION, long: request.followsRedirects ? 1 : 0)
        if request.followsRedirects {
            try transfer.set(CURLOPT_MAXREDIRS, long: 5)
        }
        return transfer
    }

    /// Builds a handle that only connects (TLS handshake included) and records the peer certificate.
    static func makePublicKeyPinFetch(url: String, connectTimeout: Duration, configuration: HTTPClient.Configuration) throws(HTTPError) -> Transfer {
        guard url.lowercased().hasPrefix("https://") else {
            throw HTTPError(kind: .invalidRequest, message: "a public key pin can only be fetched from an https:// URL")
        }
        let transfer = try Transfer(purpose: .publicKeyPin, maxResponseBytes: 0)
        try transfer.applyCommonOptions(url: url, connectTimeout: connectTimeout, timeout: connectTimeout, configuration: configuration)
        try transfer.set(CURLOPT_CONNECT_ONLY, long: 1)
        try transfer.set(CURLOPT_CERTINFO, long: 1)
        // Trust on first use: the handshake must succeed against an unknown self-signed key so it can be
        // recorded; nothing is sent over this connection, and the caller decides whether to trust the key.
        try transfer.set(CURLOPT_SSL_VERIFYPEER, long: 0)
        try transfer.set(CURLOPT_SSL_VERIFYHOST, long: 0)
        return transfer
    }

    // MARK: Options

    private func applyCommonOptions(url: String, connectTimeout: Duration, timeout: Duration, configuration: HTTPClient.Configuration) throws(HTTPError) {
        // Signals are process-wide; a multi-threaded program must not let curl use them for timeouts.
        try set(CURLOPT_NOSIGNAL, long: 1)
        try set(CURLOPT_ERRORBUFFER, pointer: UnsafeMutableRawPointer(errorBuffer))
        try set(CURLOPT_URL, string: url)
        try set(CURLOPT_PROTOCOLS_STR, string: "http,https")
        try set(CURLOPT_REDIR_PROTOCOLS_STR, string: "http,https")
        try set(CURLOPT_CONNECTTIMEOUT_MS, long: Self.milliseconds(connectTimeout))
        try set(CURLOPT_TIMEOUT_MS, long: Self.milliseconds(timeout))
        try set(CURLOPT_USERAGENT, string: configuration.userAgent)
        switch configuration.proxy {
        case .none:
            // An empty proxy string also disables the http_proxy/https_proxy environment variables.
            try set(CURLOPT_PROXY, string: "")
        case .environment:
            break
        case .url(let proxyURL, let noProxy):
            try set(CURLOPT_PROXY, string: proxyURL)
            if let noProxy {
                try set(CURLOPT_NOPROXY, string: noProxy)
            }
        }

        let context = Unmanaged.passUnretained(self).toOpaque()
        try set(CURLOPT_WRITEDATA, pointer: context)
        try check(lbs_easy_setopt_data_callback(easy, CURLOPT_WRITEFUNCTION) { data, size, count, context in
            guard let context else { return 0 }
            return Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue().receiveBody(data, size * count)
        }, option: "WRITEFUNCTION")
        try set(CURLOPT_HEADERDATA, pointer: context)
        try check(lbs_easy_setopt_data_callback(easy, CURLOPT_HEADERFUNCTION) { data, size, count, context in
            guard let context else { return 0 }
            return Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue().receiveHeaderLine(data, size * count)
        }, option: "HEADERFUNCTION")
    }

    private func applyMethodAndBody(_ request: HTTPClientRequest) throws(HTTPError) {
        switch request.method {
        case .get where request.body == nil:
            try set(CURLOPT_HTTPGET, long: 1)
            return
        case .delete where request.body == nil:
            try set(CURLOPT_CUSTOMREQUEST, string: "DELETE")
            return
        default:
            break
        }
        let body = request.body ?? Data()
        try set(CURLOPT_POSTFIELDSIZE_LARGE, offset: curl_off_t(body.count))
        // COPYPOSTFIELDS makes curl own a copy, so the body need not outlive this call.
        if body.isEmpty {
            try set(CURLOPT_COPYPOSTFIELDS, string: "")
        } else {
            let result = body.withUnsafeBytes { bytes -> CURLcode in
                lbs_easy_setopt_pointer(easy, CURLOPT_COPYPOSTFIELDS, bytes.baseAddress.map { UnsafeMutableRawPointer(mutating: $0) })
            }
            try check(result, option: "COPYPOSTFIELDS")
        }
        if request.method != .post {
            try set(CURLOPT_CUSTOMREQUEST, string: request.method.rawValue)
        }
    }

    private func applyHeaders(_ request: HTTPClientRequest) throws(HTTPError) {
        var lines: [String] = []
        for field in request.headers {
            guard Self.isValidHeaderName(field.name) else {
                throw HTTPError(kind: .invalidRequest, message: "invalid header name")
            }
            guard !field.value.utf8.contains(where: { $0 == 13 || $0 == 10 || $0 == 0 }) else {
                // The value may be a secret, so only the header name is reported.
                throw HTTPError(kind: .invalidRequest, message: "header \(field.name) has a line break in its value")
            }
            // "Name;" is curl's way to send a header with an empty value; "Name:" would remove it.
            lines.append(field.value.isEmpty ? "\(field.name);" : "\(field.name): \(field.value)")
        }
        if request.body != nil || request.method == .post || request.method == .put || request.method == .patch,
           !request.headers.contains("Content-Type") {
            // Without this curl labels every body application/x-www-form-urlencoded.
            lines.append("Content-Type:")
        }
        if !request.headers.contains("Expect") {
            // Servers that ignore 100-continue would cost a 1 s stall on larger bodies.
            lines.append("Expect:")
        }
        for line in lines {
            guard let appended = lbs_curl_slist_append(headerList, line) else {
                throw HTTPError(kind: .other(Int(CURLE_OUT_OF_MEMORY.rawValue)), message: "could not build the header list")
            }
            headerList = appended
        }
        try set(CURLOPT_HTTPHEADER, slist: headerList)
    }

    private func applyTLS(_ trust: TLSTrust) throws(HTTPError) {
        switch trust {
        case .systemDefault:
            try set(CURLOPT_SSL_VERIFYPEER, long: 1)
            try set(CURLOPT_SSL_VERIFYHOST, long: 2)
        case .pinned(let pin):
            guard let digest = Data(base64Encoded: pin), digest.count == 32 else {
                throw HTTPError(kind: .invalidRequest, message: "the TLS pin must be a base64 SHA-256 digest (32 bytes)")
            }
            // Self-signed device certs fail chain and name checks; the pin is checked regardless
            // (curl 7.88 OpenSSL backend), so the connection is bound to exactly this key.
            try set(CURLOPT_SSL_VERIFYPEER, long: 0)
            try set(CURLOPT_SSL_VERIFYHOST, long: 0)
            try set(CURLOPT_PINNEDPUBLICKEY, string: "sha256//\(pin)")
        }
    }

    // MARK: Callbacks (engine thread)

    private func receiveBody(_ data: UnsafeMutablePointer<CChar>?, _ length: Int) -> Int {
        guard length > 0, let data else { return 0 }
        guard body.count + length <= maxResponseBytes else {
            exceededSizeLimit = true
            return 0  // a short count aborts the transfer with CURLE_WRITE_ERROR
        }
        body.append(UnsafeBufferPointer(start: UnsafeRawPointer(data).assumingMemoryBound(to: UInt8.self), count: length))
        return length
    }

    private func receiveHeaderLine(_ data: UnsafeMutablePointer<CChar>?, _ length: Int) -> Int {
        guard let data else { return 0 }
        let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(data).assumingMemoryBound(to: UInt8.self), count: length)
        let line = String(decoding: bytes, as: UTF8.self)
        if line.hasPrefix("HTTP/") {
            // A new status line (1xx interim or a redirect hop): keep only the final response's headers.
            headers = HTTPHeaderFields()
            return length
        }
        guard let colon = line.firstIndex(of: ":") else { return length }
        let name = trimmedWhitespace(line[..<colon])
        let value = trimmedWhitespace(line[line.index(after: colon)...])
        headers.add(name: name, value: value)
        if HTTPHeaderFields.sameName(name, "Content-Length"), let announced = Int(value), announced > maxResponseBytes,
           purpose == .request {
            exceededSizeLimit = true
            return 0
        }
        return length
    }

    // MARK: Completion (engine thread)

    /// Resumes the caller with the outcome of a finished transfer.
    func complete(with code: CURLcode) {
        if code == CURLE_OK {
            switch purpose {
            case .request:
                resume(.success(.response(makeResponse())))
            case .publicKeyPin:
                resume(publicKeyPinResult())
            }
        } else {
            resume(.failure(makeError(code)))
        }
    }

    /// Resumes the caller with an error (cancellation, shutdown, engine failure).
    func fail(_ error: HTTPError) {
        resume(.failure(error))
    }

    private func resume(_ result: Result<TransferOutcome, HTTPError>) {
        guard let continuation else { return }
        self.continuation = nil
        continuation.resume(with: result.mapError { $0 as any Error })
    }

    private func makeResponse() -> HTTPClientResponse {
        var status = 0
        _ = lbs_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        var urlPointer: UnsafePointer<CChar>?
        _ = lbs_easy_getinfo_string(easy, CURLINFO_EFFECTIVE_URL, &urlPointer)
        let effectiveURL = urlPointer.map { String(cString: $0) } ?? ""
        return HTTPClientResponse(status: status, headers: headers, body: body, effectiveURL: effectiveURL)
    }

    private func publicKeyPinResult() -> Result<TransferOutcome, HTTPError> {
        var digest = [UInt8](repeating: 0, count: 32)
        let status = digest.withUnsafeMutableBufferPointer { buffer in
            lbs_leaf_spki_sha256(easy, buffer.baseAddress)
        }
        guard status == 0 else {
            return .failure(HTTPError(kind: .tls, message: "the server presented no readable certificate (status \(status))"))
        }
        return .success(.publicKeyPin(Data(digest).base64EncodedString()))
    }

    private func makeError(_ code: CURLcode) -> HTTPError {
        let summary = lbs_curl_easy_strerror(code).map { String(cString: $0) } ?? "curl error"
        let detail = String(cString: errorBuffer)
        let rawCode = Int(code.rawValue)
        if exceededSizeLimit || code == CURLE_FILESIZE_EXCEEDED {
            return HTTPError(kind: .responseTooLarge, message: "response exceeds the limit of \(maxResponseBytes) bytes", curlCode: rawCode)
        }
        let message = detail.isEmpty || detail == summary ? summary : "\(summary): \(detail)"
        // Bytes of the request handed to the socket: nonzero means the server may have received it.
        var requestSize = 0
        _ = lbs_easy_getinfo_long(easy, CURLINFO_REQUEST_SIZE, &requestSize)
        return HTTPError(kind: Self.kind(for: code), message: message, curlCode: rawCode, requestSent: requestSize > 0)
    }

    static func kind(for code: CURLcode) -> HTTPError.Kind {
        switch code {
        case CURLE_OPERATION_TIMEDOUT:
            .timeout
        // A connection the peer reset or closed mid-request (a vendor restarting, a proxy dropping us)
        // means the same to a caller as one that was refused: the vendor is not reachable right now.
        case CURLE_COULDNT_CONNECT, CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_GOT_NOTHING:
            .connectFailed
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            .dnsFailed
        case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
            .pinMismatch
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
             CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_CRL_BADFILE, CURLE_SSL_INVALIDCERTSTATUS,
             CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_ENGINE_INITFAILED, CURLE_USE_SSL_FAILED:
            .tls
        case CURLE_FILESIZE_EXCEEDED:
            .responseTooLarge
        case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL, CURLE_BAD_FUNCTION_ARGUMENT:
            .invalidRequest
        default:
            .other(Int(code.rawValue))
        }
    }

    // MARK: Helpers

    private static func milliseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        let total = seconds.multipliedReportingOverflow(by: 1000)
        guard !total.overflow else { return Int.max }
        // Zero means "no limit" to curl, so round tiny positive limits up to 1 ms.
        return max(1, Int(total.partialValue + attoseconds / 1_000_000_000_000_000))
    }

    private static func isValidHeaderName(_ name: String) -> Bool {
        // RFC 9110 token characters.
        !name.isEmpty && name.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                true
            default:
                "!#$%&'*+-.^_`|~".utf8.contains(byte)
            }
        }
    }

    private func set(_ option: CURLoption, long value: Int) throws(HTTPError) {
        try check(lbs_easy_setopt_long(easy, option, value), option: option)
    }

    private func set(_ option: CURLoption, string value: String) throws(HTTPError) {
        // curl copies string options (except POSTFIELDS), so a temporary C string is enough.
        try check(value.withCString { lbs_easy_setopt_string(easy, option, $0) }, option: option)
    }

    private func set(_ option: CURLoption, pointer value: UnsafeMutableRawPointer?) throws(HTTPError) {
        try check(lbs_easy_setopt_pointer(easy, option, value), option: option)
    }

    private func set(_ option: CURLoption, offset value: curl_off_t) throws(HTTPError) {
        try check(lbs_easy_setopt_off_t(easy, option, value), option: option)
    }

    private func set(_ option: CURLoption, slist value: UnsafeMutablePointer<curl_slist>?) throws(HTTPError) {
        try check(lbs_easy_setopt_slist(easy, option, value), option: option)
    }

    private func check(_ result: CURLcode, option: CURLoption) throws(HTTPError) {
        try check(result, option: "option \(option.rawValue)")
    }

    private func check(_ result: CURLcode, option: String) throws(HTTPError) {
        guard result == CURLE_OK else {
            let summary = lbs_curl_easy_strerror(result).map { String(cString: $0) } ?? "curl error"
            let kind: HTTPError.Kind = result == CURLE_UNKNOWN_OPTION || result == CURLE_NOT_BUILT_IN
                ? .other(Int(result.rawValue)) : .invalidRequest
            throw HTTPError(kind: kind, message: "could not set \(option): \(summary)", curlCode: Int(result.rawValue))
        }
    }
}
