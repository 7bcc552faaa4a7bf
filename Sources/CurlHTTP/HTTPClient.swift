/// An async HTTP client on libcurl: one engine thread drives all transfers; safe to share across tasks.
public final class HTTPClient: Sendable {
    /// How requests reach the network.
    public enum ProxySettings: Sendable, Hashable {
        /// Connect directly and ignore proxy environment variables.
        case none
        /// Use libcurl's `http_proxy`/`https_proxy`/`no_proxy` environment variables.
        case environment
        /// Use this proxy URL, bypassing it for the comma-separated `noProxy` hosts.
        case url(String, noProxy: String? = nil)
    }

    /// Client-wide settings.
    public struct Configuration: Sendable {
        /// Proxy selection for every request.
        public var proxy: ProxySettings
        /// The `User-Agent` header value.
        public var userAgent: String

        /// Creates a configuration; direct connections by default.
        public init(proxy: ProxySettings = .none, userAgent: String = "lbs-gateway") {
            self.proxy = proxy
            self.userAgent = userAgent
        }
    }

    /// The settings this client was created with.
    public let configuration: Configuration
    private let engine: CurlEngine

    /// Starts the client's engine thread.
    public init(configuration: Configuration = Configuration()) throws(HTTPError) {
        self.configuration = configuration
        engine = try CurlEngine()
    }

    deinit {
        engine.stop()
    }

    /// Performs one request; any HTTP status is a response, transport failures throw `HTTPError`.
    /// Cancelling the calling task aborts the transfer and throws `.cancelled`.
    public func send(_ request: HTTPClientRequest) async throws(HTTPError) -> HTTPClientResponse {
        let transfer = try Transfer.makeRequest(request, configuration: configuration)
        switch try await run(transfer) {
        case .response(let response):
            return response
        case .publicKeyPin:
            throw HTTPError(kind: .other(-1), message: "unexpected transfer outcome")
        }
    }

    /// Connects once to an `https://` URL without verifying it and returns the server key's
    /// SubjectPublicKeyInfo SHA-256 as base64, for trust-on-first-use with `TLSTrust.pinned`.
    /// Sends no request. The caller must confirm the key (e.g. with the operator) before trusting it.
    public func fetchPublicKeyPin(url: String, connectTimeout: Duration = .seconds(5)) async throws(HTTPError) -> String {
        let transfer = try Transfer.makePublicKeyPinFetch(url: url, connectTimeout: connectTimeout, configuration: configuration)
        switch try await run(transfer) {
        case .publicKeyPin(let pin):
            return pin
        case .response:
            throw HTTPError(kind: .other(-1), message: "unexpected transfer outcome")
        }
    }

    /// Stops the engine; in-flight and later requests fail with `.cancelled`.
    public func shutdown() {
        engine.stop()
    }

    private func run(_ transfer: Transfer) async throws(HTTPError) -> TransferOutcome {
        let engine = engine
        do {
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    if !engine.submit(transfer, continuation: continuation) {
                        continuation.resume(throwing: HTTPError(kind: .cancelled, message: "the HTTP client was shut down"))
                    }
                }
            } onCancel: {
                engine.cancel(transfer)
            }
        } catch let error as HTTPError {
            throw error
        } catch {
            throw HTTPError(kind: .other(-1), message: "unexpected error: \(error)")
        }
    }
}

extension HTTPClient {
    /// Loads libcurl (it is loaded when the first client starts, not linked) and says whether that worked: "loads",
    /// or why not. For `lbs-gateway self-test`, so an install without libcurl fails there, not at a vendor's first poll.
    public static func libraryCheck() -> String {
        do {
            try CurlGlobal.initialize()
            return "loads"
        } catch {
            return error.message
        }
    }
}
