import FlyingFox
import SimulatorKit
import Synchronization
import Foundation

/// A Tesla Backup Gateway on loopback (plain HTTP: the gateway's TLS is tested with `TLSFront`): the customer
/// login with bearer token and cookies, the recorded JSON of a real gateway (`Tests/Fixtures/powerwall`),
/// and the traps of the real one: 401 `Token Expired`, 401 `bad credentials`, 429, 503, 502 with an empty
/// body (sitemaster stopped), HTML error pages, slow answers, and the Powerwall 3's 404 for every path but
/// the aggregates, the state of energy and the grid status.
public final class PowerwallSimulator: Sendable {
    public enum Model: String, Sendable {
        /// Backup Gateway 2 / Powerwall+: the full local API.
        case powerwall2
        /// Powerwall 3 on the wired LAN: aggregates, soe and grid status only.
        case powerwall3
    }

    /// One answer in place of the normal one, for the next matching requests.
    public enum Fault: Sendable, Equatable {
        case rateLimited(retryAfter: Int?)
        case serviceUnavailable
        /// 502 with an empty body: the sitemaster is stopped.
        case sitemasterStopped
        case htmlError(status: Int)
        case slow(seconds: Double)
        case malformedJSON
    }

    public struct Configuration: Sendable {
        public var password: String
        /// The folder of recorded responses (`meters_aggregates.json`, `grid_status.json`, `operation.json` …).
        public var fixtures: String
        public var model: Model
        /// Whether `POST /api/operation` is accepted from the customer login (old firmware) or refused with 403.
        public var customerMayWriteOperation: Bool
        public var port: UInt16

        public init(password: String, fixtures: String, model: Model = .powerwall2, customerMayWriteOperation: Bool = false, port: UInt16 = 0) {
            self.password = password
            self.fixtures = fixtures
            self.model = model
            self.customerMayWriteOperation = customerMayWriteOperation
            self.port = port
        }
    }

    public struct Counters: Sendable, Equatable {
        public var logins = 0
        public var failedLogins = 0
        public var requests: [String: Int] = [:]
        public var operationWrites = 0
    }

    private struct State {
        var model: Model
        var tokens: Set<String> = []
        var faults: [(fault: Fault, remaining: Int)] = []
        var counters = Counters()
        var stateOfEnergy = 42.415190953701725
        var gridStatus: String?
        /// `/api/operation`: its numbers and its mode.
        var operationNumbers: [String: Double] = [:]
        var realMode: String?
        var customerMayWriteOperation: Bool
    }

    public let configuration: Configuration
    private let server: SimServer
    private let state: Mutex<State>
    private let files: [String: String]

    public init(configuration: Configuration) throws {
        self.configuration = configuration
        server = SimServer(port: configuration.port)
        var files: [String: String] = [:]
        for name in ["meters_aggregates", "grid_status", "operation", "site_info", "status", "sitemaster", "powerwalls", "system_status", "meter_site", "meter_solar"] {
            let path = configuration.fixtures + "/" + name + ".json"
            guard let data = FileManager.default.contents(atPath: path) else {
                throw SimulatorError(code: "sim.fixture_missing", message: "cannot read \(path)")
            }
            files[name] = String(decoding: data, as: UTF8.self)
        }
        self.files = files
        var initial = State(model: configuration.model, customerMayWriteOperation: configuration.customerMayWriteOperation)
        if let object = files["operation"].flatMap({ try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }) {
            for (key, value) in object {
                if let mode = value as? String { initial.realMode = mode } else if let number = value as? Double { initial.operationNumbers[key] = number }
            }
            if let mode = object["real_mode"] as? String { initial.realMode = mode }
        }
        state = Mutex(initial)
    }

    // MARK: Control

    @discardableResult
    public func start() async throws(SimulatorError) -> UInt16 {
        try await server.start { [self] request in await handle(request) }
    }

    public func stop() async { await server.stop() }

    public var baseURL: String { get async { await server.baseURL } }

    public func inject(_ fault: Fault, times: Int = 1) {
        state.withLock { $0.faults.append((fault, times)) }
    }

    public func clearFaults() { state.withLock { $0.faults.removeAll() } }

    /// Ends every session: the next request with an old token or cookie gets 401 `Token Expired`.
    public func expireSessions() { state.withLock { $0.tokens.removeAll() } }

    public func setModel(_ model: Model) { state.withLock { $0.model = model } }

    public func setStateOfEnergy(_ percentage: Double) { state.withLock { $0.stateOfEnergy = percentage } }

    /// A raw Tesla grid status, e.g. `SystemIslandedActive` (nil: the recorded one).
    public func setGridStatus(_ raw: String?) { state.withLock { $0.gridStatus = raw } }

    public var counters: Counters { state.withLock { $0.counters } }

    // MARK: Serving

    private func handle(_ request: FlyingFox.HTTPRequest) async -> FlyingFox.HTTPResponse {
        let path = request.path
        let method = request.method.rawValue.uppercased()
        let fault: Fault? = state.withLock { state in
            state.counters.requests[path, default: 0] += 1
            guard let index = state.faults.indices.first else { return nil }
            let fault = state.faults[index].fault
            state.faults[index].remaining -= 1
            if state.faults[index].remaining <= 0 { state.faults.remove(at: index) }
            return fault
        }
        if let fault, let answer = await answer(fault) { return answer }

        if method == "POST", path == "/api/login/Basic" { return await login(request) }
        guard authorized(request) else {
            return SimResponse.json(#"{"code":401,"message":"Token Expired"}"#, status: HTTPStatusCode(401, phrase: "Unauthorized"))
        }
        let model = state.withLock { $0.model }
        switch (method, path) {
        case ("GET", "/api/meters/aggregates"):
            return SimResponse.json(files["meters_aggregates"] ?? "{}")
        case ("GET", "/api/system_status/soe"):
            return SimResponse.json(#"{"percentage":\#(state.withLock { $0.stateOfEnergy })}"#)
        case ("GET", "/api/system_status/grid_status"):
            if let raw = state.withLock({ $0.gridStatus }) { return SimResponse.json(#"{"grid_status":"\#(raw)","grid_services_active":false}"#) }
            return SimResponse.json(files["grid_status"] ?? "{}")
        case _ where model == .powerwall3:
            return notFound
        case ("GET", "/api/operation"):
            let text = state.withLock { state in
                var fields = state.operationNumbers.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }
                if let mode = state.realMode { fields.append("\"real_mode\":\"\(mode)\"") }
                return "{" + fields.joined(separator: ",") + "}"
            }
            return SimResponse.json(text)
        case ("POST", "/api/operation"):
            return await writeOperation(request)
        case ("GET", "/api/config/completed"):
            return SimResponse.json("{}", status: HTTPStatusCode(202, phrase: "Accepted"))
        case ("GET", let other) where other.hasPrefix("/api/"):
            let name = String(other.dropFirst("/api/".count)).replacingOccurrences(of: "/", with: "_")
            if let text = files[name] { return SimResponse.json(text) }
            return notFound
        default:
            return notFound
        }
    }

    private var notFound: FlyingFox.HTTPResponse {
        SimResponse.text("404 page not found", status: .notFound)
    }

    private func answer(_ fault: Fault) async -> FlyingFox.HTTPResponse? {
        switch fault {
        case .rateLimited(let retryAfter):
            var headers = HTTPHeaders()
            if let retryAfter { headers[HTTPHeader("Retry-After")] = String(retryAfter) }
            return SimResponse.json(#"{"code":429,"error":"Too Many Requests","message":"Rate limit exceeded"}"#,
                                    status: HTTPStatusCode(429, phrase: "Too Many Requests"), headers: headers)
        case .serviceUnavailable:
            return SimResponse.text("", status: HTTPStatusCode(503, phrase: "Service Unavailable"))
        case .sitemasterStopped:
            return SimResponse.empty(HTTPStatusCode(502, phrase: "Bad Gateway"))
        case .htmlError(let status):
            return SimResponse.htmlError(HTTPStatusCode(status, phrase: status == 500 ? "Internal Server Error" : "Error"))
        case .slow(let seconds):
            try? await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
            return nil
        case .malformedJSON:
            return SimResponse.json(#"{"site":{"instant_power":"#)
        }
    }

    private func login(_ request: FlyingFox.HTTPRequest) async -> FlyingFox.HTTPResponse {
        let body = (try? await request.bodyData) ?? Data()
        let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
        guard object?["username"] as? String == "customer", object?["password"] as? String == configuration.password else {
            state.withLock { $0.counters.failedLogins += 1 }
            return SimResponse.json(#"{"code":401,"error":"bad credentials","message":"Login Error"}"#, status: HTTPStatusCode(401, phrase: "Unauthorized"))
        }
        let token = "pw-" + UUID().uuidString.replacingOccurrences(of: "-", with: "")
        state.withLock { state in
            state.tokens.insert(token)
            state.counters.logins += 1
        }
        let text = #"{"email":"\#(object?["email"] as? String ?? "")","firstname":"Tesla","lastname":"Energy","roles":["Home_Owner"],"token":"\#(token)","provider":"Basic","loginTime":"2026-11-25T10:00:00.000000000+00:00"}"#
        var response = SimResponse.json(text)
        response.headers[HTTPHeader("Set-Cookie")] = "AuthCookie=\(token); Path=/; HttpOnly"
        return response
    }

    private func authorized(_ request: FlyingFox.HTTPRequest) -> Bool {
        var presented: [String] = []
        if let header = request.headers[.authorization], header.lowercased().hasPrefix("bearer ") {
            presented.append(String(header.dropFirst("bearer ".count)))
        }
        if let cookies = request.headers[HTTPHeader("Cookie")] {
            for part in cookies.split(separator: ";") {
                let pair = part.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                if pair.count == 2, pair[0] == "AuthCookie" { presented.append(pair[1]) }
            }
        }
        return state.withLock { state in presented.contains { state.tokens.contains($0) } }
    }

    private func writeOperation(_ request: FlyingFox.HTTPRequest) async -> FlyingFox.HTTPResponse {
        guard state.withLock({ $0.customerMayWriteOperation }) else {
            return SimResponse.json(#"{"code":403,"error":"User does not have adequate access rights","message":"Forbidden"}"#,
                                    status: HTTPStatusCode(403, phrase: "Forbidden"))
        }
        let body = (try? await request.bodyData) ?? Data()
        guard let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] else {
            return SimResponse.json(#"{"code":400,"error":"bad request"}"#, status: HTTPStatusCode(400, phrase: "Bad Request"))
        }
        let mode = object["real_mode"] as? String
        let reserve = object["backup_reserve_percent"] as? Double
        state.withLock { state in
            state.counters.operationWrites += 1
            if let mode { state.realMode = mode }
            if let reserve { state.operationNumbers["backup_reserve_percent"] = reserve }
        }
        return SimResponse.json("{}")
    }
}
