import FlyingFox
import Foundation
import GatewayModel
import SimulatorKit
import Synchronization
import VendorKit

/// Sense on loopback: the REST sign-in (`/authenticate`, the one-time-code step `/authenticate/mfa` when
/// `totpSecret` is set, `/renew`), the daily trends, and the realtime WebSocket feed
/// (`/monitors/<id>/realtimefeed?access_token=…`) in the frames Sense sends: `hello`, `monitor_info`,
/// `data_change`, `device_states`, then `realtime_update` every `frameInterval` (two a second), and
/// `{"type":"error","payload":{"authorized":false}}` for a token it no longer accepts. `dropFeeds()` closes
/// every feed (a WebSocket that drops); `expireTokens()` makes the issued tokens stale.
public final class SenseSimulator: Sendable {
    public struct Device: Sendable, Equatable {
        public var id: String
        public var name: String
        public var watts: Double

        public init(id: String, name: String, watts: Double) {
            self.id = id
            self.name = name
            self.watts = watts
        }
    }

    private struct State {
        var tokens: Set<String> = []
        var refresh: Set<String> = []
        var mfaTokens: Set<String> = []
        var signIns = 0
        var renewals = 0
        var feeds = 0
        var frames = 0
        var generation = 0
        var devices: [Device]
        var deviceIDs: [String]
        var homeWatts: Double = 1520
        var solarWatts: Double = 2100
        var requests: [String: Int] = [:]
        var installIDs: [String] = []
    }

    public static let monitorID: Int64 = 123_456
    public let email: String
    public let password: String
    /// Base32 TOTP secret; nil: the account has no multi-factor sign-in.
    public let totpSecret: String?
    public let frameInterval: Duration
    /// Each frame changes every device's watts a little (a live house), so every frame is news.
    public let varying: Bool
    private let server: SimServer
    private let state: Mutex<State>

    public init(email: String, password: String, totpSecret: String? = nil, devices: [Device] = SenseSimulator.household,
                frameInterval: Duration = .milliseconds(500), varying: Bool = false, port: UInt16 = 0) {
        self.varying = varying
        self.email = email
        self.password = password
        self.totpSecret = totpSecret
        self.frameInterval = frameInterval
        server = SimServer(port: port)
        state = Mutex(State(devices: devices, deviceIDs: devices.map(\.id)))
    }

    /// A few of the devices Sense typically detects (ids are Sense's short random strings).
    public static let household: [Device] = [
        Device(id: "always_on", name: "Always On", watts: 180), Device(id: "LpzF0vGG", name: "Wine Cooler", watts: 95),
        Device(id: "b8Qx2mTt", name: "Dryer", watts: 2600),
    ]

    @discardableResult
    public func start() async throws(SimulatorError) -> UInt16 {
        try await server.start { [self] request in await handle(request) }
    }

    public func stop() async { await server.stop() }

    /// `http://127.0.0.1:<port>/apiservice/api/v1`.
    public var baseURL: String { get async { await server.baseURL + "/apiservice/api/v1" } }
    /// `ws://127.0.0.1:<port>`.
    public var realtimeURL: String { get async { await server.baseURL.replacingOccurrences(of: "http://", with: "ws://") } }

    public var signIns: Int { state.withLock { $0.signIns } }
    public var renewals: Int { state.withLock { $0.renewals } }
    public var feedsOpened: Int { state.withLock { $0.feeds } }
    public var framesSent: Int { state.withLock { $0.frames } }
    public var requests: [String: Int] { state.withLock { $0.requests } }
    /// The `x-sense-device-id` values the sign-in calls came with, in order (repeats of the last one left out).
    public var installIDs: [String] { state.withLock { $0.installIDs } }

    /// Issued tokens are refused from now on (the feed sends `authorized:false`); refresh tokens still renew.
    public func expireTokens() { state.withLock { $0.tokens.removeAll() } }

    /// Closes every open feed.
    public func dropFeeds() { state.withLock { $0.generation += 1 } }

    public func setDevices(_ devices: [Device]) { state.withLock { $0.devices = devices; $0.deviceIDs = devices.map(\.id) } }

    private func handle(_ request: FlyingFox.HTTPRequest) async -> FlyingFox.HTTPResponse {
        let path = request.path
        state.withLock { $0.requests[path, default: 0] += 1 }
        if path.hasPrefix("/monitors/"), path.hasSuffix("/realtimefeed") {
            let token = request.query.first { $0.name == "access_token" }?.value ?? ""
            let valid = state.withLock { $0.tokens.contains(token) }
            let handler = FeedHandler(simulator: self, authorized: valid)
            return (try? await WebSocketHTTPHandler(handler: MessageFrameWSHandler(handler: handler)).handleRequest(request))
                ?? SimResponse.text("", status: .badRequest)
        }
        guard let installID = request.headers[HTTPHeader("x-sense-device-id")], !installID.isEmpty else {
            return SimResponse.json(#"{"status":"error","error_reason":"missing device id"}"#, status: .badRequest)
        }
        state.withLock { state in
            if state.installIDs.last != installID { state.installIDs.append(installID) }
        }
        let form = await Self.form(request)
        switch path {
        case "/apiservice/api/v1/authenticate":
            guard form["email"] == email, form["password"] == password else {
                return SimResponse.json(#"{"status":"error","error_reason":"Incorrect username or password"}"#, status: .unauthorized)
            }
            if totpSecret != nil {
                let mfa = UUID().uuidString
                state.withLock { _ = $0.mfaTokens.insert(mfa) }
                return SimResponse.json(#"{"status":"error","error_reason":"Multi-factor authentication required","mfa_token":"\#(mfa)"}"#, status: .unauthorized)
            }
            return hello()
        case "/apiservice/api/v1/authenticate/mfa":
            guard let mfa = form["mfa_token"], state.withLock({ $0.mfaTokens.remove(mfa) != nil }), let secret = totpSecret,
                  let code = form["totp"], Self.acceptable(code, secret: secret), form["client_time"]?.hasSuffix("Z") == true else {
                return SimResponse.json(#"{"status":"error","error_reason":"Invalid code"}"#, status: .unauthorized)
            }
            return hello()
        case "/apiservice/api/v1/renew":
            guard let refresh = form["refresh_token"], state.withLock({ $0.refresh.contains(refresh) }) else {
                return SimResponse.json(#"{"status":"error","error_reason":"Invalid refresh token"}"#, status: .unauthorized)
            }
            let token = "t1.v2." + UUID().uuidString
            state.withLock { state in
                state.tokens.insert(token)
                state.renewals += 1
            }
            return SimResponse.json(#"{"access_token":"\#(token)","refresh_token":"\#(refresh)","expires":"2030-01-01T00:00:00.000Z"}"#)
        case "/apiservice/api/v1/app/history/trends":
            let auth = request.headers[.authorization] ?? ""
            guard auth.hasPrefix("bearer "), state.withLock({ $0.tokens.contains(String(auth.dropFirst(7))) }) else {
                return SimResponse.json(#"{"status":"error","error_reason":"Unauthorized"}"#, status: .unauthorized)
            }
            return SimResponse.json(#"{"steps":24,"consumption":{"total":18.861498},"production":{"total":22.4075},"from_grid":6.2031,"to_grid":9.74916,"solar_powered":67}"#)
        default:
            return SimResponse.json(#"{"status":"error","error_reason":"not found"}"#, status: .notFound)
        }
    }

    /// The current code or the one before (a code typed at the end of its 30 s).
    static func acceptable(_ code: String, secret: String) -> Bool {
        let now = Date()
        return [now, now.addingTimeInterval(-30)].contains { TOTP.code(secret: secret, at: $0) == code }
    }

    private func hello() -> FlyingFox.HTTPResponse {
        let token = "t1.v2." + UUID().uuidString, refresh = "r1." + UUID().uuidString
        state.withLock { state in
            state.tokens.insert(token)
            state.refresh.insert(refresh)
            state.signIns += 1
        }
        return SimResponse.json(#"{"authorized":true,"account_id":9001,"user_id":4242,"access_token":"\#(token)","refresh_token":"\#(refresh)","monitors":[{"id":\#(Self.monitorID),"serial_number":"N327000123","time_zone":"America/New_York","solar_connected":true,"solar_configured":true,"online":true}],"bridge_server":"wss://mb1.home.sense.com","totp_enabled":\#(totpSecret != nil)}"#)
    }

    static func form(_ request: FlyingFox.HTTPRequest) async -> [String: String] {
        let body = String(decoding: (try? await request.bodyData) ?? Data(), as: UTF8.self)
        var fields: [String: String] = [:]
        for pair in body.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String($0) }
            if parts.count == 2 { fields[parts[0]] = parts[1] }
        }
        return fields
    }

    /// The frames of one feed connection.
    private struct FeedHandler: WSMessageHandler {
        let simulator: SenseSimulator
        let authorized: Bool

        func makeMessages(for client: AsyncStream<WSMessage>) async throws -> AsyncStream<WSMessage> {
            let simulator = self.simulator
            let authorized = self.authorized
            return AsyncStream { continuation in
                let task = Task {
                    guard authorized else {
                        continuation.yield(.text(#"{"type":"error","payload":{"authorized":false,"error_reason":"Unauthorized"}}"#))
                        try? await Task.sleep(for: .milliseconds(100))
                        continuation.yield(.close(.normalClosure))
                        continuation.finish()
                        return
                    }
                    let generation = simulator.state.withLock { state -> Int in
                        state.feeds += 1
                        return state.generation
                    }
                    let ids = simulator.state.withLock { $0.deviceIDs }
                    continuation.yield(.text(#"{"type":"hello","payload":{"online":true}}"#))
                    continuation.yield(.text(#"{"type":"monitor_info","payload":{"features":"[]"}}"#))
                    continuation.yield(.text(#"{"type":"data_change","payload":{"device_data_checksum":"abc"}}"#))
                    let states = ids.map { #"{"device_id":"\#($0)","mode":"active","state":"on"}"# }.joined(separator: ",")
                    continuation.yield(.text(#"{"type":"device_states","payload":{"states":[\#(states)],"update_type":"full"}}"#))
                    while !Task.isCancelled {
                        let (current, frame, devices, steady, solar) = simulator.state.withLock { state in
                            state.frames += 1
                            return (state.generation, state.frames, state.devices, state.homeWatts, state.solarWatts)
                        }
                        guard current == generation else { break }
                        let wobble = simulator.varying ? Double(frame % 7) : 0
                        let list = devices.filter { $0.watts > 0 }
                            .map { #"{"id":"\#($0.id)","name":"\#($0.name)","icon":"socket","w":\#($0.watts + wobble)}"# }.joined(separator: ",")
                        let home = steady + wobble
                        let grid = home - solar
                        continuation.yield(.text(#"{"type":"realtime_update","payload":{"c":4,"channels":[760.5,759.5],"d_w":\#(Int(home)),"devices":[\#(list)],"epoch":\#(Int(Date().timeIntervalSince1970)),"frame":\#(frame),"grid_w":\#(grid),"hz":59.98121,"solar_w":\#(solar),"voltage":[121.9,122.3],"w":\#(home)}}"#))
                        try? await Task.sleep(for: simulator.frameInterval)
                    }
                    continuation.yield(.close(.goingAway))
                    continuation.finish()
                }
                continuation.onTermination = { _ in task.cancel() }
            }
        }
    }
}
