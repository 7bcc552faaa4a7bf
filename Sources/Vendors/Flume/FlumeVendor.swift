import CurlHTTP
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

/// Flume water sensors: one device `<id>_<device id>` per sensor (`type` 2) with
/// - `water_flow` (L/min): the litres of the last full minute;
/// - `water_volume` (L): a running counter that never goes backwards. Flume gives per-day sums, so each poll
///   adds what today's sum grew by (and at midnight what was left of yesterday); after a restart the counter
///   continues from the cache (`restore(lastKnown:)`), and water used while the gateway was down that day is
///   counted once today's sum is read again;
/// - `battery` (%): Flume reports `low`, `medium`, `high`, published as 10, 50 and 100;
/// - `leak`: Flume's active leak flag, read every `leak_interval` (5 min).
/// Login: the OAuth password grant; the 7-day token is renewed with the refresh token 12 h before it
/// expires (a refused refresh falls back to the password). The user id comes from the token's `user_id`.
public final class FlumeVendor: Vendor {
    public let instanceID: String
    public let typeName = "flume"
    public let http: VendorHTTP
    private let options: FlumeOptions
    private let sink: VendorEventSink
    private let inventory = InventoryTracker()
    private let known = Mutex(Known())
    private let tokens: TokenBox
    private let session: LoginSession

    /// The tokens of the latest login, for the refresh grant and the user id.
    final class TokenBox: Sendable {
        struct Tokens {
            var refresh: String?
            var userID: String?
        }

        private let value = Mutex(Tokens())
        var current: Tokens { value.withLock { $0 } }
        func set(_ tokens: Tokens) { value.withLock { $0 = tokens } }
        func dropRefresh() { value.withLock { $0.refresh = nil } }
    }

    struct Meter: Sendable {
        /// Litres, the published counter.
        var volume: Double
        /// Today's sum at the last poll, and that day (`yyyy-MM-dd` in the sensor's time zone).
        var today: Double
        var day: String
    }

    private struct Known {
        var sensors: [WireDevice]?
        var listedAt: Date?
        var meters: [String: Meter] = [:]
        /// Counters from the cache, by device id, until the first reading continues them.
        var restored: [String: Double] = [:]
        var leaks: [String: Bool] = [:]
        var leaksCheckedAt: [String: Date] = [:]
    }

    public init(instanceID: String, options: FlumeOptions, sink: VendorEventSink, context: VendorContext) throws(GatewayError) {
        self.instanceID = instanceID
        self.options = options
        self.sink = sink
        http = try VendorHTTP(vendorID: instanceID, settings: VendorHTTP.Settings(options.network, retry: .none), sink: sink, context: context)
        http.redactor.set("password", options.password)
        http.redactor.set("client_secret", options.clientSecret)
        let tokens = TokenBox()
        self.tokens = tokens
        session = Self.makeSession(http: http, options: options, tokens: tokens)
    }

    public var refreshesAllDevices: Bool { true }

    var base: String { options.network.base }

    /// The requested interval, stretched so every sensor's query (and its share of leak checks) fits the hour.
    var pollInterval: Duration {
        guard let quota = http.quota else { return options.network.pollInterval }
        let sensors = max(1, known.withLock { $0.sensors?.count } ?? 1)
        let requested = options.network.pollInterval
        // A leak check per sensor every `leakInterval` costs, per poll, the fraction of it one poll covers.
        let leakShare = requested.inSeconds / max(requested.inSeconds, options.leakInterval.inSeconds)
        let cost = Int((Double(sensors) * (1 + leakShare)).rounded(.up))
        return quota.pollInterval(requested: requested, cost: cost) ?? .seconds(3600)
    }

    public func restore(lastKnown states: [DeviceID: [String: StateValue]]) {
        known.withLock { known in
            for (id, state) in states {
                if let volume = state["water_volume"]?.number { known.restored[id.rawValue] = volume }
            }
        }
    }

    public func run() async throws {
        try await http.runPolling(every: { self.pollInterval }) { try await self.poll() }
    }

    public func refresh(_ device: DeviceID) async throws { try await poll(use: .refresh) }

    public func execute(_ command: DeviceCommand) async throws -> CommandOutcome {
        throw GatewayError(.vendorRejected, message: "Flume sensors are read-only: \(command.device) has nothing to set.")
    }

    public func poll(use: QuotaScheduler.Use = .poll) async throws(GatewayError) {
        try await session.prepare()
        guard let user = tokens.current.userID else {
            throw GatewayError(.malformedResponse, message: "Flume's token carries no usable user_id (a text or a whole number).")
        }
        let sensors = try await sensors(user: user, use: use)
        let now = http.now()
        var states: [(WireDevice, [String: StateValue])] = []
        for sensor in sensors {
            var state: [String: StateValue] = [:]
            let deviceID = DeviceID(vendorInstance: instanceID, vendorDeviceID: sensor.id).rawValue
            let (flow, volume) = try await readings(of: sensor, deviceID: deviceID, user: user, at: now, use: use)
            if let flow { state["water_flow"] = .finite(Self.rounded(flow)) }
            if let volume { state["water_volume"] = .finite(Self.rounded(volume)) }
            if let battery = Self.battery(sensor.battery_level) { state["battery"] = .number(battery) }
            if let leak = try await leak(of: sensor, user: user, at: now, use: use) { state["leak"] = .bool(leak) }
            states.append((sensor, state))
        }
        let devices = states.map { sensor, state in
            Device(
                vendorID: instanceID, vendorDeviceID: sensor.id, name: sensor.name.flatMap { $0.isEmpty ? nil : $0 } ?? "Flume \(sensor.location?.name ?? sensor.id)",
                type: .waterMeter, manufacturer: "Flume", model: sensor.product ?? "Water sensor", serialNumber: sensor.id, writableKeys: [],
                keys: ["water_flow", "water_volume", "battery", "leak"].filter { state[$0] != nil || $0 == "water_flow" || $0 == "water_volume" }
            )
        }
        inventory.announce(devices, vendorID: instanceID, sink: sink)
        for ((_, state), device) in zip(states, devices) where !state.isEmpty {
            sink.send(.state(device.id, state, observedAt: now))
        }
    }

    static func rounded(_ litres: Double) -> Double { litres.rounded(places: 3) }

    /// Flume's `battery_level` words as a percentage.
    static func battery(_ level: String?) -> Double? {
        switch level?.lowercased() {
        case "high": 100
        case "medium": 50
        case "low": 10
        default: nil
        }
    }

    // MARK: Readings

    /// The last full minute's litres, and the running counter after adding today's growth.
    private func readings(
        of sensor: WireDevice, deviceID: String, user: String, at now: Date, use: QuotaScheduler.Use
    ) async throws(GatewayError) -> (flow: Double?, volume: Double?) {
        let zone = sensor.location?.tz.flatMap(LocalZone.init(identifier:)) ?? .current
        let clock = FlumeTime(zone: zone)
        let minute = clock.minuteStart(now)
        let today = clock.day(now)
        let previous = known.withLock { $0.meters[sensor.id] }
        var queries: [JSONValue] = [
            Self.query("last_minute", bucket: "MIN", since: clock.format(minute.addingTimeInterval(-60)), until: clock.format(minute.addingTimeInterval(-1))),
            Self.query("today", bucket: "DAY", since: today + " 00:00:00", until: clock.format(now)),
        ]
        if let previous, previous.day != today {
            queries.append(Self.query("yesterday", bucket: "DAY", since: previous.day + " 00:00:00", until: previous.day + " 23:59:59"))
        }
        var request = HTTPClientRequest(method: .post, url: base + "/users/\(user)/devices/\(sensor.id)/query", timeout: options.network.timeout)
        request.headers.set(name: "Content-Type", value: "application/json")
        request.body = Data(JSONValue.object(["queries": .array(queries)]).render().utf8)
        let result = try await envelope(request, WireQueryResult.self, context: "usage query", use: use)
        func sum(_ id: String) -> Double? {
            let values = (result?[id] ?? []).compactMap(\.value).filter(\.isFinite)
            // Huge buckets can add up to infinity: such a sum is no reading.
            let total = values.reduce(0, +)
            return values.isEmpty || !total.isFinite ? nil : total
        }
        let flow = sum("last_minute") ?? (result?["last_minute"] != nil ? 0 : nil)
        guard let todayTotal = sum("today") ?? (result?["today"] != nil ? 0 : nil) else { return (flow, previous?.volume) }
        let meter = known.withLock { known -> Meter in
            var meter: Meter
            if let previous {
                var grown = 0.0
                if previous.day == today {
                    grown = max(0, todayTotal - previous.today)
                } else {
                    grown = max(0, (sum("yesterday") ?? previous.today) - previous.today) + todayTotal
                }
                meter = Meter(volume: previous.volume + grown, today: todayTotal, day: today)
            } else {
                // First reading since start: continue the cached counter, or start at today's use so far.
                meter = Meter(volume: known.restored[deviceID] ?? todayTotal, today: todayTotal, day: today)
                known.restored[deviceID] = nil
            }
            known.meters[sensor.id] = meter
            return meter
        }
        return (flow, meter.volume)
    }

    static func query(_ id: String, bucket: String, since: String, until: String) -> JSONValue {
        ["request_id": .string(id), "bucket": .string(bucket), "since_datetime": .string(since), "until_datetime": .string(until), "operation": "SUM", "units": "LITERS"]
    }

    /// Flume's active leak flag, asked every `leak_interval`; the last answer in between.
    private func leak(of sensor: WireDevice, user: String, at now: Date, use: QuotaScheduler.Use) async throws(GatewayError) -> Bool? {
        let (last, checkedAt) = known.withLock { ($0.leaks[sensor.id], $0.leaksCheckedAt[sensor.id]) }
        if let checkedAt, now.timeIntervalSince(checkedAt) < options.leakInterval.inSeconds { return last }
        let request = HTTPClientRequest(url: base + "/users/\(user)/devices/\(sensor.id)/leaks/active", timeout: options.network.timeout)
        let answer = try await envelope(request, WireLeak.self, context: "leak state", use: use)
        let active = answer?.active ?? false
        known.withLock { known in
            known.leaks[sensor.id] = active
            known.leaksCheckedAt[sensor.id] = now
        }
        return active
    }

    /// The account's water sensors (not its bridges), read again every 30 min for battery levels.
    private func sensors(user: String, use: QuotaScheduler.Use) async throws(GatewayError) -> [WireDevice] {
        let now = http.now()
        if let (sensors, at) = known.withLock({ known in known.sensors.map { ($0, known.listedAt ?? .distantPast) } }), now.timeIntervalSince(at) < 1800 {
            return sensors
        }
        let request = HTTPClientRequest(url: base + "/users/\(user)/devices?user=false&location=true", timeout: options.network.timeout)
        let list = try await envelopeList(request, WireDevice.self, context: "device list", use: use).filter { $0.type == 2 }
        known.withLock { known in
            known.sensors = list
            known.listedAt = now
        }
        return list
    }

    // MARK: Requests

    /// The first item of an envelope's `data`.
    private func envelope<T: Decodable & Sendable>(_ request: HTTPClientRequest, _ type: T.Type, context: String, use: QuotaScheduler.Use) async throws(GatewayError) -> T? {
        try await envelopeList(request, type, context: context, use: use).first
    }

    private func envelopeList<T: Decodable & Sendable>(
        _ request: HTTPClientRequest, _ type: T.Type, context: String, use: QuotaScheduler.Use
    ) async throws(GatewayError) -> [T] {
        var request = request
        request.headers.set(name: "Accept", value: "application/json")
        let answer = try await http.sendJSON(request, as: Envelope<T>.self, context: "Flume \(context)", use: use, authorizer: session)
        if answer.success == false {
            throw GatewayError(.malformedResponse, message: "Flume refused the \(context): \(answer.message ?? "no reason given").")
        }
        return answer.data ?? []
    }

    /// The OAuth password grant, or the refresh grant while there is a refresh token; the token's lifetime makes
    /// the session renew 12 h before it ends (13/14 of a 7-day token).
    static func makeSession(http: VendorHTTP, options: FlumeOptions, tokens: TokenBox) -> LoginSession {
        LoginSession(time: http.time, renewFraction: 13.0 / 14.0) { () async throws(GatewayError) -> SessionCredentials in
            if let refresh = tokens.current.refresh {
                do throws(GatewayError) {
                    return try await grant(["grant_type": "refresh_token", "refresh_token": refresh], http: http, options: options, tokens: tokens)
                } catch {
                    // A refused refresh token: log in with the password instead.
                    tokens.dropRefresh()
                    guard error.code == .authFailed || error.code == .badRequest else { throw error }
                }
            }
            return try await grant(["grant_type": "password", "username": options.username, "password": options.password.reveal()],
                                   http: http, options: options, tokens: tokens)
        }
    }

    static func grant(_ fields: [String: String], http: VendorHTTP, options: FlumeOptions, tokens: TokenBox) async throws(GatewayError) -> SessionCredentials {
        var body = fields
        body["client_id"] = options.clientID
        body["client_secret"] = options.clientSecret.reveal()
        var request = HTTPClientRequest(method: .post, url: options.network.base + "/oauth/token", timeout: options.network.timeout)
        request.headers.set(name: "Content-Type", value: "application/json")
        request.body = Data(JSONValue.object(body.mapValues(JSONValue.string)).render().utf8)
        do throws(GatewayError) {
            let answer = try await http.sendJSON(request, as: Envelope<WireToken>.self, context: "Flume login", use: .refresh)
            guard let token = answer.data?.first, answer.success != false else {
                throw GatewayError(.authFailed, message: "Flume refused the login: \(answer.message ?? "no token in the answer").")
            }
            http.redactor.set("access_token", token.access_token)
            if let refresh = token.refresh_token { http.redactor.set("refresh_token", refresh) }
            guard let user = JWTClaims.text("user_id", in: token.access_token) else {
                throw GatewayError(.malformedResponse, message: "Flume's token carries no usable user_id (a text or a whole number).")
            }
            tokens.set(.init(refresh: token.refresh_token, userID: user))
            return SessionCredentials(headers: [(name: "Authorization", value: "Bearer \(token.access_token)")], lifetime: token.expires_in ?? 604_800)
        } catch {
            guard fields["grant_type"] == "password", error.code == .authFailed || error.code == .badRequest || error.requiresReauthentication else { throw error }
            var refused = error
            refused.code = .authFailed
            refused.requiresReauthentication = false
            refused.message = "Flume refused the login of \(options.username) (HTTP \(error.httpStatus ?? 401))."
            refused.suggestion = "Check username, password_file, client_id and client_secret_file (the API client from Flume's portal: Settings → API Access)."
            http.holdOff(after: refused)
            throw refused
        }
    }
}

/// Flume's wall-clock times: `yyyy-MM-dd HH:mm:ss` in the sensor's time zone.
struct FlumeTime {
    let zone: LocalZone

    func format(_ date: Date) -> String {
        let parts = zone.components(of: date)
        func two(_ value: Int) -> String { value.zeroPadded(2) }
        return "\(parts.year)-\(two(parts.month))-\(two(parts.day)) \(two(parts.hour)):\(two(parts.minute)):\(two(parts.second))"
    }

    func day(_ date: Date) -> String { String(format(date).prefix(10)) }

    func minuteStart(_ date: Date) -> Date {
        // Offsets are whole minutes in every zone since 1972, so a local minute starts on a UTC minute.
        Date(timeIntervalSince1970: (date.timeIntervalSince1970 / 60).rounded(.down) * 60)
    }
}
