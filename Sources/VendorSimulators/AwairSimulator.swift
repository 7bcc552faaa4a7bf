import FlyingFox
import Foundation
import SimulatorKit
import Synchronization

/// Awair on loopback, replaying python_awair's recorded cassettes (`Tests/Fixtures/awair`).
/// - `.cloud(token:)`: the Awair Home developer API under `/v1`: `Authorization: Bearer <token>` checked (a
///   wrong one gets the recorded 401 text/plain), `/users/self`, the device list and each device's latest
///   reading as recorded; an unknown path gets the recorded 404 text/plain.
/// - `.local(host:)`: one monitor's Local API (`/settings/config/data`, `/air-data/latest`), no authentication.
/// Faults replace the next answer: 429 with `Retry-After`, a 500, a slow answer, truncated JSON, and the
/// cloud's "Too many requests" sent as a 200 with an `errors` array.
public final class AwairSimulator: Sendable {
    public enum Mode: Sendable, Equatable {
        case cloud(token: String)
        case local(host: String)
    }

    public enum Fault: Sendable, Equatable {
        case rateLimited(retryAfter: Int)
        case serverError
        case slow(seconds: Double)
        case malformedJSON
        case quotaErrorBody
    }

    private struct State {
        var faults: [Fault] = []
        var requests: [String: Int] = [:]
    }

    public let mode: Mode
    private let routes: [String: Cassette.Interaction]
    private let refused: Cassette.Interaction?
    private let missing: Cassette.Interaction?
    private let server: SimServer
    private let state = Mutex(State())

    /// `folder`: the cassettes (`Tests/Fixtures/awair`).
    public init(mode: Mode, folder: String, port: UInt16 = 0) throws {
        self.mode = mode
        server = SimServer(port: port)
        var routes: [String: Cassette.Interaction] = [:]
        switch mode {
        case .cloud:
            for name in ["user", "devices", "latest"] {
                for interaction in try Cassette(path: folder + "/\(name).yaml").interactions where interaction.status == 200 {
                    // Served under /v1 as recorded, without the query (the gateway sends ?fahrenheit=false).
                    routes[Self.path(of: interaction.target)] = interaction
                }
            }
            refused = try Cassette(path: folder + "/bad_auth.yaml").interactions.first
            missing = try Cassette(path: folder + "/not_found.yaml").interactions.first
        case .local(let host):
            for name in ["latest_local", "local_devices"] {
                // The first recording of a path wins: latest_local.yaml has the reading and the settings of one session.
                for interaction in try Cassette(path: folder + "/\(name).yaml").interactions where interaction.host == host {
                    if routes[Self.path(of: interaction.target)] == nil { routes[Self.path(of: interaction.target)] = interaction }
                }
            }
            refused = nil
            missing = nil
            guard routes["/settings/config/data"] != nil else {
                throw SimulatorError(code: "sim.fixture_missing", message: "no recorded monitor \(host) in \(folder)")
            }
        }
        self.routes = routes
    }

    static func path(of target: String) -> String { String(target.prefix { $0 != "?" }) }

    @discardableResult
    public func start() async throws(SimulatorError) -> UInt16 {
        try await server.start { [self] request in await handle(request) }
    }

    public func stop() async { await server.stop() }

    /// The cloud's base (`http://127.0.0.1:<port>/v1`) or the monitor's (`http://127.0.0.1:<port>`).
    public var baseURL: String {
        get async {
            if case .cloud = mode { return await server.baseURL + "/v1" }
            return await server.baseURL
        }
    }

    public func inject(_ fault: Fault) { state.withLock { $0.faults.append(fault) } }

    public var requests: [String: Int] { state.withLock { $0.requests } }

    private func handle(_ request: FlyingFox.HTTPRequest) async -> FlyingFox.HTTPResponse {
        let path = request.path
        let fault: Fault? = state.withLock { state in
            state.requests[path, default: 0] += 1
            return state.faults.isEmpty ? nil : state.faults.removeFirst()
        }
        if case .cloud(let token) = mode, request.headers[.authorization] != "Bearer \(token)" {
            return refused.map(Self.replay) ?? SimResponse.text("The supplied authentication is invalid", status: .unauthorized)
        }
        switch fault {
        case .rateLimited(let seconds)?:
            var headers = HTTPHeaders()
            headers[HTTPHeader("Retry-After")] = String(seconds)
            return SimResponse.text("Too many requests", status: HTTPStatusCode(429, phrase: "Too Many Requests"), headers: headers)
        case .serverError?:
            return SimResponse.text("Internal Server Error", status: .internalServerError)
        case .slow(let seconds)?:
            try? await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
        case .malformedJSON?:
            return SimResponse.json(#"{"data":[{"timestamp":"#)
        case .quotaErrorBody?:
            return SimResponse.json(#"{"errors":[{"message":"Too many requests during the past 24 hours"}]}"#)
        case nil:
            break
        }
        guard let interaction = routes[path] else {
            return missing.map(Self.replay) ?? SimResponse.text("The requested resource could not be found.", status: .notFound)
        }
        return Self.replay(interaction)
    }

    /// The recorded answer: status, content type and the other headers that matter, body as recorded.
    static func replay(_ interaction: Cassette.Interaction) -> FlyingFox.HTTPResponse {
        var headers = HTTPHeaders()
        for name in ["WWW-Authenticate", "Cache-Control"] {
            if let value = interaction.headers.first(where: { $0.key.caseInsensitiveCompare(name) == .orderedSame })?.value {
                headers[HTTPHeader(name)] = value
            }
        }
        let contentType = interaction.headers.first { $0.key.caseInsensitiveCompare("Content-Type") == .orderedSame }?.value ?? "text/plain"
        return SimResponse.text(interaction.body, status: HTTPStatusCode(interaction.status, phrase: ""), contentType: contentType, headers: headers)
    }
}
