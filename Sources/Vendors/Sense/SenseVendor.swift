import CurlHTTP
import Crypto
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import Logging
import Resilience
import Synchronization
import VendorKit
import WSClient

/// A Sense energy monitor: its realtime WebSocket feed (two frames a second) and today's totals.
/// - Sign-in: `POST /authenticate` (form `email`, `password`, header `x-sense-device-id`); an account with
///   multi-factor sign-in answers 401 with an `mfa_token`, finished with a TOTP code (computed from
///   `totp_secret_file`, or read from `totp_file`). The token (~24 h) is renewed with the refresh token; a refused
///   sign-in is tried again at most every 15 min.
/// - Devices: `<id>_<monitor id>` with `home_power` (`w`), `solar_power` (`solar_w`, where solar is configured),
///   `grid_power` (`grid_w`), `voltage_l1`/`voltage_l2`, `frequency`, and today's `home_energy`, `solar_energy`,
///   `grid_import_energy`, `grid_export_energy` (trends, every 15 min); one `<id>_<sense device id>` per device
///   Sense detected, with `power`, added as the feed first shows it and removed when Sense's full device list
///   no longer has it. Each device publishes at most once per `publish_interval` (1 s).
public final class SenseVendor: Vendor {
    public let instanceID: String
    public let typeName = "sense"
    public let http: VendorHTTP
    private let options: SenseOptions
    private let sink: VendorEventSink
    private let context: VendorContext
    private let tokens = Tokens()
    private let session: LoginSession
    private let stream: ReconnectingStream
    private let feed = Mutex(Feed())
    /// Identifies this install to Sense (the header its apps send): kept in the cache, see `adoptStoredDeviceID`.
    private let deviceIDs: InstallID

    final class InstallID: Sendable {
        private let value: Mutex<String>
        init(_ value: String) { self.value = Mutex(value) }
        var current: String { value.withLock { $0 } }
        func set(_ id: String) { value.withLock { $0 = id } }
    }

    final class Tokens: Sendable {
        struct Value {
            var access: String?
            var refresh: String?
            var userID: Int64?
            var monitors: [WireHello.Monitor] = []
        }

        private let value = Mutex(Value())
        var current: Value { value.withLock { $0 } }
        func update(_ change: (inout Value) -> Void) { value.withLock { change(&$0) } }
    }

    private struct Feed {
        /// Sense devices announced, by id, with their names.
        var known: [DeviceID: Device] = [:]
        var monitorDevices: [DeviceID: Device] = [:]
        /// Per device: when its state last went out, and what waits for the interval to pass.
        var lastSent: [DeviceID: Date] = [:]
        var pending: [DeviceID: (state: [String: StateValue], at: Date)] = [:]
    }

    public init(instanceID: String, options: SenseOptions, sink: VendorEventSink, context: VendorContext) throws(GatewayError) {
        self.instanceID = instanceID
        self.options = options
        self.sink = sink
        self.context = context
        // The feed reports the vendor's health (it has no breaker); the REST client's own would contradict it.
        http = VendorHTTP(
            vendorID: instanceID, client: try VendorHTTP.newClient(), settings: VendorHTTP.Settings(options.network, retry: .none),
            sink: VendorEventSink { _ in },
            time: TimeSource(context.clock), now: context.now, pinStore: context.pinStore, logger: context.logger
        )
        http.redactor.set("password", options.password)
        if let secret = options.totpSecret { http.redactor.set("totp", secret) }
        // Until the cache answers (or without one): an id derived from the instance and account, stable too.
        let installID = InstallID(String(hexString(Insecure.SHA1.hash(data: Array("lbs-gateway/\(instanceID)/\(options.email.lowercased())".utf8))).prefix(32)))
        deviceIDs = installID
        session = Self.makeSession(http: http, options: options, tokens: tokens) { installID.current }
        stream = ReconnectingStream(vendorID: instanceID, sink: sink, clock: context.clock, now: context.now, policy: options.reconnect)
    }

    public var refreshesAllDevices: Bool { true }

    public func run() async throws {
        await adoptStoredDeviceID()
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.stream.run { connected in try await self.session(connected) } }
            group.addTask { await self.pollTrends() }
            group.addTask { await self.flushHeldStates() }
            await group.waitForAll()
        }
    }

    public func refresh(_ device: DeviceID) async throws { try await readTrends(use: .refresh) }

    public func execute(_ command: DeviceCommand) async throws -> CommandOutcome {
        throw GatewayError(.vendorRejected, message: "Sense only measures: \(command.device) has nothing to set.")
    }

    // MARK: Realtime

    /// One connection to one monitor's feed (the first one, or `monitor_id`), read until it ends.
    func session(_ connected: @escaping ReconnectingStream.Connected) async throws {
        try await self.session.prepare()
        let account = tokens.current
        guard let token = account.access else { throw GatewayError(.authFailed, message: "Sense gave no access token.") }
        let monitors = account.monitors.filter { options.monitorIDs.isEmpty || options.monitorIDs.contains($0.id) }
        guard let monitor = monitors.first else {
            throw GatewayError(.notFound, message: "The Sense account has no monitor\(options.monitorIDs.isEmpty ? "" : " \(options.monitorIDs[0])").",
                               suggestion: "Check monitor_id against the Sense app, or leave it out.")
        }
        announceMonitor(monitor)
        let query = "access_token=\(FormEncoding.escape(token))&client_type=web&ui_language=en-US&device_id=\(senseDeviceID)"
        let url = "\(options.realtimeURL)/monitors/\(monitor.id)/realtimefeed?\(query)"
        let time = TimeSource(context.clock)
        let watch = FeedWatch(start: time.now())
        var settings = WebSocketClientConfiguration()
        settings.maxFrameSize = 1 << 20
        // A feed that ends (a refused token, a drop) should not hold the reconnect for the default 15 s close handshake.
        settings.closeTimeout = .seconds(1)
        let configuration = settings
        var quiet = context.logger
        quiet.logLevel = .warning
        let logger = quiet
        let timeout = options.feedTimeout
        let silent: Bool = try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                do {
                    try await WebSocketClient.connect(url: url, configuration: configuration, logger: logger) { inbound, _, _ in
                        for try await message in inbound.messages(maxSize: 1 << 20) {
                            watch.lastFrame.withLock { $0 = time.now() }
                            guard case .text(let text) = message else { continue }
                            if let error = self.handle(frame: text, monitor: monitor, connected: connected) {
                                watch.failure.withLock { $0 = error }
                                return
                            }
                        }
                    }
                } catch is CancellationError {
                    return false
                } catch {
                    throw GatewayError(.vendorUnreachable, message: "The Sense realtime feed failed: \(self.http.redactor.redact(String(describing: error)))")
                }
                return false
            }
            // The watchdog: a feed with no frame for `feed_timeout` is dead, whatever the socket says. It sleeps on
            // the vendor's clock until the last frame would be that old, then looks again.
            group.addTask {
                while true {
                    let quiet = time.now() - watch.lastFrame.withLock({ $0 })
                    if quiet >= timeout { return true }
                    try await time.sleep(for: timeout - quiet)
                }
            }
            let first = try await group.next() ?? false
            group.cancelAll()
            return first
        }
        if silent {
            throw GatewayError(.vendorTimeout, message: "The Sense realtime feed sent nothing for \(Int(timeout.inSeconds)) s; reconnecting.")
        }
        if let error = watch.failure.withLock({ $0 }) {
            guard error.code == .authFailed else { throw error }
            // The feed refused the token: renew it once and reconnect at once; a refusal of the renewal is final.
            try await self.session.reauthenticate(after: self.session.loginCount)
            throw GatewayError(.vendorUnavailable, message: "The Sense feed refused an expired token; renewed, reconnecting.", countsAgainstVendor: false)
        }
        throw GatewayError(.vendorUnavailable, message: "The Sense realtime feed closed; reconnecting.")
    }

    /// What one feed connection saw: when its last frame came, and the error it ended with.
    final class FeedWatch: Sendable {
        /// On the vendor clock's `TimeSource`.
        let lastFrame: Mutex<Duration>
        let failure = Mutex<GatewayError?>(nil)

        init(start: Duration) { lastFrame = Mutex(start) }
    }

    private func announceMonitor(_ monitor: WireHello.Monitor) {
        var keys = ["home_power", "grid_power"]
        if monitor.solar_configured == true { keys.insert("solar_power", at: 0) }
        keys += ["voltage_l1", "voltage_l2", "frequency", "home_energy", "grid_import_energy", "grid_export_energy"]
        if monitor.solar_configured == true { keys.append("solar_energy") }
        let device = Device(vendorID: instanceID, vendorDeviceID: String(monitor.id), name: "Sense \(monitor.serial_number ?? String(monitor.id))",
                            type: .energyMeter, manufacturer: "Sense", model: "Energy Monitor", serialNumber: monitor.serial_number,
                            writableKeys: [], keys: keys)
        let isNew = feed.withLock { feed -> Bool in
            guard feed.monitorDevices[device.id] != device else { return false }
            feed.monitorDevices[device.id] = device
            return true
        }
        if isNew { sink.send(.deviceAdded(device)) }
    }

    /// One frame; an error to end the session with, or nil.
    func handle(frame text: String, monitor: WireHello.Monitor, connected: ReconnectingStream.Connected) -> GatewayError? {
        let data = Data(text.utf8)
        guard let kind = try? JSONDecoder().decode(WireFrame.self, from: data) else { return nil }
        switch kind.type {
        case "hello":
            connected()
        case "realtime_update":
            guard let update = try? JSONDecoder().decode(WireRealtimeFrame.self, from: data) else { return nil }
            realtime(update.payload, monitor: monitor)
        case "device_states":
            guard let states = try? JSONDecoder().decode(WireDeviceStatesFrame.self, from: data), states.payload.update_type != "delta" else { return nil }
            let present = Set((states.payload.states ?? []).map { DeviceID(vendorInstance: instanceID, vendorDeviceID: Slug.make($0.device_id)) })
            let gone = feed.withLock { feed -> [DeviceID] in
                let gone = feed.known.keys.filter { !present.contains($0) }
                for id in gone { feed.known[id] = nil }
                return gone
            }
            for id in gone.sorted() { sink.send(.deviceRemoved(id)) }
        case "error":
            let error = try? JSONDecoder().decode(WireErrorFrame.self, from: data)
            if error?.payload.authorized == false {
                return GatewayError(.authFailed, message: "The Sense feed refused the token: \(error?.payload.error_reason ?? "not authorized").")
            }
            return GatewayError(.vendorServerError, message: "The Sense feed sent an error: \(error?.payload.error_reason ?? text.prefix(200).description)")
        default:
            break
        }
        return nil
    }

    private func realtime(_ payload: WireRealtimeFrame.Payload, monitor: WireHello.Monitor) {
        let now = http.now()
        // An epoch no date can show (1e300) is the frame's clock gone wrong: the frame counts as seen now.
        let at = payload.epoch.flatMap { ISOTime.representable.contains($0) ? Date(timeIntervalSince1970: $0) : nil } ?? now
        var updates: [(DeviceID, [String: StateValue])] = []
        var main: [String: StateValue] = [:]
        func set(_ key: String, _ value: Double?) { if let value, value.isFinite { main[key] = .number(value.rounded(places: 1)) } }
        set("home_power", payload.w)
        if monitor.solar_configured == true { set("solar_power", payload.solar_w) }
        set("grid_power", payload.grid_w)
        set("frequency", payload.hz)
        for (index, volts) in (payload.voltage ?? []).prefix(2).enumerated() { set("voltage_l\(index + 1)", volts) }
        updates.append((DeviceID(vendorInstance: instanceID, vendorDeviceID: String(monitor.id)), main))
        // Devices in this frame draw power; known ones missing from it are off.
        var seen: Set<DeviceID> = []
        var added: [Device] = []
        feed.withLock { feed in
            for entry in payload.devices ?? [] {
                let device = Device(vendorID: instanceID, vendorDeviceID: Slug.make(entry.id), name: entry.name ?? entry.id, type: .sensor,
                                    manufacturer: "Sense", model: "Detected device", writableKeys: [], keys: ["power"])
                if feed.known[device.id] == nil {
                    feed.known[device.id] = device
                    added.append(device)
                }
                seen.insert(device.id)
                // JSON numbers are finite; a device's power is 0 when the frame leaves it out.
                updates.append((device.id, ["power": .number((entry.w ?? 0).rounded(places: 1))]))
            }
            for id in feed.known.keys where !seen.contains(id) { updates.append((id, ["power": .number(0)])) }
        }
        for device in added { sink.send(.deviceAdded(device)) }
        // At most one state per device per interval; the newest waits for its turn.
        let due = feed.withLock { feed -> [(DeviceID, [String: StateValue])] in
            var due: [(DeviceID, [String: StateValue])] = []
            for (id, state) in updates {
                if let last = feed.lastSent[id], now.timeIntervalSince(last) < options.publishInterval.inSeconds {
                    feed.pending[id, default: ([:], at)].state.merge(state) { $1 }
                    feed.pending[id]?.at = at
                } else {
                    var merged = feed.pending.removeValue(forKey: id)?.state ?? [:]
                    merged.merge(state) { $1 }
                    feed.lastSent[id] = now
                    due.append((id, merged))
                }
            }
            return due
        }
        for (id, state) in due where !state.isEmpty { sink.send(.state(id, state, observedAt: at)) }
    }

    /// States held back by the per-device interval go out once it has passed, even when no further frame
    /// comes (the feed stopped, or the device's power stopped changing).
    private func flushHeldStates() async {
        while !Task.isCancelled {
            do { try await http.time.sleep(for: options.publishInterval) } catch { return }
            flushDue(now: http.now())
        }
    }

    func flushDue(now: Date) {
        let due = feed.withLock { feed -> [(DeviceID, [String: StateValue], Date)] in
            var due: [(DeviceID, [String: StateValue], Date)] = []
            for (id, held) in feed.pending {
                if let last = feed.lastSent[id], now.timeIntervalSince(last) < options.publishInterval.inSeconds { continue }
                feed.pending[id] = nil
                feed.lastSent[id] = now
                due.append((id, held.state, held.at))
            }
            return due
        }
        for (id, state, at) in due where !state.isEmpty { sink.send(.state(id, state, observedAt: at)) }
    }

    // MARK: Trends

    private func pollTrends() async {
        while !Task.isCancelled {
            try? await readTrends(use: .poll)
            do { try await http.time.sleep(for: options.trendsInterval) } catch { return }
        }
    }

    /// Today's kWh for the monitor (consumption, production, from and to the grid).
    func readTrends(use: QuotaScheduler.Use) async throws(GatewayError) {
        try await session.prepare()
        guard let monitor = tokens.current.monitors.first(where: { options.monitorIDs.isEmpty || options.monitorIDs.contains($0.id) }) else { return }
        let start = ISOTime.format(LocalZone.current.startOfDay(for: http.now()))
        let path = "/app/history/trends?monitor_id=\(monitor.id)&device_id=always_on&scale=DAY&start=\(FormEncoding.escape(start))"
        var request = HTTPClientRequest(url: options.network.base + path, timeout: options.network.timeout)
        request.headers.set(name: "Accept", value: "application/json")
        request.headers.set(name: "x-sense-device-id", value: senseDeviceID)
        let trends = try await http.sendJSON(request, as: WireTrends.self, context: "Sense trends", use: use, authorizer: session)
        var state: [String: StateValue] = [:]
        func set(_ key: String, _ value: Double?) { if let value, value.isFinite, value >= 0 { state[key] = .number(value.rounded(places: 3)) } }
        set("home_energy", trends.consumption?.total)
        if monitor.solar_configured == true { set("solar_energy", trends.production?.total) }
        set("grid_import_energy", trends.from_grid)
        set("grid_export_energy", trends.to_grid)
        announceMonitor(monitor)
        if !state.isEmpty { sink.send(.state(DeviceID(vendorInstance: instanceID, vendorDeviceID: String(monitor.id)), state, observedAt: http.now())) }
    }

    // MARK: Sign-in

    /// Renewal with the refresh token while there is one; otherwise the password sign-in, with the TOTP step
    /// for an account that asks for it. A refused sign-in is held off 15 min (Sense's own advice).
    /// The `x-sense-device-id` Sense knows this install by: a random id made on the first run and kept in the cache
    /// (`vendor_value`), as the Sense app keeps one per phone; Sense ties sessions and MFA trust to it.
    func adoptStoredDeviceID() async {
        guard let store = context.valueStore else { return }
        var generator = SystemRandomNumberGenerator()
        let fresh = hexString((0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) })
        do {
            let kept = try await store.value("device_id", vendorID: instanceID, storingIfAbsent: fresh)
            deviceIDs.set(kept)
        } catch {
            context.logger.warning("Sense: the device id could not be kept in the cache (\(error)); using one derived from the account")
        }
    }

    var senseDeviceID: String { deviceIDs.current }

    static func makeSession(http: VendorHTTP, options: SenseOptions, tokens: Tokens, deviceID: @escaping @Sendable () -> String) -> LoginSession {
        LoginSession(time: http.time) { () async throws(GatewayError) -> SessionCredentials in
            func post(_ path: String, _ fields: [(String, String)], accepting: Set<Int> = []) async throws(GatewayError) -> HTTPClientResponse {
                var request = HTTPClientRequest(method: .post, url: options.network.base + path, timeout: options.network.timeout)
                request.headers.set(name: "Content-Type", value: "application/x-www-form-urlencoded")
                request.headers.set(name: "x-sense-device-id", value: deviceID())
                request.body = FormEncoding.body(fields)
                return try await http.send(request, use: .refresh, accepting: accepting)
            }
            func credentials(_ token: String) -> SessionCredentials {
                http.redactor.set("access_token", token)
                // Sense tokens last about a day; renewed at 90 % of that.
                return SessionCredentials(headers: [(name: "Authorization", value: "bearer \(token)")], lifetime: 23 * 3600)
            }
            let account = tokens.current
            if let refresh = account.refresh, let user = account.userID {
                do throws(GatewayError) {
                    let response = try await post("/renew", [("user_id", String(user)), ("refresh_token", refresh)])
                    let renewed = try http.decode(WireRenew.self, from: response, context: "Sense renewal")
                    if let token = renewed.access_token {
                        tokens.update { $0.access = token; $0.refresh = renewed.refresh_token ?? refresh }
                        return credentials(token)
                    }
                } catch {
                    guard error.code == .authFailed || error.requiresReauthentication || error.code == .badRequest else { throw error }
                }
                tokens.update { $0.refresh = nil }
            }
            do throws(GatewayError) {
                let first = try await post("/authenticate", [("email", options.email), ("password", options.password.reveal())], accepting: [401])
                var hello: WireHello
                if first.status == 401 {
                    let mfa = try? JSONDecoder().decode(WireMFA.self, from: first.body)
                    guard let mfaToken = mfa?.mfa_token else {
                        throw GatewayError(.authFailed, message: "Sense refused the sign-in of \(options.email): \(mfa?.error_reason ?? "wrong email or password").",
                                           suggestion: "Check email and password_file (the Sense account's).", httpStatus: 401)
                    }
                    guard let code = totpCode(options, now: http.now()) else {
                        throw GatewayError(.authFailed, message: "The Sense account asks for a one-time code and none is configured.",
                                           suggestion: "Give the authenticator secret with totp_secret_file (the gateway computes the codes), or write a current code to totp_file.")
                    }
                    http.redactor.set("mfa_token", mfaToken)
                    let clientTime = String(ISOTime.format(http.now()).prefix(19)) + "Z"
                    let second = try await post("/authenticate/mfa", [("totp", code), ("mfa_token", mfaToken), ("client_time", clientTime)])
                    hello = try http.decode(WireHello.self, from: second, context: "Sense sign-in (one-time code)")
                } else {
                    hello = try http.decode(WireHello.self, from: first, context: "Sense sign-in")
                }
                guard let token = hello.access_token else { throw GatewayError(.authFailed, message: "Sense's sign-in gave no access token.") }
                if let refresh = hello.refresh_token { http.redactor.set("refresh_token", refresh) }
                tokens.update { value in
                    value.access = token
                    value.refresh = hello.refresh_token
                    value.userID = hello.user_id
                    value.monitors = hello.monitors ?? []
                }
                return credentials(token)
            } catch {
                guard error.code == .authFailed || error.requiresReauthentication else { throw error }
                var refused = error
                refused.code = .authFailed
                refused.requiresReauthentication = false
                http.holdOff(after: refused, for: .seconds(900))
                throw refused
            }
        }
    }

    /// The one-time code: computed from the secret, else read from `totp_file`.
    static func totpCode(_ options: SenseOptions, now: Date) -> String? {
        if let secret = options.totpSecret { return TOTP.code(secret: secret.reveal(), at: now) }
        guard let file = options.totpFile, let text = try? String(contentsOfFile: file, encoding: .utf8) else { return nil }
        let code = text.trimmingWhitespace()
        return code.count == 6 && code.allSatisfy(\.isNumber) ? code : nil
    }
}
