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

/// An Enphase IQ Gateway (Envoy) over its local API: one device `<id>_<serial>` with solar, and with CTs the
/// home and grid flows and counters, and an AC Battery's level and power; optionally one device per
/// microinverter. `/info` (no authentication) comes first; firmware 7 and later get the owner token as a bearer
/// and a session cookie from `/auth/check_jwt`. Requests never follow redirects: the Envoy answers a path it
/// does not serve with a redirect to an error page, which is taken as "not served".
public final class EnphaseVendor: Vendor {
    public let instanceID: String
    public let typeName = "enphase"
    public let http: VendorHTTP
    private let options: EnphaseOptions
    private let sink: VendorEventSink
    private let inventory = InventoryTracker()
    private let known = Mutex(Known())
    private let session: LoginSession
    /// The gateway's serial once `/info` was read: the Enlighten token is issued for it.
    private let serial = SerialBox()

    final class SerialBox: Sendable {
        private let value = Mutex<String?>(nil)
        var current: String? { value.withLock { $0 } }
        func set(_ serial: String) { value.withLock { $0 = serial } }
    }

    private struct Known {
        var info: EnphaseInfo?
        /// Endpoints that answered "not served" (404, or a redirect to an error page).
        var missing: Set<String> = []
    }

    public init(instanceID: String, options: EnphaseOptions, sink: VendorEventSink, context: VendorContext) throws(GatewayError) {
        self.instanceID = instanceID
        self.options = options
        self.sink = sink
        http = try VendorHTTP(vendorID: instanceID, settings: Self.envoySettings(options), sink: sink, context: context)
        if let token = options.token { http.redactor.set("token", token) }
        if let login = options.enlighten { http.redactor.set("password", login.password) }
        // Enphase's cloud is checked against the system CA store whatever the Envoy's own `tls` policy; its health
        // is the Envoy's (a failed login shows there), so its own events are not sent.
        let cloud = options.enlighten == nil ? nil : VendorHTTP(
            vendorID: instanceID, client: try VendorHTTP.newClient(),
            settings: VendorHTTP.Settings(NetworkOptions(url: options.enlighten?.enlightenURL ?? "", timeout: .seconds(30)), retry: .none),
            sink: VendorEventSink { _ in }, time: TimeSource(context.clock), now: context.now, logger: context.logger
        )
        if let login = options.enlighten { cloud?.redactor.set("password", login.password) }
        session = Self.makeSession(http: http, cloud: cloud, options: options, serial: serial)
    }

    var base: String { options.network.base }

    /// The Envoy's nightly reset is expected: failures to reach it then are quiet.
    private static func envoySettings(_ options: EnphaseOptions) -> VendorHTTP.Settings {
        var settings = VendorHTTP.Settings(options.network, retry: .none)
        settings.expectedOutage = options.nightlyOutage
        return settings
    }

    public var refreshesAllDevices: Bool { true }

    public func run() async throws {
        try await http.runPolling(every: { [options] in options.network.pollInterval }) { try await self.poll() }
    }

    public func refresh(_ device: DeviceID) async throws { try await poll(use: .refresh) }

    public func execute(_ command: DeviceCommand) async throws -> CommandOutcome {
        throw GatewayError(.vendorRejected, message: "The Envoy's values are read-only: \(command.device) has nothing to set.")
    }

    public func poll(use: QuotaScheduler.Use = .poll) async throws(GatewayError) {
        let info = try await readInfo(use: use)
        let authorizer: (any VendorAuthorizer)? = info.needsToken ? session : nil
        if info.needsToken, options.token == nil, options.enlighten == nil {
            let error = GatewayError(.authFailed, message: "The Envoy \(info.serial) runs firmware \(info.firmware), which wants the owner token.",
                                     suggestion: "Get an owner token at https://entrez.enphaseenergy.com (valid one year) and give it with token_file.")
            http.holdOff(after: error)
            throw error
        }
        var reading = EnphaseMapping.Reading(firmware: info.firmware)
        reading.production = try await optional("/production.json?details=1", WireProductionJSON.self, use: use, authorizer: authorizer)
        reading.v1 = try await optional("/api/v1/production", WireV1Production.self, use: use, authorizer: authorizer)
        reading.meters = try await optional("/ivp/meters", [WireMeterConfig].self, use: use, authorizer: authorizer)
        if reading.meters?.isEmpty == false {
            reading.readings = try await optional("/ivp/meters/readings", [WireMeterReading].self, use: use, authorizer: authorizer)
        }
        if info.needsToken {
            reading.secctrl = try await optional("/ivp/ensemble/secctrl", WireSecCtrl.self, use: use, authorizer: authorizer)
            if (reading.secctrl?.maxEnergy ?? 0) > 0 {
                reading.ensemblePower = try await optional("/ivp/ensemble/power", WireEnsemblePower.self, use: use, authorizer: authorizer)
            }
        }
        let values = EnphaseMapping.state(reading)
        guard !values.isEmpty else {
            throw GatewayError(.malformedResponse, message: "The Envoy \(info.serial) served neither production.json nor /api/v1/production.")
        }
        var devices = [EnphaseMapping.device(vendorID: instanceID, info: info, keys: Self.order(values.keys))]
        var inverterStates: [(DeviceID, [String: StateValue])] = []
        if options.inverters, let list = try await optional("/api/v1/production/inverters", [WireInverter].self, use: use, authorizer: authorizer) {
            for inverter in list where !inverter.serialNumber.isEmpty {
                let device = Device(vendorID: instanceID, vendorDeviceID: Slug.make(inverter.serialNumber), name: "Microinverter \(inverter.serialNumber)",
                                    type: .energyMeter, manufacturer: "Enphase", model: "Microinverter", serialNumber: inverter.serialNumber,
                                    writableKeys: [], keys: ["power", "max_power"])
                devices.append(device)
                var state: [String: StateValue] = [:]
                if let watts = inverter.lastReportWatts { state["power"] = .number(watts) }
                if let peak = inverter.maxReportWatts { state["max_power"] = .number(peak) }
                inverterStates.append((device.id, state))
            }
        }
        inventory.announce(devices, vendorID: instanceID, sink: sink)
        let now = http.now()
        sink.send(.state(devices[0].id, values, observedAt: now))
        for (id, state) in inverterStates { sink.send(.state(id, state, observedAt: now)) }
    }

    static func order(_ keys: some Sequence<String>) -> [String] {
        let main = ["solar_power", "home_power", "grid_power", "battery_power", "battery_level", "solar_energy", "home_energy",
                    "grid_import_energy", "grid_export_energy", "voltage", "frequency"]
        let perPhase = ["solar_power", "home_power", "grid_power", "solar_energy", "home_energy", "grid_import_energy", "grid_export_energy", "voltage"]
            .flatMap { key in (1...3).map { "\(key)_l\($0)" } }
        let present = Set(keys)
        return (main + perPhase).filter(present.contains)
    }

    // MARK: Requests

    private func readInfo(use: QuotaScheduler.Use) async throws(GatewayError) -> EnphaseInfo {
        if let info = known.withLock({ $0.info }) { return info }
        defer { if let info = known.withLock({ $0.info }) { serial.set(info.serial) } }
        var request = HTTPClientRequest(url: base + "/info", timeout: options.network.timeout)
        request.headers.set(name: "Accept", value: "application/xml")
        let response = try await http.send(request, use: use, expectsJSON: false)
        guard let info = EnphaseInfo.parse(String(decoding: response.body, as: UTF8.self)) else {
            throw http.classifier.unexpectedShape("it has no <sn> serial number", context: "Envoy /info")
        }
        known.withLock { $0.info = info }
        return info
    }

    /// An endpoint some firmwares do not serve: nil on 404, on a redirect, or on an HTML page in place of JSON.
    private func optional<T: Decodable>(_ path: String, _ type: T.Type, use: QuotaScheduler.Use, authorizer: (any VendorAuthorizer)?) async throws(GatewayError) -> T? {
        if known.withLock({ $0.missing.contains(path) }) { return nil }
        var request = HTTPClientRequest(url: base + path, timeout: options.network.timeout)
        request.headers.set(name: "Accept", value: "application/json")
        // Firmware before 7 protects some paths (the inverter list) with Digest as `envoy`, password the serial's
        // last six digits; curl answers only when challenged.
        if let info = known.withLock({ $0.info }), !info.needsToken { request.digest = (user: "envoy", password: String(info.serial.suffix(6))) }
        let response = try await http.send(request, use: use, expectsJSON: false, authorizer: authorizer, accepting: [301, 302, 303, 307, 308, 404])
        let head = response.body.prefix(64).drop { $0 == 32 || $0 == 10 || $0 == 13 || $0 == 9 }
        if response.status != 200 || head.first == UInt8(ascii: "<") {
            known.withLock { _ = $0.missing.insert(path) }
            return nil
        }
        return try http.decode(type, from: response, context: "Envoy \(path)")
    }

    /// The owner token as a bearer, and the session cookie `/auth/check_jwt` sets (firmware 7 and later).
    static func makeSession(http: VendorHTTP, cloud: VendorHTTP?, options: EnphaseOptions, serial: SerialBox) -> LoginSession {
        let url = options.network.base + "/auth/check_jwt"
        return LoginSession(time: http.time) { () async throws(GatewayError) -> SessionCredentials in
            let token: String
            if let given = options.token?.reveal() {
                token = given
            } else if let login = options.enlighten, let cloud, let serial = serial.current {
                token = try await enlightenToken(login, serial: serial, cloud: cloud, http: http)
            } else {
                throw GatewayError(.authFailed, message: "No owner token is configured.")
            }
            var request = HTTPClientRequest(url: url, timeout: options.network.timeout)
            request.headers.set(name: "Authorization", value: "Bearer \(token)")
            do throws(GatewayError) {
                let response = try await http.send(request, use: .refresh, expectsJSON: false)
                var headers: [(name: String, value: String)] = [(name: "Authorization", value: "Bearer \(token)")]
                let session = SessionCookies.named(["sessionId"], in: response.headers)
                for cookie in session { http.redactor.set("session", cookie.value) }
                if !session.isEmpty { headers.append((name: "Cookie", value: SessionCookies.header(session))) }
                // A token from Enlighten is fetched again before it expires (a given token is the user's to renew).
                let lifetime = options.token == nil ? claimedExpiry(token).map { $0.timeIntervalSince(http.now()) } : nil
                return SessionCredentials(headers: headers, lifetime: lifetime.map { max(60, $0) })
            } catch {
                guard error.code == .authFailed else { throw error }
                var refused = error
                refused.requiresReauthentication = false
                refused.message = "The Envoy refused the owner token (HTTP \(error.httpStatus ?? 401))" + (Self.expiry(token).map { ": it expired on \(ISOTime.format($0))" } ?? "") + "."
                refused.suggestion = "Get a new owner token at https://entrez.enphaseenergy.com (valid one year) and put it in token_file."
                http.holdOff(after: refused)
                throw refused
            }
        }
    }

    /// The `exp` claim of a JWT, when it is in the past.
    static func expiry(_ token: String) -> Date? {
        guard let exp = claimedExpiry(token), exp < Date() else { return nil }
        return exp
    }

    /// A JWT's `exp` claim (never verified: the Envoy does that).
    static func claimedExpiry(_ token: String) -> Date? { JWTClaims.expiry(token) }

    /// The Enlighten login: `login/login.json` (form) gives a session id, `entrez …/tokens` the gateway's JWT.
    static func enlightenToken(_ login: EnphaseOptions.Enlighten, serial: String, cloud: VendorHTTP, http: VendorHTTP) async throws(GatewayError) -> String {
        do throws(GatewayError) {
            var form = HTTPClientRequest(method: .post, url: NetworkOptions.root(login.enlightenURL) + "/login/login.json?", timeout: .seconds(30))
            form.headers.set(name: "Content-Type", value: "application/x-www-form-urlencoded")
            let fields = [("user[email]", login.username), ("user[password]", login.password.reveal())]
            form.body = FormEncoding.body(fields)
            struct Session: Decodable { var session_id: String? }
            let session = try await cloud.sendJSON(form, as: Session.self, context: "Enlighten login", use: .refresh)
            guard let id = session.session_id, !id.isEmpty else {
                throw GatewayError(.authFailed, message: "Enlighten accepted the login but gave no session: multi-factor authentication is on for this account.",
                                   suggestion: "Turn off MFA for the account, or give an owner token with token_file.")
            }
            cloud.redactor.set("enlighten-session", id)
            var tokens = HTTPClientRequest(method: .post, url: NetworkOptions.root(login.entrezURL) + "/tokens", timeout: .seconds(30))
            tokens.headers.set(name: "Content-Type", value: "application/json")
            let body: JSONValue = ["session_id": .string(id), "serial_num": .string(serial), "username": .string(login.username)]
            tokens.body = Data(body.render().utf8)
            let answer = try await cloud.send(tokens, use: .refresh, expectsJSON: false)
            let token = String(decoding: answer.body, as: UTF8.self).trimmingWhitespace()
            guard token.split(separator: ".").count == 3 else {
                throw cloud.classifier.unexpectedShape("it is not a token", context: "Enphase token service answer")
            }
            http.redactor.set("token", token)
            return token
        } catch {
            var refused = error
            if error.code == .authFailed || error.requiresReauthentication {
                refused.requiresReauthentication = false
                refused.code = .authFailed
                if !error.message.contains("multi-factor") {
                    refused.message = "Enlighten refused the login of \(login.username) (HTTP \(error.httpStatus ?? 401))."
                    refused.suggestion = "Check username and password_file (the Enphase account's), or give an owner token with token_file."
                }
                // A refused password cannot get better by asking again at once.
                http.holdOff(after: refused)
            }
            throw refused
        }
    }
}
