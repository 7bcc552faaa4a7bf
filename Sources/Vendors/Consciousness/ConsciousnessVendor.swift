#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import CurlHTTP
import GatewayModel
import VendorKit
import Logging
import Resilience
import Synchronization

/// The `type: consciousness` vendor: the "house consciousness" backend (FastAPI prototype, seeds 001/002).
///
/// Polls `GET /api/v1/devices` and `GET /api/v1/consciousness/status` every poll interval (stretched by the
/// quota), maps the seven device types and the house itself (`<id>_house`, a hub with awareness and emotion),
/// switches devices with `PUT /devices/{id}/control` and batches with `POST /devices/batch-control`.
/// Every request goes through one `VendorHTTP` (breaker, retry, quota, health).
public final class ConsciousnessVendor: Vendor {
    public let instanceID: String
    public let typeName = "consciousness"
    /// The resilient HTTP layer (breaker, quota, health) of this instance.
    public let http: VendorHTTP
    private let options: ConsciousnessOptions
    private let sink: VendorEventSink
    private let session: LoginSession
    private let known = Mutex(Known())
    private let logger: Logger

    /// What was last reported, so inventory and availability are only sent when they change.
    private struct Known {
        var inventory: [Device]?
        var values: [String: [String: StateValue]] = [:]
        var offline: Set<String> = []
        /// Set when the backend has no status endpoint: the house device is then left out.
        var houseUnsupported = false
        /// Id problems (collisions, empty ids) already logged, so each is reported once.
        var reportedIDProblems: Set<String> = []
    }

    /// Polls cost two requests: the device list and the house status.
    static let pollCost = 2

    /// Creates the vendor on `client`; `pinStore` keeps `tls: first_use` pins (in memory only when nil).
    public init(
        instanceID: String, options: ConsciousnessOptions, sink: VendorEventSink, client: HTTPClient, time: TimeSource,
        now: @escaping @Sendable () -> Date = { Date() }, pinStore: (any TLSPinStore)? = nil,
        logger: Logger = Logger(label: "lbs-gateway.vendor")
    ) {
        // Before any device of this vendor exists, whoever made it (a test, the catalog).
        StateKeys.register(ConsciousnessVendorFactory.stateKeys)
        self.instanceID = instanceID
        self.options = options
        self.sink = sink
        self.logger = logger
        let settings = VendorHTTP.Settings(
            breaker: options.breaker, retry: options.retry,
            quota: options.quota.map { QuotaScheduler.Settings(budgets: $0) }, tls: options.tls
        )
        http = VendorHTTP(
            vendorID: instanceID, client: client, settings: settings, sink: sink, time: time, now: now, pinStore: pinStore, logger: logger
        )
        http.redactor.set("password", options.password)
        session = ConsciousnessSession.make(
            http: http, apiBase: options.apiBase, username: options.username, password: options.password, timeout: options.timeout
        )
    }

    /// Creates the vendor with its own HTTP client.
    public convenience init(
        instanceID: String, options: ConsciousnessOptions, sink: VendorEventSink,
        clock: any Clock<Duration> = ContinuousClock(), now: @escaping @Sendable () -> Date = { Date() },
        pinStore: (any TLSPinStore)? = nil, logger: Logger = Logger(label: "lbs-gateway.vendor")
    ) throws(GatewayError) {
        let client = try VendorHTTP.newClient()
        self.init(
            instanceID: instanceID, options: options, sink: sink, client: client, time: TimeSource(clock), now: now,
            pinStore: pinStore, logger: logger
        )
    }

    /// Successful logins so far.
    public var loginCount: Int { Int(session.loginCount) }

    /// The poll interval in force: the configured one, stretched so polls fit the quota's poll share;
    /// nil when a budget leaves no room for polling at all.
    public var effectivePollInterval: Duration? {
        guard let quota = http.quota else { return options.pollInterval }
        return quota.pollInterval(requested: options.pollInterval, cost: Self.pollCost)
    }

    // MARK: Vendor

    public func run() async throws {
        http.publishHealth()
        while !Task.isCancelled {
            if let interval = effectivePollInterval {
                // Failures are reported through the vendor's health; the next poll tries again.
                try? await poll()
                try await http.time.sleep(for: Self.nextPoll(after: interval, breakerOpenFor: http.breaker.nextAttemptIn))
            } else {
                // The declared budget is too small to poll; refreshes and commands still work.
                try await http.time.sleep(for: .seconds(3600))
            }
        }
    }

    /// The wait before the next poll: the poll interval, or less while the breaker is open, so its half-open probe is
    /// the poll that comes as soon as the breaker allows one (devices are back seconds after the backend is).
    static func nextPoll(after interval: Duration, breakerOpenFor remaining: Duration?) -> Duration {
        guard let remaining else { return interval }
        return min(interval, max(remaining, .milliseconds(10)))
    }

    /// One poll: the device list, then the house status. Public so tests and tools can poll on demand.
    public func poll() async throws(GatewayError) {
        let devices = try await fetchDevices(use: .poll)
        publish(devices, only: nil)
        try await pollHouse(use: .poll)
    }

    public func refresh(_ device: DeviceID) async throws {
        try await refreshDevice(device)
    }

    /// `refresh` with a typed error: the backend has no per-device GET, so the whole list is fetched.
    public func refreshDevice(_ device: DeviceID) async throws(GatewayError) {
        if device == ConsciousnessMapping.house(vendorID: instanceID).id {
            try await pollHouse(use: .refresh)
            return
        }
        let devices = try await fetchDevices(use: .refresh)
        guard devices.contains(where: { $0.device.id == device }) else { throw GatewayError.unknownDevice(device.rawValue) }
        publish(devices, only: device)
    }

    /// Reads one device back (the device list, or the house status) without publishing or commanding anything;
    /// settles a command whose outcome is unknown.
    public func readState(_ device: DeviceID) async throws -> [String: StateValue] {
        if device == ConsciousnessMapping.house(vendorID: instanceID).id {
            let request = HTTPClientRequest(url: "\(options.apiBase)/consciousness/status", timeout: options.timeout)
            let status = try await http.sendJSON(request, as: WireStatus.self, context: "consciousness status", use: .refresh, authorizer: session)
            return ConsciousnessMapping.houseValues(status, emotions: nil)
        }
        let devices = try await fetchDevices(use: .refresh)
        guard let mapped = devices.first(where: { $0.device.id == device }) else { throw GatewayError.unknownDevice(device.rawValue) }
        return mapped.values
    }

    public func execute(_ command: DeviceCommand) async throws -> CommandOutcome {
        try await executeCommand(command)
    }

    /// `execute` with a typed error. A failure after the request may have reached the backend (timeout, reset,
    /// 500/502/504) is not retried: it is thrown with `outcomeUnknown`, because the backend may still apply
    /// the first request after a newer command (a slow OFF landing after an ON).
    public func executeCommand(_ command: DeviceCommand) async throws(GatewayError) -> CommandOutcome {
        let action = try action(for: command)
        var request = HTTPClientRequest(
            method: .put, url: "\(options.apiBase)/devices/\(URLText.percentEncoded(command.vendorDeviceID))/control",
            timeout: options.timeout
        )
        request.body = WireControlRequest(action: action).body
        request.headers.set(name: "Content-Type", value: "application/json")
        let answer = try await http.sendJSON(
            request, context: "control answer", use: .command, authorizer: session, deadline: command.expiresAt,
            read: WireControlAnswer.init(json:)
        )
        if let status = answer.status?.lowercased(), status != "success" {
            throw http.redactor.redact(GatewayError(
                .vendorRejected,
                message: "Vendor '\(instanceID)' refused to \(action.replacing("_", with: " ")) '\(GatewayError.clip(command.vendorDeviceID))': "
                    + GatewayError.clip(answer.message ?? status) + "."
            ))
        }
        guard let device = answer.device else {
            // The served contract always returns the device; without it the switch is what we know.
            let confirmed: [String: StateValue] = ["state": .string(action == "turn_on" ? "ON" : "OFF")]
            remember(command.vendorDeviceID, confirmed)
            return CommandOutcome(confirmed: confirmed)
        }
        let mapped = ConsciousnessMapping.map(device, vendorID: instanceID, now: http.now(), temperatureUnit: options.temperatureUnit)
        remember(device.id, mapped.values)
        return CommandOutcome(confirmed: mapped.values)
    }

    /// Switches several devices in one request. Results are keyed by command id; commands that cannot be
    /// expressed fail on their own, without being sent. The confirmed state is returned as each item's
    /// outcome only (the gateway publishes it once).
    public func executeBatch(_ commands: [DeviceCommand]) async -> [String: Result<CommandOutcome, GatewayError>] {
        var results: [String: Result<CommandOutcome, GatewayError>] = [:]
        var items: [(command: DeviceCommand, action: String)] = []
        for command in commands {
            do throws(GatewayError) {
                items.append((command, try action(for: command)))
            } catch {
                results[command.id] = .failure(error)
            }
        }
        guard !items.isEmpty else { return results }

        let answer: WireBatchAnswer
        do throws(GatewayError) {
            var request = HTTPClientRequest(method: .post, url: "\(options.apiBase)/devices/batch-control", timeout: options.timeout)
            request.body = try Self.encode(WireBatchRequest(devices: items.map { .init(deviceID: $0.command.vendorDeviceID, action: $0.action) }))
            request.headers.set(name: "Content-Type", value: "application/json")
            // The earliest deadline of the batch bounds its retries (a lock in it must not go out late).
            let deadline = items.map(\.command.expiresAt).min()
            answer = try await http.sendJSON(
                request, as: WireBatchAnswer.self, context: "batch answer", use: .command, authorizer: session, deadline: deadline)
        } catch {
            for item in items { results[item.command.id] = .failure(error) }
            return results
        }

        // Match results by device id; fall back to position when the backend omits ids.
        var unused = Array(answer.results.indices)
        for (position, item) in items.enumerated() {
            let index = unused.first { answer.results[$0].deviceID == item.command.vendorDeviceID }
                ?? unused.first { answer.results[$0].deviceID == nil && $0 == position }
            guard let index else {
                results[item.command.id] = .failure(http.classifier.unexpectedShape(
                    "no result for device \(item.command.vendorDeviceID)", context: "batch answer"))
                continue
            }
            unused.removeAll { $0 == index }
            let result = answer.results[index]
            if result.status?.lowercased() == "success" {
                let confirmed: [String: StateValue] = ["state": .string(item.action == "turn_on" ? "ON" : "OFF")]
                remember(item.command.vendorDeviceID, confirmed)
                results[item.command.id] = .success(CommandOutcome(confirmed: confirmed))
            } else {
                results[item.command.id] = .failure(http.redactor.redact(GatewayError(
                    .vendorRejected,
                    message: "Vendor '\(instanceID)' refused to \(item.action.replacing("_", with: " ")) "
                        + "'\(GatewayError.clip(item.command.vendorDeviceID))': \(GatewayError.clip(result.message ?? result.status ?? "no reason given"))."
                )))
            }
        }
        return results
    }

    // MARK: Requests

    private func fetchDevices(use: QuotaScheduler.Use) async throws(GatewayError) -> [ConsciousnessMapping.Mapped] {
        let request = HTTPClientRequest(url: "\(options.apiBase)/devices", timeout: options.timeout)
        let list: WireDeviceList
        do throws(GatewayError) {
            list = try await http.sendJSON(request, as: WireDeviceList.self, context: "device list", use: use, authorizer: session)
        } catch where error.code == .notFound {
            // The device list is the backend's core route: a 404 means the url points elsewhere.
            var missing = error
            missing.suggestion = "Check the vendor's url: it must be the server root (e.g. http://host:8000) of the house "
                + "consciousness backend; the gateway tries again with a growing pause."
            http.holdOff(after: missing)
            throw missing
        }
        let now = http.now()
        let mapped = list.devices.map { ConsciousnessMapping.map($0, vendorID: instanceID, now: now, temperatureUnit: options.temperatureUnit) }
        let (devices, problems) = ConsciousnessMapping.assignIDs(mapped, vendorID: instanceID)
        let fresh = known.withLock { known in problems.filter { known.reportedIDProblems.insert($0).inserted } }
        for problem in fresh {
            logger.warning("Vendor '\(instanceID)': \(problem).")
        }
        return devices
    }

    private func pollHouse(use: QuotaScheduler.Use) async throws(GatewayError) {
        guard !known.withLock({ $0.houseUnsupported }) else { return }
        let status: WireStatus
        do throws(GatewayError) {
            let request = HTTPClientRequest(url: "\(options.apiBase)/consciousness/status", timeout: options.timeout)
            status = try await http.sendJSON(request, as: WireStatus.self, context: "consciousness status", use: use, authorizer: session)
        } catch where error.code == .notFound {
            // A backend without the consciousness routes: keep the devices, drop the house.
            let inventory = known.withLock { known -> [Device]? in
                known.houseUnsupported = true
                return known.inventory
            }
            if let inventory { publishInventory(inventory.filter { $0.vendorDeviceID != ConsciousnessMapping.houseDeviceID }) }
            return
        }
        var emotions: WireEmotion?
        if status.emotionalState == nil {
            let request = HTTPClientRequest(url: "\(options.apiBase)/consciousness/emotions", timeout: options.timeout)
            emotions = try? await http.sendJSON(request, as: WireEmotions.self, context: "emotions", use: use, authorizer: session).current
        }
        let house = ConsciousnessMapping.house(vendorID: instanceID)
        let values = ConsciousnessMapping.houseValues(status, emotions: emotions)
        remember(house.vendorDeviceID, values)
        sink.send(.state(house.id, values, observedAt: http.now()))
    }

    // MARK: Reporting

    /// Reports the inventory when it changed, availability changes, and the state of every device (or only `only`).
    private func publish(_ devices: [ConsciousnessMapping.Mapped], only: DeviceID?) {
        let includeHouse = !known.withLock { $0.houseUnsupported }
        let inventory = devices.map(\.device) + (includeHouse ? [ConsciousnessMapping.house(vendorID: instanceID)] : [])
        publishInventory(inventory)
        known.withLock { known in
            for mapped in devices where only == nil || mapped.device.id == only {
                let wasOffline = known.offline.contains(mapped.device.vendorDeviceID)
                if mapped.online == wasOffline {
                    if mapped.online { known.offline.remove(mapped.device.vendorDeviceID) } else { known.offline.insert(mapped.device.vendorDeviceID) }
                    sink.send(.availability(mapped.device.id, online: mapped.online))
                }
                known.values[mapped.device.vendorDeviceID, default: [:]].merge(mapped.values) { _, new in new }
                sink.send(.state(mapped.device.id, mapped.values, observedAt: mapped.observedAt))
            }
        }
    }

    private func publishInventory(_ inventory: [Device]) {
        known.withLock { known in
            guard known.inventory != inventory else { return }
            known.inventory = inventory
            sink.send(.inventory(vendorID: instanceID, devices: inventory))
        }
    }

    private func remember(_ vendorDeviceID: String, _ values: [String: StateValue]) {
        known.withLock { $0.values[vendorDeviceID, default: [:]].merge(values) { _, new in new } }
    }

    // MARK: Commands

    /// The backend action for a command: it can only switch power, so only `state` can be set.
    func action(for command: DeviceCommand) throws(GatewayError) -> String {
        let device = GatewayError.clip(command.device.rawValue)
        guard http.now() < command.expiresAt else { throw GatewayError.expired(commandID: command.id, expiredAt: command.expiresAt) }
        guard !command.changes.isEmpty else {
            throw GatewayError.invalidPayload("a command for '\(device)' needs at least one key, for example {\"state\":\"ON\"}")
        }
        let unsupported = command.changes.keys.filter { $0 != "state" }.sorted()
        if !unsupported.isEmpty {
            let why = unsupported.contains("lock") || unsupported.contains("cover")
                ? "it reports locks and doors but cannot lock, unlock, open or close them"
                : "it can only switch devices on and off"
            throw GatewayError(
                .vendorRejected,
                message: "Vendor '\(instanceID)' cannot set \(unsupported.joined(separator: ", ")) on '\(device)': \(why).",
                suggestion: "Send {\"state\":\"ON\"} or {\"state\":\"OFF\"}; other keys of this device are read-only in practice.",
                retryable: false
            )
        }
        let word: String
        switch command.changes["state"] {
        case .string(let text)?: word = text.uppercased()
        case .bool(let flag)?: word = flag ? "ON" : "OFF"
        default: throw GatewayError.invalidValue(key: "state", value: "\(command.changes["state"].map(\.description) ?? "null")", expected: "ON, OFF or TOGGLE")
        }
        switch word {
        case "ON": return "turn_on"
        case "OFF": return "turn_off"
        case "TOGGLE":
            let current = known.withLock { $0.values[command.vendorDeviceID]?["state"]?.string }
            switch current {
            case "ON": return "turn_off"
            case "OFF": return "turn_on"
            default:
                throw GatewayError(
                    .vendorRejected, message: "The state of '\(device)' is not known yet, so it cannot be toggled.",
                    suggestion: "Send {\"state\":\"ON\"} or {\"state\":\"OFF\"}, or wait for the next poll."
                )
            }
        default:
            throw GatewayError.invalidValue(key: "state", value: word, expected: "ON, OFF or TOGGLE")
        }
    }

    private static func encode(_ value: some Encodable) throws(GatewayError) -> Data {
        do {
            return try JSONEncoder().encode(value)
        } catch {
            throw GatewayError.internal("could not encode a request body")
        }
    }
}
