import FlyingFox
import SimulatorKit
import Synchronization
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The simulated backend: state, routes, faults and counters. Thread-safe through one lock.
final class SimulatorCore: Sendable {
    private struct State {
        var devices: [SimJSON]
        var tokens: [String: Date] = [:]
        var faults: [FaultRule] = []
        var counters = SimulatorCounters()
        var serverErrorSequence = 0
    }

    let configuration: ConsciousnessSimulator.Configuration
    private let lifecycle: SimServer
    private let state: Mutex<State>
    private let lateQueue = LateQueue()

    init(configuration: ConsciousnessSimulator.Configuration, lifecycle: SimServer) {
        self.configuration = configuration
        self.lifecycle = lifecycle
        let seededAt = localISOTimestamp(secondsSince1970: configuration.now().timeIntervalSince1970)
        state = Mutex(State(devices: SeedDevices.make(lastSeen: seededAt)))
    }

    // MARK: Control surface

    func inject(_ rule: FaultRule) {
        state.withLock { $0.faults.append(rule) }
    }

    func clearFaults() {
        state.withLock { $0.faults.removeAll() }
    }

    func expireAllTokens() {
        state.withLock { $0.tokens.removeAll() }
    }

    var counters: SimulatorCounters {
        state.withLock { $0.counters }
    }

    func resetCounters() {
        state.withLock { $0.counters = SimulatorCounters() }
    }

    func devicesJSON() -> String {
        state.withLock { SimJSON.array($0.devices).serialized() }
    }

    func addDevice(_ device: SimJSON) {
        state.withLock { $0.devices.append(device) }
    }

    func goDown(for duration: Duration) async {
        await lifecycle.stop()
        let lifecycle = lifecycle
        let handler = self.handler
        Task {
            try? await Task.sleep(for: duration)
            _ = try? await lifecycle.start(handler: handler)
        }
    }

    // MARK: Request handling

    /// What the server calls for every request.
    var handler: SimServer.Handler {
        { [self] request in await handle(request) }
    }

    private enum Route {
        case login
        case listDevices
        case control(String)
        case batchControl
        case consciousnessStatus
        case emotions
        case health
        case methodNotAllowed
        case notFound

        var requiresAuth: Bool {
            switch self {
            case .listDevices, .control, .batchControl, .consciousnessStatus, .emotions: true
            case .login, .health, .methodNotAllowed, .notFound: false
            }
        }
    }

    func handle(_ request: FlyingFox.HTTPRequest) async -> FlyingFox.HTTPResponse {
        let method = request.method.rawValue.uppercased()
        let path = request.path
        if path.hasPrefix("/_sim/") {
            return await handleAdmin(request, method: method, path: path)
        }
        let route = Self.route(method: method, path: path)
        let fault = state.withLock { state -> SimulatorFault? in
            state.counters.requests += 1
            state.counters.requestsByRoute["\(method) \(path)", default: 0] += 1
            return Self.takeFault(from: &state, method: method, path: path, requiresAuth: route.requiresAuth)
        }

        if let fault {
            switch fault {
            case .slow(let delay):
                try? await Task.sleep(for: delay)
            case .late(let delay):
                return await late(route: route, request: request, delay: delay)
            case .unapplied(let delay):
                if route.requiresAuth, let rejection = authenticate(request) { return rejection }
                try? await Task.sleep(for: delay)
                return unapplied(route: route, body: (try? await request.bodyData) ?? Data())
            case .echoInput422:
                let body = (try? await request.bodyData) ?? Data()
                return Self.echoInput(body)
            default:
                if let response = faultResponse(fault) { return response }
            }
        }

        let response = await respond(to: route, request: request)
        if case .malformedJSON? = fault {
            return await Self.truncated(response)
        }
        return response
    }

    private static func takeFault(from state: inout State, method: String, path: String, requiresAuth: Bool) -> SimulatorFault? {
        guard let index = state.faults.firstIndex(where: { rule in
            guard rule.match.matches(method: method, path: path) else { return false }
            // A token fault only makes sense where a token is checked.
            if case .expiredToken = rule.fault { return requiresAuth }
            return true
        }) else { return nil }
        let fault = state.faults[index].fault
        if let remaining = state.faults[index].remaining {
            if remaining <= 1 {
                state.faults.remove(at: index)
            } else {
                state.faults[index].remaining = remaining - 1
            }
        }
        state.counters.faultsServed += 1
        return fault
    }

    private func faultResponse(_ fault: SimulatorFault) -> FlyingFox.HTTPResponse? {
        switch fault {
        case .serverError:
            let codes = [500, 502, 503]
            let code = state.withLock { state in
                defer { state.serverErrorSequence += 1 }
                return codes[state.serverErrorSequence % codes.count]
            }
            return Self.json(code, .object([("detail", .string(Self.phrase(code)))]))
        case .rateLimit(let seconds):
            var response = Self.json(429, .object([("detail", .string("Too Many Requests"))]))
            response.headers[HTTPHeader("Retry-After")] = String(seconds)
            return response
        case .htmlError:
            let html = """
                <html>\r
                <head><title>502 Bad Gateway</title></head>\r
                <body>\r
                <center><h1>502 Bad Gateway</h1></center>\r
                <hr><center>nginx/1.22.1</center>\r
                </body>\r
                </html>\r

                """
            return FlyingFox.HTTPResponse(
                statusCode: HTTPStatusCode(502, phrase: "Bad Gateway"),
                headers: [.contentType: "text/html", HTTPHeader("Server"): "nginx/1.22.1"],
                body: Data(html.utf8)
            )
        case .expiredToken:
            return Self.json(401, .object([("detail", .string("Invalid token"))]))
        case .echoCredentials401:
            let detail = "Invalid credentials for \(configuration.username) / \(configuration.password)"
            return Self.json(401, .object([("detail", .string(detail))]))
        case .echoPasswordHTML500:
            let html = """
                <!DOCTYPE html><html><head><title>500 Internal Server Error</title></head><body>
                <h1>Internal Server Error</h1><p>Traceback: settings.ADMIN_PASSWORD = &#39;\(configuration.password)&#39;</p>
                <pre>password=\(configuration.password)</pre></body></html>
                """
            return FlyingFox.HTTPResponse(
                statusCode: HTTPStatusCode(500, phrase: "Internal Server Error"), headers: [.contentType: "text/html"],
                body: Data(html.utf8)
            )
        case .slow, .malformedJSON, .late, .echoInput422, .unapplied:
            return nil
        }
    }

    /// Pydantic's 422 with the whole request body as `input`, as FastAPI sends for a body that fails validation.
    private static func echoInput(_ body: Data) -> FlyingFox.HTTPResponse {
        let input: SimJSON = .string(String(decoding: body, as: UTF8.self))
        return json(422, .object([("detail", .array([.object([
            ("type", .string("value_error")), ("loc", .array([.string("body")])),
            ("msg", .string("Value error, rejected")), ("input", input),
        ])]))]))
    }

    /// A `late` request: checked and read now, applied and answered after `delay`, after every late request
    /// that arrived before it. The work runs in its own task, so a client that gave up does not cancel it.
    private func late(route: Route, request: FlyingFox.HTTPRequest, delay: Duration) async -> FlyingFox.HTTPResponse {
        if route.requiresAuth, let rejection = authenticate(request) { return rejection }
        let body = (try? await request.bodyData) ?? Data()
        let deadline = ContinuousClock.now + delay
        let work = await lateQueue.schedule { [self] in
            try? await Task.sleep(until: deadline, clock: .continuous)
            return respond(to: route, body: body)
        }
        return await work.value
    }

    private static func route(method: String, path: String) -> Route {
        let parts = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        func only(_ allowed: String, _ route: Route) -> Route {
            method == allowed ? route : .methodNotAllowed
        }
        switch parts {
        case ["health"]:
            return only("GET", .health)
        case ["api", "v1", "auth", "login"]:
            return only("POST", .login)
        case ["api", "v1", "devices"]:
            return only("GET", .listDevices)
        case ["api", "v1", "devices", "batch-control"]:
            return only("POST", .batchControl)
        case _ where parts.count == 5 && parts[0] == "api" && parts[1] == "v1" && parts[2] == "devices" && parts[4] == "control":
            return only("PUT", .control(parts[3]))
        case ["api", "v1", "consciousness", "status"]:
            return only("GET", .consciousnessStatus)
        case ["api", "v1", "consciousness", "emotions"]:
            return only("GET", .emotions)
        default:
            return .notFound
        }
    }

    private func respond(to route: Route, request: FlyingFox.HTTPRequest) async -> FlyingFox.HTTPResponse {
        if route.requiresAuth, let rejection = authenticate(request) {
            return rejection
        }
        let body = (try? await request.bodyData) ?? Data()
        return respond(to: route, body: body)
    }

    /// The route's answer once the request is authenticated and its body read.
    private func respond(to route: Route, body: Data) -> FlyingFox.HTTPResponse {
        switch route {
        case .login:
            return login(body)
        case .listDevices:
            let devices = state.withLock { $0.devices }
            return Self.json(200, .object([("devices", .array(devices)), ("total", .int(devices.count))]))
        case .control(let id):
            return control(deviceID: id, body: body)
        case .batchControl:
            return batchControl(body)
        case .consciousnessStatus:
            let activeDevices = state.withLock { $0.devices.count }
            return Self.json(200, .object([
                ("status", .string("active")),
                ("awareness_level", .double(0.85)),
                ("emotional_state", .object([("primary", .string("calm")), ("arousal", .double(0.3)), ("valence", .double(0.7))])),
                ("active_devices", .int(activeDevices)),
                ("safla_loops", .int(3)),
                ("last_update", .string(timestamp())),
            ]))
        case .emotions:
            return Self.json(200, .object([
                ("current", .object([("primary_emotion", .string("calm")), ("arousal", .double(0.3)), ("valence", .double(0.7))])),
            ]))
        case .health:
            return Self.json(200, .object([
                ("status", .string("healthy")), ("timestamp", .string(timestamp())), ("service", .string("consciousness-system")),
            ]))
        case .methodNotAllowed:
            return Self.json(405, .object([("detail", .string("Method Not Allowed"))]))
        case .notFound:
            return Self.json(404, .object([("detail", .string("Not Found"))]))
        }
    }

    private func authenticate(_ request: FlyingFox.HTTPRequest) -> FlyingFox.HTTPResponse? {
        guard let header = request.headers[.authorization], header.lowercased().hasPrefix("bearer ") else {
            return Self.json(401, .object([("detail", .string("Authentication required"))]))
        }
        let token = header.dropFirst("bearer ".count).filter { $0 != " " && $0 != "\t" }
        let now = configuration.now()
        let valid = state.withLock { state in
            guard let expiry = state.tokens[String(token)] else { return false }
            if expiry <= now {
                state.tokens[String(token)] = nil
                return false
            }
            return true
        }
        return valid ? nil : Self.json(401, .object([("detail", .string("Invalid token"))]))
    }

    private struct LoginBody: Decodable {
        var username: String
        var password: String
    }

    private func login(_ body: Data) -> FlyingFox.HTTPResponse {
        guard let credentials = try? JSONDecoder().decode(LoginBody.self, from: body) else {
            return Self.validationError(field: "username")
        }
        guard credentials.username == configuration.username, credentials.password == configuration.password else {
            state.withLock { $0.counters.failedLogins += 1 }
            return Self.json(401, .object([("detail", .string("Invalid credentials"))]))
        }
        let token = Self.makeToken()
        let expiry = configuration.now().addingTimeInterval(Double(configuration.expiresIn))
        state.withLock { state in
            state.tokens[token] = expiry
            state.counters.logins += 1
        }
        return Self.json(200, .object([
            ("access_token", .string(token)), ("token_type", .string("Bearer")), ("expires_in", .int(configuration.expiresIn)),
        ]))
    }

    private struct ControlBody: Decodable {
        var action: String
    }

    private func control(deviceID: String, body: Data) -> FlyingFox.HTTPResponse {
        guard let command = try? JSONDecoder().decode(ControlBody.self, from: body) else {
            return Self.validationError(field: "action")
        }
        guard let device = apply(action: command.action, to: deviceID) else {
            return Self.json(404, .object([("detail", .string("Device not found"))]))
        }
        return Self.json(200, .object([("status", .string("success")), ("device", device)]))
    }

    private struct BatchBody: Decodable {
        struct Item: Decodable {
            var deviceID: String?
            var action: String?

            enum CodingKeys: String, CodingKey {
                case deviceID = "device_id"
                case action
            }
        }

        var devices: [Item]
    }

    private func batchControl(_ body: Data) -> FlyingFox.HTTPResponse {
        guard let batch = try? JSONDecoder().decode(BatchBody.self, from: body) else {
            return Self.validationError(field: "devices")
        }
        let results: [SimJSON] = batch.devices.map { item in
            let idValue: SimJSON = item.deviceID.map { .string($0) } ?? .null
            guard let id = item.deviceID, apply(action: item.action ?? "", to: id) != nil else {
                return .object([("device_id", idValue), ("status", .string("error")), ("message", .string("Device not found"))])
            }
            return .object([("device_id", idValue), ("status", .string("success"))])
        }
        return Self.json(200, .object([("results", .array(results))]))
    }

    /// The `unapplied` fault: control requests are answered as carried out but change nothing; other routes as usual.
    private func unapplied(route: Route, body: Data) -> FlyingFox.HTTPResponse {
        switch route {
        case .control(let id):
            let device = state.withLock { state -> SimJSON? in
                guard let device = state.devices.first(where: { $0["id"] == .string(id) }) else { return nil }
                state.counters.controlCalls[SimulatorCounters.ControlKey(deviceID: id, action: Self.action(in: body)), default: 0] += 1
                return device
            }
            guard let device else { return Self.json(404, .object([("detail", .string("Device not found"))])) }
            return Self.json(200, .object([("status", .string("success")), ("device", device)]))
        case .batchControl:
            guard let batch = try? JSONDecoder().decode(BatchBody.self, from: body) else { return Self.validationError(field: "devices") }
            let results: [SimJSON] = batch.devices.map { item in
                state.withLock { state in
                    state.counters.controlCalls[SimulatorCounters.ControlKey(deviceID: item.deviceID ?? "", action: item.action ?? ""), default: 0] += 1
                }
                return .object([("device_id", item.deviceID.map { .string($0) } ?? .null), ("status", .string("success"))])
            }
            return Self.json(200, .object([("results", .array(results))]))
        default:
            return respond(to: route, body: body)
        }
    }

    private static func action(in body: Data) -> String {
        (try? JSONDecoder().decode(ControlBody.self, from: body))?.action ?? ""
    }

    /// Executes an action; returns the updated device, or nil for an unknown id.
    private func apply(action: String, to deviceID: String) -> SimJSON? {
        let now = timestamp()
        return state.withLock { state -> SimJSON? in
            guard let index = state.devices.firstIndex(where: { $0["id"] == .string(deviceID) }) else { return nil }
            state.counters.controlCalls[SimulatorCounters.ControlKey(deviceID: deviceID, action: action), default: 0] += 1
            var device = state.devices[index]
            // Like the real server: turn_on/turn_off set `status` only (a light's `power` property stays as seeded);
            // other actions answer success but change nothing.
            let status: String? = switch action {
            case "turn_on": "active"
            case "turn_off": "inactive"
            default: nil
            }
            if let status {
                device = device.setting("status", to: .string(status))
                device = device.setting("last_seen", to: .string(now))
                state.devices[index] = device
            }
            return device
        }
    }

    // MARK: Admin routes (/_sim/*)

    private struct FaultBody: Decodable {
        var fault: String
        var count: Int?
        var untilCleared: Bool?
        var retryAfter: Int?
        var delayMs: Int?
        var seconds: Double?
        var path: String?
        var method: String?

        enum CodingKeys: String, CodingKey {
            case fault, count, seconds, path, method
            case untilCleared = "until_cleared"
            case retryAfter = "retry_after"
            case delayMs = "delay_ms"
        }
    }

    private func handleAdmin(_ request: FlyingFox.HTTPRequest, method: String, path: String) async -> FlyingFox.HTTPResponse {
        switch (method, path) {
        case ("POST", "/_sim/faults"):
            let body = (try? await request.bodyData) ?? Data()
            guard let spec = try? JSONDecoder().decode(FaultBody.self, from: body) else {
                return Self.json(400, .object([("detail", .string("expected {\"fault\": name, ...}"))]))
            }
            return await applyAdminFault(spec)
        case ("DELETE", "/_sim/faults"):
            clearFaults()
            return Self.json(200, .object([("status", .string("cleared"))]))
        case ("POST", "/_sim/expire-tokens"):
            expireAllTokens()
            return Self.json(200, .object([("status", .string("expired"))]))
        case ("GET", "/_sim/counters"):
            let counters = counters
            let controls = counters.controlCalls
                .sorted { ($0.key.deviceID, $0.key.action) < ($1.key.deviceID, $1.key.action) }
                .map { SimJSON.object([("device_id", .string($0.key.deviceID)), ("action", .string($0.key.action)), ("count", .int($0.value))]) }
            return Self.json(200, .object([
                ("requests", .int(counters.requests)),
                ("logins", .int(counters.logins)),
                ("failed_logins", .int(counters.failedLogins)),
                ("faults_served", .int(counters.faultsServed)),
                ("control_calls", .array(controls)),
            ]))
        default:
            return Self.json(404, .object([("detail", .string("Not Found"))]))
        }
    }

    private func applyAdminFault(_ spec: FaultBody) async -> FlyingFox.HTTPResponse {
        let fault: SimulatorFault
        switch spec.fault {
        case "down":
            guard let seconds = spec.seconds, seconds > 0, seconds <= 3600 else {
                return Self.json(400, .object([("detail", .string("down needs \"seconds\" (0-3600) so the simulator can come back"))]))
            }
            // Answer first, then drop the listener.
            let core = self
            Task {
                try? await Task.sleep(for: .milliseconds(50))
                await core.goDown(for: .milliseconds(Int(seconds * 1000)))
            }
            return Self.json(200, .object([("status", .string("going down")), ("seconds", .double(seconds))]))
        case "serverErrors", "server_errors":
            fault = .serverError
        case "rateLimit", "rate_limit":
            fault = .rateLimit(retryAfterSeconds: max(0, spec.retryAfter ?? 30))
        case "slow":
            fault = .slow(delay: .milliseconds(max(0, spec.delayMs ?? 10_000)))
        case "malformedJSON", "malformed_json":
            fault = .malformedJSON
        case "htmlError", "html_error":
            fault = .htmlError
        case "expiredToken", "expired_token":
            fault = .expiredToken
        case "late":
            fault = .late(delay: .milliseconds(max(0, spec.delayMs ?? 30_000)))
        case "unapplied":
            fault = .unapplied(delay: .milliseconds(max(0, spec.delayMs ?? 30_000)))
        case "echoCredentials401", "echo_credentials_401":
            fault = .echoCredentials401
        case "echoInput422", "echo_input_422":
            fault = .echoInput422
        case "echoPasswordHTML500", "echo_password_html_500":
            fault = .echoPasswordHTML500
        default:
            return Self.json(400, .object([("detail", .string("unknown fault"))]))
        }
        let times: Int? = spec.untilCleared == true ? nil : max(1, spec.count ?? 1)
        inject(FaultRule(fault: fault, remaining: times, match: FaultMatch(pathPrefix: spec.path ?? "/api/", method: spec.method)))
        return Self.json(200, .object([("status", .string("injected"))]))
    }

    // MARK: Helpers

    private func timestamp() -> String {
        localISOTimestamp(secondsSince1970: configuration.now().timeIntervalSince1970)
    }

    private static func makeToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<4).map { _ in
            let text = String(generator.next() as UInt64, radix: 16)
            return String(repeating: "0", count: 16 - text.count) + text
        }.joined()
    }

    private static func json(_ status: Int, _ value: SimJSON) -> FlyingFox.HTTPResponse {
        FlyingFox.HTTPResponse(
            statusCode: HTTPStatusCode(status, phrase: phrase(status)),
            headers: [.contentType: "application/json"],
            body: Data(value.serialized().utf8)
        )
    }

    /// FastAPI's 422 shape for a body that fails validation.
    private static func validationError(field: String) -> FlyingFox.HTTPResponse {
        json(422, .object([("detail", .array([.object([
            ("type", .string("missing")), ("loc", .array([.string("body"), .string(field)])), ("msg", .string("Field required")),
        ])]))]))
    }

    /// The route's answer as 200 with only the first half of its JSON body, like a cut-off proxy stream.
    private static func truncated(_ response: FlyingFox.HTTPResponse) async -> FlyingFox.HTTPResponse {
        let body = (try? await response.bodyData) ?? Data()
        return FlyingFox.HTTPResponse(
            statusCode: HTTPStatusCode(200, phrase: "OK"),
            headers: [.contentType: "application/json"],
            body: Data(body.prefix(max(1, body.count / 2)))
        )
    }

    private static func phrase(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 422: "Unprocessable Entity"
        case 429: "Too Many Requests"
        case 500: "Internal Server Error"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        default: "Status"
        }
    }
}

/// Runs late requests one after another in arrival order, each in its own task (a client that gave up
/// does not cancel the work).
private actor LateQueue {
    private var tail: Task<FlyingFox.HTTPResponse, Never>?

    func schedule(_ work: @escaping @Sendable () async -> FlyingFox.HTTPResponse) -> Task<FlyingFox.HTTPResponse, Never> {
        let previous = tail
        let task = Task {
            _ = await previous?.value
            return await work()
        }
        tail = task
        return task
    }
}
