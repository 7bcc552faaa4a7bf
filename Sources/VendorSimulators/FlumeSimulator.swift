import FlyingFox
import Foundation
import SimulatorKit
import Synchronization

/// Flume's Personal API on loopback, from PyFlume's recorded answers (`Tests/Fixtures/flume`): the OAuth
/// password and refresh grants (`token.json`, client and user credentials checked), the device list
/// (`devices.json`), usage queries answered per `request_id` from a simulated meter that starts at
/// `query.json`'s values (gallons; converted when litres are asked for), and the active leak flag
/// (`leak.json`). Faults: an expired token (401 until the next grant), 429 with `Retry-After` and Flume's
/// message, 5xx, slow answers, truncated JSON.
public final class FlumeSimulator: Sendable {
    public struct Credentials: Sendable {
        public var clientID: String
        public var clientSecret: String
        public var username: String
        public var password: String

        public init(clientID: String, clientSecret: String, username: String, password: String) {
            self.clientID = clientID
            self.clientSecret = clientSecret
            self.username = username
            self.password = password
        }
    }

    public enum Fault: Sendable, Equatable {
        case rateLimited(retryAfter: Int)
        case serverError
        case slow(seconds: Double)
        case malformedJSON
    }

    /// The simulated meter, in US gallons as Flume keeps it.
    public struct Meter: Sendable {
        public var lastMinute: Double
        public var today: Double
        public var yesterday: Double?
        public var leak: Bool
    }

    private struct State {
        var faults: [Fault] = []
        var requests: [String: Int] = [:]
        var tokenValid = true
        var grants: [String: Int] = [:]
        var meter: Meter
        var queries: [[String: Any]] = []
    }

    public static let litresPerGallon = 3.785411784

    public let credentials: Credentials
    private let token: String
    private let refreshToken: String
    private let tokenAnswer: String
    private let devicesAnswer: String
    private let server: SimServer
    private let state: Mutex<State>

    public init(credentials: Credentials, fixtures: String, port: UInt16 = 0) throws {
        self.credentials = credentials
        server = SimServer(port: port)
        func read(_ name: String) throws -> String {
            guard let data = FileManager.default.contents(atPath: fixtures + "/" + name) else {
                throw SimulatorError(code: "sim.fixture_missing", message: "cannot read \(fixtures)/\(name)")
            }
            return String(decoding: data, as: UTF8.self)
        }
        tokenAnswer = try read("token.json")
        devicesAnswer = try read("devices.json")
        let tokenData = ((try JSONSerialization.jsonObject(with: Data(tokenAnswer.utf8)) as? [String: Any])?["data"] as? [[String: Any]])?.first
        token = tokenData?["access_token"] as? String ?? ""
        refreshToken = tokenData?["refresh_token"] as? String ?? ""
        let query = ((try JSONSerialization.jsonObject(with: Data(try read("query.json").utf8)) as? [String: Any])?["data"] as? [[String: Any]])?.first
        func value(_ id: String) -> Double { ((query?[id] as? [[String: Any]])?.first?["value"] as? Double) ?? 0 }
        let leak = ((try JSONSerialization.jsonObject(with: Data(try read("leak.json").utf8)) as? [String: Any])?["data"] as? [[String: Any]])?.first
        state = Mutex(State(meter: Meter(lastMinute: value("current_interval"), today: value("today"), yesterday: nil, leak: leak?["active"] as? Bool ?? false)))
    }

    @discardableResult
    public func start() async throws(SimulatorError) -> UInt16 {
        try await server.start { [self] request in await handle(request) }
    }

    public func stop() async { await server.stop() }

    public var baseURL: String { get async { await server.baseURL } }

    public func inject(_ fault: Fault) { state.withLock { $0.faults.append(fault) } }

    /// The issued access token is refused (401) until the next grant.
    public func expireToken() { state.withLock { $0.tokenValid = false } }

    public func updateMeter(_ change: @Sendable (inout Meter) -> Void) { state.withLock { change(&$0.meter) } }

    public var meter: Meter { state.withLock { $0.meter } }
    public var requests: [String: Int] { state.withLock { $0.requests } }
    /// Grants issued, by `grant_type`.
    public var grants: [String: Int] { state.withLock { $0.grants } }

    private func handle(_ request: FlyingFox.HTTPRequest) async -> FlyingFox.HTTPResponse {
        let path = request.path
        let fault: Fault? = state.withLock { state in
            state.requests[path, default: 0] += 1
            return state.faults.isEmpty ? nil : state.faults.removeFirst()
        }
        switch fault {
        case .rateLimited(let seconds)?:
            var headers = HTTPHeaders()
            headers[HTTPHeader("Retry-After")] = String(seconds)
            return failure(429, "Too many requests, please try again later.", headers: headers)
        case .serverError?:
            return failure(500, "Internal Server Error")
        case .slow(let seconds)?:
            try? await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
        case .malformedJSON?:
            return SimResponse.json(#"{"success":true,"data":[{"#)
        case nil:
            break
        }
        if path == "/oauth/token", request.method == .POST { return await grant(request) }
        guard request.headers[.authorization] == "Bearer \(token)", state.withLock({ $0.tokenValid }) else {
            return failure(401, "Invalid token")
        }
        let parts = path.split(separator: "/").map(String.init)
        // /users/{user}/devices, /users/{user}/devices/{device}/query, /users/{user}/devices/{device}/leaks/active
        guard parts.count >= 3, parts[0] == "users", parts[2] == "devices" else { return failure(404, "Record could not be found") }
        if parts.count == 3 { return SimResponse.json(devicesAnswer) }
        if parts.count == 5, parts[4] == "query", request.method == .POST { return await query(request) }
        if parts.count == 6, parts[4] == "leaks", parts[5] == "active" {
            let leak = state.withLock { $0.meter.leak }
            return envelope("[{\"active\":\(leak)}]")
        }
        return failure(404, "Record could not be found")
    }

    private func grant(_ request: FlyingFox.HTTPRequest) async -> FlyingFox.HTTPResponse {
        let body = (try? await request.bodyData) ?? Data()
        guard let fields = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any], let type = fields["grant_type"] as? String else {
            return failure(400, "Invalid request")
        }
        guard fields["client_id"] as? String == credentials.clientID, fields["client_secret"] as? String == credentials.clientSecret else {
            return failure(400, "Invalid client")
        }
        let accepted = switch type {
        case "password": fields["username"] as? String == credentials.username && fields["password"] as? String == credentials.password
        case "refresh_token": fields["refresh_token"] as? String == refreshToken
        default: false
        }
        guard accepted else { return failure(400, "Invalid credentials") }
        state.withLock { state in
            state.tokenValid = true
            state.grants[type, default: 0] += 1
        }
        return SimResponse.json(tokenAnswer)
    }

    /// Answers every query by its `request_id`: `last_minute`, `today`, `yesterday` from the meter.
    private func query(_ request: FlyingFox.HTTPRequest) async -> FlyingFox.HTTPResponse {
        let body = (try? await request.bodyData) ?? Data()
        guard let queries = ((try? JSONSerialization.jsonObject(with: body)) as? [String: Any])?["queries"] as? [[String: Any]], !queries.isEmpty else {
            return failure(400, "Invalid query")
        }
        let meter = state.withLock { $0.meter }
        var answer: [String] = []
        for query in queries {
            guard let id = query["request_id"] as? String, query["since_datetime"] is String, query["bucket"] is String else {
                return failure(400, "Invalid query")
            }
            let scale = (query["units"] as? String) == "LITERS" ? Self.litresPerGallon : 1
            let gallons: Double? = switch id {
            case "last_minute": meter.lastMinute
            case "today": meter.today
            case "yesterday": meter.yesterday
            default: nil
            }
            answer.append("\"\(id)\":" + (gallons.map { "[{\"value\":\($0 * scale)}]" } ?? "[]"))
        }
        return envelope("[{" + answer.joined(separator: ",") + "}]")
    }

    private func envelope(_ data: String) -> FlyingFox.HTTPResponse {
        SimResponse.json(#"{"success":true,"code":602,"message":"Request OK","http_code":200,"http_message":"OK","detailed":null,"data":\#(data),"count":1,"pagination":null}"#)
    }

    private func failure(_ status: Int, _ message: String, headers: HTTPHeaders = [:]) -> FlyingFox.HTTPResponse {
        let body = #"{"success":false,"code":610,"message":"\#(message)","http_code":\#(status),"http_message":"Error","detailed":null,"data":[],"count":0,"pagination":null}"#
        return SimResponse.json(body, status: HTTPStatusCode(status, phrase: "Error"), headers: headers)
    }
}
