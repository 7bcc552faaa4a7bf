import FlyingFox
import Foundation
import SimulatorKit
import Synchronization

/// The SolarEdge Monitoring API v2 on loopback, serving the recorded responses of a real site
/// (`Tests/Fixtures/solaredge`): `X-API-Key` checked, RFC 9457 problem+json errors, the per-minute rate-limit
/// headers and 429 with `Retry-After`, and 410 for every v1 path (retired in November 2026).
public final class SolarEdgeSimulator: Sendable {
    public struct Configuration: Sendable {
        public var apiKey: String
        public var fixtures: String
        public var port: UInt16

        public init(apiKey: String, fixtures: String, port: UInt16 = 0) {
            self.apiKey = apiKey
            self.fixtures = fixtures
            self.port = port
        }
    }

    public enum Fault: Sendable, Equatable {
        case rateLimited(retryAfter: Int)
        case serverError
        case htmlError
        /// Answers after a delay.
        case slow(seconds: Double)
        /// A truncated JSON body with status 200.
        case malformedJSON
    }

    private struct State {
        var faults: [Fault] = []
        var requests: [String: Int] = [:]
        /// Replaces the recorded overview (a site with a meter and a battery, as the day goes on).
        var overview: String?
    }

    public let configuration: Configuration
    /// The site id of the recorded responses.
    public let siteID: Int64
    private let server: SimServer
    private let files: [String: String]
    private let state = Mutex(State())

    public init(configuration: Configuration) throws {
        self.configuration = configuration
        server = SimServer(port: configuration.port)
        var files: [String: String] = [:]
        for name in ["sites", "energy", "overview", "devices"] {
            let path = configuration.fixtures + "/" + name + ".json"
            guard let data = FileManager.default.contents(atPath: path) else { throw SimulatorError(code: "sim.fixture_missing", message: "cannot read \(path)") }
            files[name] = String(decoding: data, as: UTF8.self)
        }
        self.files = files
        let overview = try JSONSerialization.jsonObject(with: Data((files["overview"] ?? "{}").utf8)) as? [String: Any]
        siteID = (overview?["siteId"] as? NSNumber)?.int64Value ?? 0
    }

    @discardableResult
    public func start() async throws(SimulatorError) -> UInt16 {
        try await server.start { [self] request in await handle(request) }
    }

    public func stop() async { await server.stop() }

    /// `http://127.0.0.1:<port>/v2`.
    public var baseURL: String { get async { await server.baseURL + "/v2" } }

    /// Serves `json` as the site's overview from now on (the recorded site has no meter: its flows are null).
    public func setOverview(_ json: String) { state.withLock { $0.overview = json } }

    public func inject(_ fault: Fault) { state.withLock { $0.faults.append(fault) } }

    public var requests: [String: Int] { state.withLock { $0.requests } }

    private func handle(_ request: FlyingFox.HTTPRequest) async -> FlyingFox.HTTPResponse {
        let path = request.path
        let fault: Fault? = state.withLock { state in
            state.requests[path, default: 0] += 1
            return state.faults.isEmpty ? nil : state.faults.removeFirst()
        }
        var limits = HTTPHeaders()
        limits[HTTPHeader("x-ratelimit-limit-minute")] = "10"
        limits[HTTPHeader("x-ratelimit-remaining-minute")] = "9"
        limits[HTTPHeader("via")] = "kong/3.7.1"
        if !path.hasPrefix("/v2/") {
            return problem(410, "Gone", "Monitoring API v1 was retired; use /v2", headers: limits)
        }
        guard request.headers[HTTPHeader("X-API-Key")] == configuration.apiKey else {
            return problem(401, "Unauthorized", "Invalid API key", headers: limits)
        }
        switch fault {
        case .rateLimited(let seconds)?:
            limits[HTTPHeader("Retry-After")] = String(seconds)
            limits[HTTPHeader("x-ratelimit-remaining-minute")] = "0"
            return problem(429, "Too Many Requests", "API rate limit exceeded", headers: limits)
        case .serverError?:
            return problem(500, "Internal Server Error", "Unexpected error", headers: limits)
        case .htmlError?:
            return SimResponse.htmlError(HTTPStatusCode(502, phrase: "Bad Gateway"))
        case .slow(let seconds)?:
            try? await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
        case .malformedJSON?:
            return SimResponse.json(#"{"unit":"WH","values":[{"timestamp":"#, headers: limits)
        case nil:
            break
        }
        let site = "/v2/sites/\(siteID)"
        switch path {
        case "/v2/sites": return SimResponse.json(files["sites"] ?? "{}", headers: limits)
        case site + "/energy": return SimResponse.json(files["energy"] ?? "{}", headers: limits)
        case site + "/overview": return SimResponse.json(state.withLock { $0.overview } ?? files["overview"] ?? "{}", headers: limits)
        case site + "/devices": return SimResponse.json(files["devices"] ?? "[]", headers: limits)
        default: return problem(404, "Not Found", "Unknown endpoint", headers: limits)
        }
    }

    private func problem(_ status: Int, _ title: String, _ detail: String, headers: HTTPHeaders) -> FlyingFox.HTTPResponse {
        let body = #"{"type":"https://se-api.stoplight.io/docs/monitoring","title":"\#(title)","status":\#(status),"detail":"\#(detail)","traceId":"6a8c6be5a734cb619608fb5e3936e5a4"}"#
        return SimResponse.text(body, status: HTTPStatusCode(status, phrase: title), contentType: "application/problem+json", headers: headers)
    }
}
