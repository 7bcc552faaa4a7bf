#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import CurlHTTP
import GatewayModel
import Logging
import Resilience
import Synchronization
import VendorKit

/// A Tesla Backup Gateway 2 / Powerwall+ / Powerwall 3 over its local API: one device `<id>_site` with the
/// site's power flows, energy counters, battery level, grid status and (where served) backup reserve and
/// operation mode.
///
/// A Powerwall 3 on the wired LAN serves only the aggregates, the state of energy and the grid status; every
/// other path answers 404. Those 404s are answers, not failures: the keys they would give are left out, and
/// `/api/operation` is asked again only once an hour.
///
/// Current firmware serves `/api/operation` but refuses to change it from the customer login (403): after the
/// first refusal `backup_reserve` and `operation_mode` are read-only on the device (Home Assistant shows sensors,
/// `/set` answers `read_only_key`). With `storage:` this is remembered for that firmware across restarts; another
/// firmware version may allow it again.
public final class PowerwallVendor: Vendor {
    public let instanceID: String
    public let typeName = "powerwall"
    /// The resilient HTTP layer (breaker, quota, health) of this instance.
    public let http: VendorHTTP
    private let options: PowerwallOptions
    private let sink: VendorEventSink
    private let session: LoginSession
    private let logger: Logger
    private let valueStore: (any VendorValueStore)?
    private let known = Mutex(Known())

    private struct Known {
        var device: Device?
        /// When `/api/operation` answered 404 (asked again an hour later).
        var operationMissingSince: Duration?
        var descriptionRead = false
        var siteName: String?
        var firmware: String?
        var last: PowerwallMapping.Reading?
        /// The gateway refused to change `/api/operation` (on this firmware): its settings are read-only.
        var operationRefused = false
    }

    /// The cache's key for a refused `/api/operation` write; the value is the firmware it happened on.
    static let refusalKey = "operation_write_refused"

    /// 429 and 503 pause every request for 5 minutes, as Tesla's own clients do; a refused password too.
    static let cooldown = Duration.seconds(300)
    /// How often a missing `/api/operation` is asked for again (a firmware update may add it).
    static let operationRecheck = Duration.seconds(3600)

    public init(instanceID: String, options: PowerwallOptions, sink: VendorEventSink, context: VendorContext) throws(GatewayError) {
        self.instanceID = instanceID
        self.options = options
        self.sink = sink
        self.logger = context.logger
        self.valueStore = context.valueStore
        // No blind retries: the next poll is 5 s away, and a command is read back instead of re-sent.
        var settings = VendorHTTP.Settings(options.network, retry: .none)
        settings.holdOffBase = Self.cooldown
        settings.holdOffCap = Self.cooldown
        http = VendorHTTP(
            vendorID: instanceID, client: try VendorHTTP.newClient(), settings: settings, sink: sink, time: TimeSource(context.clock), now: context.now,
            pinStore: context.pinStore, logger: context.logger
        )
        http.redactor.set("password", options.password)
        session = PowerwallSession.make(http: http, options: options)
    }

    /// Successful logins so far.
    public var loginCount: Int { Int(session.loginCount) }

    public var siteID: DeviceID { DeviceID(vendorInstance: instanceID, vendorDeviceID: PowerwallMapping.siteID) }

    public var refreshesAllDevices: Bool { true }

    /// A poll costs up to four requests (aggregates, state of energy, grid status, operation).
    static let pollCost = 4

    var pollInterval: Duration {
        guard let quota = http.quota else { return options.network.pollInterval }
        return quota.pollInterval(requested: options.network.pollInterval, cost: Self.pollCost) ?? .seconds(60)
    }

    // MARK: Vendor

    public func run() async throws {
        http.publishHealth()
        while !Task.isCancelled {
            // Failures are reported through the vendor's health; the next poll tries again.
            try? await poll()
            try await http.time.sleep(for: pollInterval)
        }
    }

    /// One poll: read, describe the site once, publish. Public so tests and tools can poll on demand.
    public func poll(use: QuotaScheduler.Use = .poll) async throws(GatewayError) {
        let reading = try await read(use: use)
        if known.withLock({ !$0.descriptionRead }) { await describe() }
        let changed = known.withLock { known -> Device? in
            known.last = reading
            return announce(&known)
        }
        if let changed { sink.send(.inventory(vendorID: instanceID, devices: [changed])) }
        sink.send(.state(siteID, PowerwallMapping.state(reading), observedAt: http.now()))
    }

    /// The site device from the last reading; returned when it differs from the one announced.
    private func announce(_ known: inout Known) -> Device? {
        guard let reading = known.last else { return nil }
        let device = PowerwallMapping.device(vendorID: instanceID, reading: reading, siteName: known.siteName, firmware: known.firmware,
                                             settingsWritable: !known.operationRefused)
        guard known.device != device else { return nil }
        known.device = device
        return device
    }

    /// The gateway refused a write to `/api/operation`: its settings become read-only (the device is announced
    /// again, so Home Assistant shows sensors), remembered in the cache for this firmware.
    private func operationRefused() async {
        let (device, firmware) = known.withLock { known -> (Device?, String?) in
            known.operationRefused = true
            return (announce(&known), known.firmware)
        }
        if let device { sink.send(.inventory(vendorID: instanceID, devices: [device])) }
        logger.notice("powerwall \(instanceID): the gateway refuses changes to the backup reserve and operation mode; they are read-only now")
        do {
            try await valueStore?.store(firmware ?? "", key: Self.refusalKey, vendorID: instanceID)
        } catch {
            logger.warning("powerwall \(instanceID): cannot remember the refused write in the cache: \(error)")
        }
    }

    public func refresh(_ device: DeviceID) async throws {
        guard device == siteID else { throw GatewayError.unknownDevice(device.rawValue) }
        try await poll(use: .refresh)
    }

    public func readState(_ device: DeviceID) async throws -> [String: StateValue] {
        guard device == siteID else { throw GatewayError.unknownDevice(device.rawValue) }
        return PowerwallMapping.state(try await read(use: .refresh))
    }

    public func execute(_ command: DeviceCommand) async throws -> CommandOutcome {
        try await change(command)
    }

    // MARK: Reading

    /// The aggregates (required) and what else this gateway serves.
    func read(use: QuotaScheduler.Use) async throws(GatewayError) -> PowerwallMapping.Reading {
        do throws(GatewayError) {
            let aggregates = try await get("/api/meters/aggregates", WireAggregates.self, context: "meter aggregates", use: use)
            var reading = PowerwallMapping.Reading(aggregates: aggregates)
            reading.soe = try await optional("/api/system_status/soe", WireStateOfEnergy.self, context: "state of energy", use: use)
            reading.grid = try await optional("/api/system_status/grid_status", WireGridStatus.self, context: "grid status", use: use)
            let now = http.time.now()
            let askOperation = known.withLock { known in known.operationMissingSince.map { now - $0 >= Self.operationRecheck } ?? true }
            if askOperation {
                reading.operation = try await optional("/api/operation", WireOperation.self, context: "operation", use: use)
                known.withLock { $0.operationMissingSince = reading.operation == nil ? now : nil }
            }
            return reading
        } catch {
            throw cooled(error)
        }
    }

    /// Site name and firmware for the device description, read once; a gateway that serves neither is fine.
    private func describe() async {
        let name = try? await optional("/api/site_info", WireSiteInfo.self, context: "site info", use: .refresh)?.siteName
        let firmware = try? await optional("/api/status", WireStatus.self, context: "status", use: .refresh)?.version
        let version = (firmware ?? nil).map { String($0.split(separator: " ").first ?? Substring($0)) }
        // A refusal remembered from an earlier run holds for the same firmware only.
        let refusedOn = try? await valueStore?.storedValue(Self.refusalKey, vendorID: instanceID)
        known.withLock { known in
            known.descriptionRead = true
            known.siteName = name ?? nil
            known.firmware = version
            if let refusedOn, refusedOn == (version ?? "") { known.operationRefused = true }
        }
    }

    private func request(_ path: String, method: HTTPClientRequest.Method = .get, body: Data? = nil) -> HTTPClientRequest {
        var request = HTTPClientRequest(method: method, url: options.base + path, timeout: options.network.timeout)
        request.headers.set(name: "Accept", value: "application/json")
        if body != nil { request.headers.set(name: "Content-Type", value: "application/json") }
        request.body = body
        return request
    }

    private func get<T: Decodable>(_ path: String, _ type: T.Type, context: String, use: QuotaScheduler.Use) async throws(GatewayError) -> T {
        try await http.sendJSON(request(path), as: type, context: "Powerwall \(context)", use: use, authorizer: session)
    }

    /// An endpoint some gateways do not serve: nil on 404.
    private func optional<T: Decodable>(_ path: String, _ type: T.Type, context: String, use: QuotaScheduler.Use) async throws(GatewayError) -> T? {
        let response = try await http.send(request(path), use: use, authorizer: session, accepting: [404])
        guard response.status != 404 else { return nil }
        return try http.decode(type, from: response, context: "Powerwall \(context)")
    }

    // MARK: Commands

    /// `backup_reserve` and `operation_mode` through `POST /api/operation` (and `/api/config/completed`, which
    /// older firmware needs to apply it). Gateways that refuse it answer `vendor_rejected` with the reason.
    func change(_ command: DeviceCommand) async throws(GatewayError) -> CommandOutcome {
        guard command.device == siteID else { throw GatewayError.unknownDevice(command.device.rawValue) }
        let deadline = command.expiresAt
        do throws(GatewayError) {
            let current = try await optional("/api/operation", WireOperation.self, context: "operation", use: .command)
            guard let current else {
                throw Self.rejected("This Tesla gateway does not serve /api/operation (a Powerwall 3 on the wired LAN serves only power, "
                    + "battery level and grid status), so the backup reserve and the operation mode cannot be changed locally. Use the Tesla app.")
            }
            var wanted = current
            if let reserve = command.changes["backup_reserve"]?.number { wanted.backupReservePercent = reserve }
            if let mode = command.changes["operation_mode"]?.string { wanted.realMode = mode }
            let body: Data
            do { body = try JSONEncoder().encode(wanted) } catch { throw GatewayError.internal("could not encode the operation") }
            let answer = try await http.send(
                request("/api/operation", method: .post, body: body), use: .command, authorizer: session, deadline: deadline,
                accepting: [403, 404, 405, 501]
            )
            if answer.status != 200, answer.status != 202, answer.status != 204 {
                if answer.status == 403 { await operationRefused() }
                throw Self.rejected("The Powerwall refused to change the operation (HTTP \(answer.status)): current Tesla firmware lets only the "
                    + "installer account change the backup reserve and the mode over the local API, not the customer login. Use the Tesla app.")
            }
            _ = try? await http.send(request("/api/config/completed"), use: .command, authorizer: session, deadline: deadline, accepting: [404, 405])
            let confirmed = PowerwallMapping.state(PowerwallMapping.Reading(aggregates: WireAggregates(), operation: try await get(
                "/api/operation", WireOperation.self, context: "operation", use: .command
            )))
            for (key, value) in command.changes where confirmed[key] != value {
                if key == "backup_reserve", let want = value.number, let got = confirmed[key]?.number, abs(want - got) < 0.05 { continue }
                throw Self.rejected("The Powerwall accepted the change but still reports \(key) = \(confirmed[key]?.description ?? "nothing").")
            }
            return CommandOutcome(confirmed: confirmed)
        } catch {
            throw cooled(error)
        }
    }

    static func rejected(_ reason: String) -> GatewayError {
        GatewayError(.vendorRejected, message: reason, suggestion: "Change it in the Tesla app; the gateway shows the new value on its next poll.")
    }

    // MARK: Cooldown

    /// 429, and 503 (the gateway is busy), pause every request for 5 minutes: never a tight loop.
    static func startsCooldown(_ error: GatewayError) -> Bool {
        error.code == .rateLimited || (error.code == .vendorServerError && error.httpStatus == 503)
    }

    static func cooldownError(_ error: GatewayError) -> GatewayError {
        var cooled = error
        cooled.message = "The Powerwall asked the gateway to slow down (HTTP \(error.httpStatus ?? 429)); it pauses all requests for 5 min."
        cooled.suggestion = "Nothing to do if it passes; if it repeats, raise poll_interval or check other clients of the Tesla gateway."
        return cooled
    }

    private func cooled(_ error: GatewayError) -> GatewayError {
        guard Self.startsCooldown(error) else { return error }
        let cooled = Self.cooldownError(error)
        http.holdOff(after: cooled, for: Self.cooldown)
        return cooled
    }
}
