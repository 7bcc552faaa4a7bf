import CurlHTTP
import Foundation
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
    private let known = Mutex(Known())
    private let session: LoginSession

    private struct Known {
        var info: EnphaseInfo?
        var devices: [Device]?
        /// Endpoints that answered "not served" (404, or a redirect to an error page).
        var missing: Set<String> = []
    }

    public init(instanceID: String, options: EnphaseOptions, sink: VendorEventSink, context: VendorContext) throws(GatewayError) {
        self.instanceID = instanceID
        self.options = options
        self.sink = sink
        http = VendorHTTP(
            vendorID: instanceID, client: try VendorHTTP.newClient(), settings: VendorHTTP.Settings(options.network, retry: .none), sink: sink,
            time: TimeSource(context.clock), now: context.now, pinStore: context.pinStore, logger: context.logger
        )
        if let token = options.token { http.redactor.set("token", token.reveal()) }
        session = Self.makeSession(http: http, options: options)
    }

    var base: String {
        var root = options.network.url
        while root.hasSuffix("/") { root.removeLast() }
        return root
    }

    public var refreshesAllDevices: Bool { true }

    public func run() async throws {
        http.publishHealth()
        while !Task.isCancelled {
            try? await poll()
            try await http.time.sleep(for: options.network.pollInterval)
        }
    }

    public func refresh(_ device: DeviceID) async throws { try await poll(use: .refresh) }

    public func execute(_ command: DeviceCommand) async throws -> CommandOutcome {
        throw GatewayError(.vendorRejected, message: "The Envoy's values are read-only: \(command.device) has nothing to set.")
    }

    public func poll(use: QuotaScheduler.Use = .poll) async throws(GatewayError) {
        let info = try await readInfo(use: use)
        let authorizer: (any VendorAuthorizer)? = info.needsToken ? session : nil
        if info.needsToken, options.token == nil {
            let error = GatewayError(.authFailed, message: "The Envoy \(info.serial) runs firmware \(info.firmware), which wants the owner token.",
                                     suggestion: "Get an owner token at https://entrez.enphaseenergy.com (valid one year) and give it with token_file.")
            http.holdOff(after: error)
            throw error
        }
        var reading = EnphaseMapping.Reading()
        reading.production = try await optional("/production.json?details=1", WireProductionJSON.self, use: use, authorizer: authorizer)
        reading.v1 = try await optional("/api/v1/production", WireV1Production.self, use: use, authorizer: authorizer)
        reading.meters = try await optional("/ivp/meters", [WireMeterConfig].self, use: use, authorizer: authorizer)
        if reading.meters?.isEmpty == false {
            reading.readings = try await optional("/ivp/meters/readings", [WireMeterReading].self, use: use, authorizer: authorizer)
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
        let changed = known.withLock { known -> Bool in
            guard known.devices != devices else { return false }
            known.devices = devices
            return true
        }
        if changed { sink.send(.inventory(vendorID: instanceID, devices: devices)) }
        let now = http.now()
        sink.send(.state(devices[0].id, values, observedAt: now))
        for (id, state) in inverterStates { sink.send(.state(id, state, observedAt: now)) }
    }

    static func order(_ keys: some Sequence<String>) -> [String] {
        let preferred = ["solar_power", "home_power", "grid_power", "battery_power", "battery_level", "solar_energy", "home_energy",
                         "grid_import_energy", "grid_export_energy"]
        let present = Set(keys)
        return preferred.filter(present.contains)
    }

    // MARK: Requests

    private func readInfo(use: QuotaScheduler.Use) async throws(GatewayError) -> EnphaseInfo {
        if let info = known.withLock({ $0.info }) { return info }
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
        let response = try await http.send(request, use: use, expectsJSON: false, authorizer: authorizer, accepting: [301, 302, 303, 307, 308, 404])
        let head = response.body.prefix(64).drop { $0 == 32 || $0 == 10 || $0 == 13 || $0 == 9 }
        if response.status != 200 || head.first == UInt8(ascii: "<") {
            known.withLock { _ = $0.missing.insert(path) }
            return nil
        }
        return try http.decode(type, from: response, context: "Envoy \(path)")
    }

    /// The owner token as a bearer, and the session cookie `/auth/check_jwt` sets (firmware 7 and later).
    static func makeSession(http: VendorHTTP, options: EnphaseOptions) -> LoginSession {
        let url = { () -> String in
            var root = options.network.url
            while root.hasSuffix("/") { root.removeLast() }
            return root + "/auth/check_jwt"
        }()
        return LoginSession(time: http.time) { () async throws(GatewayError) -> SessionCredentials in
            guard let token = options.token?.reveal() else { throw GatewayError(.authFailed, message: "No owner token is configured.") }
            var request = HTTPClientRequest(url: url, timeout: options.network.timeout)
            request.headers.set(name: "Authorization", value: "Bearer \(token)")
            do throws(GatewayError) {
                let response = try await http.send(request, use: .refresh, expectsJSON: false)
                var headers: [(name: String, value: String)] = [(name: "Authorization", value: "Bearer \(token)")]
                for field in response.headers where field.name.lowercased() == "set-cookie" {
                    if let pair = field.value.split(separator: ";").first, pair.hasPrefix("sessionId=") {
                        http.redactor.set("session", String(pair.dropFirst("sessionId=".count)))
                        headers.append((name: "Cookie", value: String(pair)))
                    }
                }
                return SessionCredentials(headers: headers)
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
        let parts = token.split(separator: ".")
        guard parts.count >= 2 else { return nil }
        var payload = String(parts[1]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while payload.count % 4 != 0 { payload += "=" }
        guard let data = Data(base64Encoded: payload), let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              let exp = object["exp"] as? Double else { return nil }
        let date = Date(timeIntervalSince1970: exp)
        return date < Date() ? date : nil
    }
}
