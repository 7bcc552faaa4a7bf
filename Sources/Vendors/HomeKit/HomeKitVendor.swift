#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import HAP
import Logging
import Resilience
import Synchronization
import VendorKit

/// HomeKit accessories over HAP (IP), the gateway as their controller (what Home Assistant's homekit_controller
/// does with aiohomekit):
/// - Pairing: pair-setup once with the setup code (from the config, or `homekit/pair`); the controller's
///   key and each accessory's key stay in the cache; every connection pair-verifies and is encrypted.
/// - Devices: `<id>_<name>` for the accessory with aid 1, `<id>_<name>_<aid>` behind a bridge (`HomeKitMapping`).
/// - State: the values in `/accessories`, then events for every characteristic with `ev`, polls for the rest.
/// - Commands: one `PUT /characteristics` per command (a timed write where the accessory asks for one); the
///   state changes when the accessory reports it. A request that times out is `outcomeUnknown`: the gateway
///   reads the accessory back instead of sending it again.
public final class HomeKitVendor: Vendor, VendorRequestHandling {
    public let instanceID: String
    public let typeName = "homekit"
    public let requestNames = ["homekit/pair", "homekit/unpair", "homekit/identify", "homekit/discover"]
    let options: HomeKitOptions
    private let sink: VendorEventSink
    private let context: VendorContext
    private let time: TimeSource
    let links: [AccessoryLink]
    private let store: HomeKitStore?
    private let shared = Mutex(Shared())

    private struct Shared {
        var identity: ControllerIdentity?
        var reported: VendorHealth?
        var lastSuccess: Date?
        var announced: [DeviceID] = []
        var lastBrowse: (at: Duration, records: [HAPServiceRecord])?
        var mdnsProblem: String?
    }

    public init(instanceID: String, options: HomeKitOptions, sink: VendorEventSink, context: VendorContext) {
        self.instanceID = instanceID
        self.options = options
        self.sink = sink
        self.context = context
        time = TimeSource(context.clock)
        links = options.accessories.map(AccessoryLink.init)
        store = context.valueStore.map { HomeKitStore(values: $0, vendorID: instanceID) }
    }

    // MARK: Running

    public func run() async throws {
        guard let store else {
            let error = GatewayError(.internal, message: "The HomeKit vendor '\(instanceID)' has no storage for its pairings.",
                                     suggestion: "Add 'storage: {path: /var/lib/lbs-gateway/gateway.sqlite}' to the configuration.")
            sink.send(.health(VendorHealth(vendorID: instanceID, state: .down, breaker: nil, lastError: error)))
            throw error
        }
        let identity = try await store.controller()
        shared.withLock { $0.identity = identity }
        // The last known devices first (offline until their accessory answers), so they exist from the start.
        for link in links {
            let pairing = try? await store.pairing(link.name)
            var plans: [HKDevicePlan] = []
            if pairing != nil, let bytes = try? await store.database(link.name), let accessories = try? AccessoryDatabase.parse(bytes) {
                plans = HomeKitMapping.plans(vendorID: instanceID, name: link.name, accessories: accessories)
            }
            link.state.withLock {
                $0.pairing = pairing
                $0.plans = plans
            }
        }
        announceInventory()
        for link in links {
            for plan in link.state.withLock({ $0.plans }) { sink.send(.availability(plan.device.id, online: false)) }
        }
        await withTaskGroup(of: Void.self) { group in
            if options.browser != nil {
                group.addTask { await self.watchMDNS() }
            }
            for link in links {
                group.addTask { await self.keepConnected(link, store: store) }
            }
        }
    }

    // MARK: mDNS

    /// Reads mDNS every `mdnsInterval`: new addresses for accessories found by id, and `c#` changes (their
    /// databases are read again).
    private func watchMDNS() async {
        while !Task.isCancelled {
            do {
                _ = try await browse()
            } catch {
                // Said once per change of reason; the accessories that need mDNS report it as their error.
                let message = (error as? GatewayError)?.message ?? "\(error)"
                let first = shared.withLock { shared -> Bool in
                    defer { shared.mdnsProblem = message }
                    return shared.mdnsProblem != message
                }
                if first { context.logger.info("homekit \(instanceID): \(message)") }
            }
            do { try await time.sleep(for: options.mdnsInterval) } catch { return }
        }
    }

    /// Browses now (or returns what a browse in the last 2 s found) and hands each accessory its record.
    @discardableResult
    func browse(fresh: Bool = false) async throws -> [HAPServiceRecord] {
        guard let browser = options.browser else {
            throw AvahiBrowser.unavailable("this vendor has no mDNS browser")
        }
        if !fresh, let (at, records) = shared.withLock({ $0.lastBrowse }), time.now() - at < .seconds(2) { return records }
        let records = try await browser.browse()
        shared.withLock {
            $0.lastBrowse = (time.now(), records)
            $0.mdnsProblem = nil
        }
        for link in links {
            guard let id = link.accessoryID, let record = records.first(where: { $0.deviceID == id.uppercased() }) else { continue }
            let (moved, changed) = link.state.withLock { state -> (Bool, Bool) in
                let old = state.discovered
                state.discovered = record
                let moved = old.map { $0.address != record.address || $0.port != record.port } ?? true
                let changed = state.configNumber != nil && record.configNumber != nil && state.configNumber != record.configNumber
                return (moved, changed)
            }
            if changed {
                context.logger.info("homekit: '\(link.name)' changed its accessories (c# \(record.configNumber ?? 0)); reading them again")
                link.reload.signal()
            }
            if moved, link.followsMDNS, !link.isConnected { link.wake.signal() }
        }
        return records
    }

    /// One accessory's life: pair when it must and can, then sessions with reconnects until cancelled.
    private func keepConnected(_ link: AccessoryLink, store: HomeKitStore) async {
        var failures = 0
        while !Task.isCancelled {
            let seen = link.wake.version
            let pairing = link.state.withLock { $0.pairing }
            var delay: Duration
            do {
                if link.followsMDNS, link.address == nil || failures > 0 {
                    // Found by its id: ask mDNS where it is now (it may have a new address after a drop).
                    do { try await browse() } catch where link.address == nil { throw error }
                    if link.address == nil {
                        throw GatewayError(.vendorUnreachable, message: "The HomeKit accessory '\(link.name)' (id \(link.accessoryID ?? "?")) is not found over mDNS.",
                                           suggestion: "Check that it is powered and on this network (avahi-browse -rt _hap._tcp lists what is seen).")
                    }
                }
                if pairing == nil {
                    guard let code = link.options.setupCode?.reveal() else {
                        record(link, error: GatewayError(
                            .authFailed, message: "The HomeKit accessory '\(link.name)' is not paired and has no setup code.",
                            suggestion: "Set setup_code_file for it, or pair it with the bridge request homekit/pair {\"vendor\":\"\(instanceID)\",\"name\":\"\(link.name)\",\"setup_code\":\"XXX-XX-XXX\"}."
                        ))
                        await link.wake.change(after: seen)
                        continue
                    }
                    try await pair(link, setupCode: code, store: store)
                    continue
                }
                let opened = time.now()
                try await session(link, store: store)
                if time.now() - opened >= options.reconnect.stableAfter { failures = 0 }
                failures += 1
                delay = backoff(failures)
            } catch is CancellationError {
                return
            } catch {
                let failure = error as? GatewayError ?? GatewayError(.vendorUnreachable, message: "The HomeKit accessory '\(link.name)' failed: \(error)")
                disconnected(link, error: failure)
                failures += 1
                delay = failure.code == .authFailed ? options.reconnect.authRetryDelay : backoff(failures)
                if let asked = failure.retryAfter { delay = max(delay, asked) }
            }
            if Task.isCancelled { return }
            await link.wake.wait(after: seen, timeout: delay, clock: context.clock)
        }
    }

    private func backoff(_ failures: Int) -> Duration {
        let growth = Double(sign: .plus, exponent: min(max(failures - 1, 0), 30), significand: 1)
        return min(options.reconnect.maxDelay, ReconnectingStream.halfToFull(.clampedSeconds(options.reconnect.minDelay.inSeconds * growth)))
    }

    /// One encrypted session: pair-verify, the attribute database, subscriptions, then polls until it ends.
    private func session(_ link: AccessoryLink, store: HomeKitStore) async throws {
        guard let (host, port) = link.address else {
            throw GatewayError(.vendorUnreachable, message: "The HomeKit accessory '\(link.name)' has no address.", suggestion: "Set host and port for it.")
        }
        guard let pairing = link.state.withLock({ $0.pairing }), let identity = shared.withLock({ $0.identity }) else { return }
        let vendor = self
        try await HAPConnection.withConnection(
            host: host, port: port, label: link.name, connectTimeout: options.connectTimeout, time: time,
            onEvent: { values in vendor.received(values, link: link) }
        ) { connection in
            try await vendor.verify(connection, identity: identity, pairing: pairing.accessory, link: link)
            try await vendor.loadDatabase(connection, link: link, store: store)
            try await vendor.subscribe(connection, link: link)
            link.state.withLock {
                $0.connection = connection
                $0.lastError = nil
            }
            vendor.connected(link)
            while true {
                let seen = link.reload.version
                await link.reload.wait(after: seen, timeout: vendor.options.pollInterval, clock: vendor.context.clock)
                try Task.checkCancellation()
                if link.reload.version != seen {
                    try await vendor.loadDatabase(connection, link: link, store: store)
                    try await vendor.subscribe(connection, link: link)
                } else {
                    try await vendor.poll(connection, link: link)
                }
            }
        }
    }

    private func verify(_ connection: HAPConnection, identity: ControllerIdentity, pairing: AccessoryPairing, link: AccessoryLink) async throws {
        var verify = PairVerifyClient(identity: identity, accessory: pairing)
        do {
            let m2 = try await post(connection, "/pair-verify", verify.m1())
            let m4 = try await post(connection, "/pair-verify", try verify.m3(answering: m2))
            connection.startEncryption(try verify.finish(answering: m4))
        } catch let error as HAPError {
            throw verifyError(error, link: link)
        }
    }

    private func verifyError(_ error: HAPError, link: AccessoryLink) -> GatewayError {
        switch error {
        case .refused(.authentication, _, _), .authentication:
            return GatewayError(
                .authFailed, message: "The HomeKit accessory '\(link.name)' no longer accepts this gateway's pairing (\(error)).",
                suggestion: "The pairing was removed on the accessory (reset, or removed by another controller). Pair it again: homekit/unpair, then homekit/pair with its setup code (a reset accessory needs no unpair)."
            )
        case .refused(let code, _, let delay):
            return GatewayError(.vendorRejected, message: "The HomeKit accessory '\(link.name)' refused pair-verify: \(code.reason).",
                                retryAfter: delay.map { .seconds($0) })
        case .malformed, .decryption:
            return GatewayError(.malformedResponse, message: "The HomeKit accessory '\(link.name)' answered pair-verify with something unusable: \(error).")
        }
    }

    /// `POST` a pairing message (plaintext before pair-verify, encrypted for `/pairings`).
    private func post(_ connection: HAPConnection, _ path: String, _ body: [UInt8]) async throws -> [UInt8] {
        let response = try await connection.request("POST", path, contentType: "application/pairing+tlv8", body: body, timeout: options.requestTimeout)
        guard case .response(let status) = response.kind, (200..<300).contains(status) else {
            throw GatewayError(.vendorRejected, message: "The HomeKit accessory '\(connection.label)' answered \(path) with \(Self.statusText(response)).")
        }
        return response.body
    }

    static func statusText(_ message: HAPMessage) -> String {
        guard case .response(let status) = message.kind else { return "an event" }
        var text = "HTTP \(status)"
        if case .success(let json) = JSONValue.parse(message.body), let code = json["status"]?.number.flatMap(\.hapInt) { text += " (\(HAPStatus.reason(code)))" }
        return text
    }

    /// `GET /accessories` → devices. A changed database (a new `c#`: accessories added or removed behind a
    /// bridge) replaces the devices; it is kept in the cache for the next start.
    private func loadDatabase(_ connection: HAPConnection, link: AccessoryLink, store: HomeKitStore) async throws {
        let response = try await connection.request("GET", "/accessories", timeout: options.requestTimeout)
        guard response.kind == .response(status: 200) else {
            throw GatewayError(.vendorRejected, message: "The HomeKit accessory '\(link.name)' answered /accessories with \(Self.statusText(response)).")
        }
        let accessories: [HAPAccessory]
        do { accessories = try AccessoryDatabase.parse(response.body) } catch {
            throw GatewayError(.malformedResponse, message: "The HomeKit accessory '\(link.name)' sent an unusable /accessories: \(error)")
        }
        let plans = HomeKitMapping.plans(vendorID: instanceID, name: link.name, accessories: accessories)
        var values: [Int: [Int: JSONValue]] = [:]
        for accessory in accessories {
            for service in accessory.services {
                for characteristic in service.characteristics {
                    if let value = characteristic.value { values[accessory.aid, default: [:]][characteristic.iid] = value }
                }
            }
        }
        let (changed, logUnmapped) = link.state.withLock { state -> (Bool, Bool) in
            let changed = state.plans.map(\.device) != plans.map(\.device)
            state.plans = plans
            state.values = values
            state.configNumber = state.discovered?.configNumber
            defer { state.unmappedLogged = true }
            return (changed, !state.unmappedLogged)
        }
        if logUnmapped {
            for plan in plans where !plan.unmapped.isEmpty {
                context.logger.debug("homekit \(link.name) aid \(plan.aid): characteristics no key fits: \(plan.unmapped.joined(separator: ", "))")
            }
        }
        if changed {
            try? await store.save(database: response.body, name: link.name)
            announceInventory()
        }
        for plan in plans {
            let state = HomeKitMapping.state(plan, values: values[plan.aid] ?? [:])
            if !state.isEmpty { sink.send(.state(plan.device.id, state, observedAt: context.now())) }
        }
    }

    /// Subscribes to every characteristic that feeds a key and sends events; the rest, and any the accessory
    /// refuses, are polled.
    private func subscribe(_ connection: HAPConnection, link: AccessoryLink) async throws {
        let plans = link.state.withLock { $0.plans }
        var polled: [Int: [Int]] = [:]
        var items: [JSONValue] = []
        for plan in plans {
            polled[plan.aid] = plan.polled
            items += plan.notifying.map { .object(["aid": .number(Double(plan.aid)), "iid": .number(Double($0)), "ev": .bool(true)]) }
        }
        if !items.isEmpty {
            let body = Array(JSONValue.object(["characteristics": .array(items)]).render().utf8)
            let response = try await connection.request("PUT", "/characteristics", contentType: "application/hap+json", body: body, timeout: options.requestTimeout)
            if response.kind == .response(status: 207), let results = try? CharacteristicValue.parseList(response.body) {
                for result in results where (result.status ?? 0) != 0 { polled[result.aid, default: []].append(result.iid) }
            } else if response.kind != .response(status: 204), response.kind != .response(status: 200) {
                // No events at all: poll everything rather than show frozen values.
                for plan in plans { polled[plan.aid, default: []] += plan.notifying }
            }
        }
        link.state.withLock { $0.polled = polled }
    }

    /// Reads the characteristics that send no events.
    private func poll(_ connection: HAPConnection, link: AccessoryLink) async throws {
        let polled = link.state.withLock { $0.polled }
        let ids = polled.sorted { $0.key < $1.key }.flatMap { aid, iids in iids.map { "\(aid).\($0)" } }
        guard !ids.isEmpty else { return }
        let values = try await read(connection, ids: ids)
        publish(link.apply(values))
    }

    private func read(_ connection: HAPConnection, ids: [String]) async throws -> [CharacteristicValue] {
        let response = try await connection.request("GET", "/characteristics?id=" + ids.joined(separator: ","), timeout: options.requestTimeout)
        guard response.kind == .response(status: 200) || response.kind == .response(status: 207) else {
            throw GatewayError(.vendorRejected, message: "The HomeKit accessory '\(connection.label)' answered a read with \(Self.statusText(response)).")
        }
        do { return try CharacteristicValue.parseList(response.body) } catch {
            throw GatewayError(.malformedResponse, message: "The HomeKit accessory '\(connection.label)' sent an unusable read answer: \(error)")
        }
    }

    private func received(_ values: [CharacteristicValue], link: AccessoryLink) {
        publish(link.apply(values))
    }

    private func publish(_ updates: [(DeviceID, [String: StateValue])]) {
        let now = context.now()
        for (id, state) in updates { sink.send(.state(id, state, observedAt: now)) }
    }

    // MARK: Health and inventory

    private func announceInventory() {
        let devices = links.flatMap { link in link.state.withLock { $0.plans.map(\.device) } }
        shared.withLock { $0.announced = devices.map(\.id) }
        sink.send(.inventory(vendorID: instanceID, devices: devices))
    }

    private func connected(_ link: AccessoryLink) {
        shared.withLock { $0.lastSuccess = context.now() }
        reportHealth()
        for plan in link.state.withLock({ $0.plans }) { sink.send(.availability(plan.device.id, online: true)) }
    }

    private func disconnected(_ link: AccessoryLink, error: GatewayError) {
        let plans = link.state.withLock { state -> [HKDevicePlan] in
            state.connection = nil
            state.lastError = error
            state.attempted = true
            return state.plans
        }
        reportHealth()
        for plan in plans { sink.send(.availability(plan.device.id, online: false)) }
    }

    private func record(_ link: AccessoryLink, error: GatewayError) {
        link.state.withLock {
            $0.lastError = error
            $0.attempted = true
        }
        reportHealth()
    }

    /// `ok` while every accessory is connected, `degraded` while some are, `down` when none is; `last_error`
    /// names the accessory that failed.
    private func reportHealth() {
        let statuses = links.map { link in link.state.withLock { ($0.connection != nil, $0.lastError) } }
        let up = statuses.filter(\.0).count
        let failure = statuses.first { !$0.0 && $0.1 != nil }?.1
        let state: VendorHealth.State = up == links.count ? .ok : up == 0 && failure != nil ? .down : .degraded
        let update = shared.withLock { shared -> VendorHealth? in
            var health = VendorHealth(vendorID: instanceID, state: state, breaker: nil, lastSuccess: shared.lastSuccess,
                                      lastError: state == .ok ? nil : failure)
            health.devicesReportAvailability = true
            guard health != shared.reported else { return nil }
            shared.reported = health
            return health
        }
        if let update { sink.send(.health(update)) }
    }

    // MARK: Pairing

    /// Pair Setup with `setupCode` on a connection of its own, then keeps the accessory's key. An accessory that
    /// refuses the proof when this side's K began with a zero byte is asked again with a new SRP secret
    /// (HAP-python truncates such a K), before the code is called wrong.
    func pair(_ link: AccessoryLink, setupCode: String, store: HomeKitStore) async throws {
        let busy = link.state.withLock { state -> Bool in
            defer { state.pairingInProgress = true }
            return state.pairingInProgress
        }
        guard !busy else { throw GatewayError(.vendorRejected, message: "A pairing with '\(link.name)' is already running.", retryable: true) }
        defer { link.state.withLock { $0.pairingInProgress = false } }
        guard let (host, port) = link.address else {
            throw GatewayError(.invalidPayload, message: "The HomeKit accessory '\(link.name)' has no address.", suggestion: "Set host and port for it.")
        }
        guard let identity = shared.withLock({ $0.identity }) else {
            throw GatewayError(.vendorUnavailable, message: "The HomeKit vendor '\(instanceID)' is still starting.", retryable: true)
        }
        let timeout = options.requestTimeout
        var attempt = 0
        while true {
            attempt += 1
            let result: Result<AccessoryPairing, HAPError>? = try await HAPConnection.withConnection(
                host: host, port: port, label: link.name, connectTimeout: options.connectTimeout, time: time, onEvent: { _ in }
            ) { connection in
                var client = PairSetupClient(setupCode: setupCode, identity: identity)
                func exchange(_ body: [UInt8]) async throws -> [UInt8] {
                    let response = try await connection.request("POST", "/pair-setup", contentType: "application/pairing+tlv8", body: body, timeout: timeout)
                    guard case .response(let status) = response.kind, (200..<300).contains(status) else {
                        throw GatewayError(.vendorRejected, message: "The HomeKit accessory '\(link.name)' answered /pair-setup with \(Self.statusText(response)).")
                    }
                    return response.body
                }
                do {
                    let m2 = try await exchange(client.m1())
                    let m4 = try await exchange(try client.m3(answering: m2))
                    let m6 = try await exchange(try client.m5(answering: m4))
                    return .success(try client.finish(answering: m6))
                } catch let error as HAPError {
                    // nil: worth another attempt with a fresh SRP secret.
                    if case .refused(.authentication, _, _) = error, client.mayRetryRefusal { return nil }
                    return .failure(error)
                }
            }
            switch result {
            case nil:
                if attempt < 4 { continue }
                throw pairError(.authentication("the accessory refused the proof \(attempt) times"), link: link)
            case .failure(let error)?:
                throw pairError(error, link: link)
            case .success(let accessory)?:
                let pairing = HomeKitStore.Pairing(accessory: accessory, host: host, port: port)
                try await store.save(pairing, name: link.name)
                link.state.withLock {
                    $0.pairing = pairing
                    $0.lastError = nil
                }
                context.logger.notice("homekit: paired with '\(link.name)' (accessory id \(accessory.accessoryID))")
                link.wake.signal()
                return
            }
        }
    }

    private func pairError(_ error: HAPError, link: AccessoryLink) -> GatewayError {
        switch error {
        case .refused(.authentication, _, _), .authentication:
            return GatewayError(.authFailed, message: "The HomeKit accessory '\(link.name)' refused the setup code.",
                                suggestion: "Check the 8-digit code on the accessory or its box (XXX-XX-XXX) and pair again.")
        case .refused(.unavailable, _, _):
            return GatewayError(.authFailed, message: "The HomeKit accessory '\(link.name)' is already paired with another controller.",
                                suggestion: "Remove it from that controller (Apple Home: Remove Accessory) or reset it, then pair again.")
        case .refused(.maxTries, _, _):
            return GatewayError(.authFailed, message: "The HomeKit accessory '\(link.name)' refuses pairing after too many failed attempts.",
                                suggestion: "Reset the accessory (see its manual), then pair with the right code.")
        case .refused(.maxPeers, _, _):
            return GatewayError(.vendorRejected, message: "The HomeKit accessory '\(link.name)' has no room for another pairing.",
                                suggestion: "Remove a controller from it, or reset it.")
        case .refused(let code, _, let delay):
            return GatewayError(.vendorRejected, message: "The HomeKit accessory '\(link.name)' refused pairing: \(code.reason).",
                                retryable: code == .busy || code == .backoff, retryAfter: delay.map { .seconds($0) })
        case .malformed, .decryption:
            return GatewayError(.malformedResponse, message: "The HomeKit accessory '\(link.name)' answered pair-setup with something unusable: \(error).")
        }
    }

    // MARK: Commands

    public func execute(_ command: DeviceCommand) async throws -> CommandOutcome {
        let (link, plan) = try locate(command.device)
        let (connection, values) = link.state.withLock { ($0.connection, $0.values[plan.aid] ?? [:]) }
        guard let connection else {
            throw link.state.withLock { $0.lastError } ?? GatewayError(.vendorUnreachable, message: "The HomeKit accessory '\(link.name)' is not connected.")
        }
        let writes = try HomeKitMapping.writes(for: command.changes, plan: plan, values: values)
        var items = writes.map { write -> JSONValue in
            .object(["aid": .number(Double(write.aid)), "iid": .number(Double(write.iid)), "value": write.value ?? .null])
        }
        var object: [String: JSONValue] = [:]
        // A timed write (locks and doors ask for one with `tw`): PUT /prepare with a ttl and a pid, then the write with that pid.
        if writes.contains(where: { plan.characteristics[$0.iid]?.needsTimedWrite == true }) {
            let pid = Double(UInt32.random(in: 1...UInt32.max))
            let prepare = Array(JSONValue.object(["ttl": .number(5000), "pid": .number(pid)]).render().utf8)
            let prepared = try await connection.request("PUT", "/prepare", contentType: "application/hap+json", body: prepare, timeout: options.requestTimeout)
            guard prepared.kind == .response(status: 200) || prepared.kind == .response(status: 204) else {
                throw GatewayError(.vendorRejected, message: "The HomeKit accessory '\(link.name)' refused the timed write: \(Self.statusText(prepared)).")
            }
            object["pid"] = .number(pid)
        }
        items = items.map { item in
            guard case .object(var fields) = item, let pid = object["pid"] else { return item }
            fields["pid"] = pid
            return .object(fields)
        }
        let body = Array(JSONValue.object(["characteristics": .array(items)]).render().utf8)
        let response = try await connection.request("PUT", "/characteristics", contentType: "application/hap+json", body: body, timeout: options.requestTimeout)
        switch response.kind {
        case .response(status: 204), .response(status: 200):
            break
        case .response(status: 207):
            let results = (try? CharacteristicValue.parseList(response.body)) ?? []
            if let failed = results.first(where: { ($0.status ?? 0) != 0 }), let status = failed.status {
                throw Self.writeError(status, link: link)
            }
        default:
            if case .success(let json) = JSONValue.parse(response.body), let status = json["status"]?.number {
                throw Self.writeError(status.hapInt ?? HAPStatus.communicationFailure, link: link)
            }
            throw GatewayError(.vendorRejected, message: "The HomeKit accessory '\(link.name)' refused the write: \(Self.statusText(response)).")
        }
        // HAP sends no event to the controller that wrote: the accepted values are the confirmation, for the keys
        // they make by themselves (a lock's state still comes from Lock Current State when it moves).
        let confirmed = link.apply(writes).first { $0.0 == plan.device.id }?.1 ?? [:]
        return CommandOutcome(confirmed: confirmed)
    }

    /// HAP status codes in the gateway's error taxonomy.
    static func writeError(_ status: Int, link: AccessoryLink) -> GatewayError {
        let reason = HAPStatus.reason(status)
        switch status {
        case HAPStatus.readOnly:
            return GatewayError(.readOnlyKey, message: "The HomeKit accessory '\(link.name)' says the characteristic is read-only: \(reason).")
        case HAPStatus.invalidValue:
            return GatewayError(.outOfRange, message: "The HomeKit accessory '\(link.name)' refused the value: \(reason).")
        case HAPStatus.communicationFailure, HAPStatus.busy, HAPStatus.outOfResources, HAPStatus.timedOut:
            return GatewayError(.vendorUnavailable, message: "The HomeKit accessory '\(link.name)' could not carry out the write now: \(reason).",
                                retryable: true, countsAgainstVendor: false)
        case HAPStatus.insufficientPrivileges, HAPStatus.insufficientAuthorization:
            return GatewayError(.authFailed, message: "The HomeKit accessory '\(link.name)' refused the write: \(reason).")
        case HAPStatus.noSuchResource:
            return GatewayError(.notFound, message: "The HomeKit accessory '\(link.name)' no longer has that characteristic: \(reason).",
                                suggestion: "The accessory changed its database; the gateway reloads it on the next connection.")
        default:
            return GatewayError(.vendorRejected, message: "The HomeKit accessory '\(link.name)' refused the write: \(reason).")
        }
    }

    private func locate(_ device: DeviceID) throws(GatewayError) -> (AccessoryLink, HKDevicePlan) {
        for link in links {
            if let plan = link.state.withLock({ $0.plans.first { $0.device.id == device } }) { return (link, plan) }
        }
        throw GatewayError(.unknownDevice, message: "No HomeKit accessory has the device '\(device)'.")
    }

    public func refresh(_ device: DeviceID) async throws {
        let (link, plan) = try locate(device)
        let values = try await readValues(link: link, plan: plan)
        publish(link.apply(values))
    }

    public func readState(_ device: DeviceID) async throws -> [String: StateValue] {
        let (link, plan) = try locate(device)
        let values = try await readValues(link: link, plan: plan)
        _ = link.apply(values)
        return HomeKitMapping.state(plan, values: link.state.withLock { $0.values[plan.aid] ?? [:] })
    }

    private func readValues(link: AccessoryLink, plan: HKDevicePlan) async throws -> [CharacteristicValue] {
        guard let connection = link.state.withLock({ $0.connection }) else {
            throw link.state.withLock { $0.lastError } ?? GatewayError(.vendorUnreachable, message: "The HomeKit accessory '\(link.name)' is not connected.")
        }
        let iids = Set(plan.bindings.values.flatMap { $0.reads + $0.writes }).sorted().filter { plan.characteristics[$0]?.readable == true }
        guard !iids.isEmpty else { return [] }
        return try await read(connection, ids: iids.map { "\(plan.aid).\($0)" })
    }

    // MARK: Requests

    public func request(_ name: String, body: [String: JSONValue]) async throws -> JSONValue {
        switch name {
        case "homekit/discover":
            // Unpaired accessories (`sf` bit 1), or every one with {"all":true}.
            let all = body["all"]?.bool ?? false
            let records = try await browse(fresh: true).filter { all || !$0.isPaired }
            return .object(["accessories": .array(records.map(\.json))])
        default:
            break
        }
        guard case .string(let accessoryName)? = body["name"] else {
            throw GatewayError.invalidPayload("\(name) needs \"name\": one of \(links.map(\.name).joined(separator: ", "))")
        }
        guard let link = links.first(where: { $0.name == accessoryName }) else {
            throw GatewayError.invalidPayload("no accessory '\(GatewayError.clip(accessoryName))' in vendor '\(instanceID)'; its accessories: \(links.map(\.name).joined(separator: ", "))")
        }
        guard let store else { throw GatewayError(.internal, message: "The HomeKit vendor has no storage.") }
        switch name {
        case "homekit/pair":
            guard case .string(let text)? = body["setup_code"], let code = HomeKitVendorFactory.normalizedSetupCode(text) else {
                throw GatewayError.invalidPayload("homekit/pair needs \"setup_code\": the accessory's 8 digits as XXX-XX-XXX")
            }
            if let existing = link.state.withLock({ $0.pairing }) {
                throw GatewayError(.invalidPayload, message: "'\(link.name)' is already paired (accessory id \(existing.accessory.accessoryID)).",
                                   suggestion: "Send homekit/unpair first to pair it anew.")
            }
            try await pair(link, setupCode: code, store: store)
            let id = link.state.withLock { $0.pairing?.accessory.accessoryID } ?? ""
            return .object(["vendor": .string(instanceID), "name": .string(link.name), "accessory_id": .string(id)])
        case "homekit/unpair":
            return try await unpair(link, store: store)
        case "homekit/identify":
            guard let connection = link.state.withLock({ $0.connection }) else {
                throw GatewayError(.vendorUnreachable, message: "The HomeKit accessory '\(link.name)' is not connected.")
            }
            // Identify (14) of the accessory's own information service: it blinks or beeps.
            let plan = link.state.withLock { $0.plans.first { $0.aid == 1 } ?? $0.plans.first }
            guard let plan, let identify = plan.characteristics.values.first(where: { $0.type == HAPType(apple: "14") }) else {
                throw GatewayError(.vendorRejected, message: "The HomeKit accessory '\(link.name)' has no Identify characteristic.")
            }
            let body = Array(JSONValue.object(["characteristics": .array([.object(["aid": .number(Double(plan.aid)), "iid": .number(Double(identify.iid)), "value": .bool(true)])])]).render().utf8)
            let response = try await connection.request("PUT", "/characteristics", contentType: "application/hap+json", body: body, timeout: options.requestTimeout)
            guard response.kind == .response(status: 204) || response.kind == .response(status: 200) else {
                throw GatewayError(.vendorRejected, message: "The HomeKit accessory '\(link.name)' refused identify: \(Self.statusText(response)).")
            }
            return .object(["vendor": .string(instanceID), "name": .string(link.name)])
        default:
            throw GatewayError(.unknownRequest, message: "No such request: \(name).")
        }
    }

    /// Remove Pairing on the accessory (when it can be reached), then forget it here; its devices are removed.
    private func unpair(_ link: AccessoryLink, store: HomeKitStore) async throws -> JSONValue {
        guard link.state.withLock({ $0.pairing }) != nil else {
            throw GatewayError(.invalidPayload, message: "'\(link.name)' is not paired.")
        }
        var removedOnAccessory = false
        if let connection = link.state.withLock({ $0.connection }), let identity = shared.withLock({ $0.identity }) {
            do {
                let answer = try await post(connection, "/pairings", PairingsRequest.remove(pairingID: identity.pairingID))
                _ = try PairingsRequest.checkAnswer(answer, step: "remove pairing")
                removedOnAccessory = true
            } catch {
                context.logger.warning("homekit: '\(link.name)' did not confirm removing the pairing: \(error)")
            }
            connection.close(GatewayError(.vendorUnreachable, message: "The pairing with '\(link.name)' was removed."))
        }
        try await store.save(nil, name: link.name)
        try await store.save(database: nil, name: link.name)
        link.state.withLock {
            $0.pairing = nil
            $0.plans = []
            $0.values = [:]
        }
        announceInventory()
        link.wake.signal()
        return .object(["vendor": .string(instanceID), "name": .string(link.name), "removed_on_accessory": .bool(removedOnAccessory)])
    }
}
