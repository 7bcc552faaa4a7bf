#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import VendorKit
import Logging
import Resilience

/// Read-only wiring every part of the gateway shares.
package struct GatewayContext: Sendable {
    package let config: GatewayConfig
    package let topics: Topics
    package let transport: any MessageTransport
    /// Wraps `transport` over a broker until the first connect (see `FirstConnectGate`).
    package let firstConnectGate: FirstConnectGate?
    package let logger: Logger
    package let clock: any Clock<Duration>
    package let now: @Sendable () -> Date
    package let startedAt: Date
}

/// The small core: the device registry, current states, availability and vendor health. It turns
/// vendor events into `HubEvent`s for its extensions and guards what vendors report (counters never run
/// backwards, inventories stay within `max_devices`). It knows no topics except the bridge's own state
/// and events; publishing device topics, discovery, caching and commands are extensions.
@GatewayActor
package final class GatewayHub {
    package let context: GatewayContext
    package var config: GatewayConfig { context.config }
    package var topics: Topics { context.topics }
    package var transport: any MessageTransport { context.transport }
    package var logger: Logger { context.logger }
    package var clock: any Clock<Duration> { context.clock }
    package func now() -> Date { context.now() }

    package private(set) var extensions: [any GatewayExtension] = []
    /// Who answers which bridge request, from the extensions' `requestNames` at install.
    private var requestOwners: [String: any GatewayExtension] = [:]
    package let tasks = TaskSet()

    package private(set) var vendors: [String: any Vendor] = [:]
    package private(set) var vendorTypes: [String: String] = [:]
    package private(set) var vendorHealth: [String: VendorHealth] = [:]
    package private(set) var devices: [DeviceID: Device] = [:]
    package private(set) var states: [DeviceID: DeviceState] = [:]
    package private(set) var availability: [DeviceID: Bool] = [:]
    /// Vendors that answered at least once since start: their devices may be announced online.
    package private(set) var answeredVendors: Set<String> = []
    /// Vendors that delivered their device list since start (orphans of other vendors are kept until they do).
    package private(set) var inventoriedVendors: Set<String> = []
    /// Vendors whose inventory was cut to `max_devices` (reported once).
    private var cappedVendors: Set<String> = []
    /// What every state update needs per device, found with one lookup.
    private var hot: [DeviceID: HotInfo] = [:]
    /// The `last_seen` of each device's last `stateUpdated`: an unchanged state is passed on only when the
    /// vendor's observation time moved a heartbeat past it (no clock read per update).
    private var lastEmitted: [DeviceID: Date] = [:]
    package var counters = Counters()
    package var eventInbox: EventInbox<VendorEvent>?
    private var logLimits: [String: LogLimit] = [:]
    /// Fence topics of retained read-backs still on their way back (see `readRetained`), and their arrivals.
    package var pendingFences: Set<String> = []
    package let fenceArrivals = ChangeSignal()
    /// Counts connects, so a held connect's announcements go out only if no newer connect came meanwhile.
    private var connectGeneration = 0
    /// Between a connect and its announcements while an extension holds them (`GatewayExtension.holdConnect`).
    package private(set) var connectHeld = false

    private struct HotInfo {
        package var vendorID: String
        /// Reports a counter (`total_increasing`): its updates' dips are held (`holdsCounterDip`).
        package var hasCounters: Bool
    }

    /// What the hub itself counts; extensions report their own totals through `BridgeReport.counters`.
    package struct Counters {
        package var commandsFailed = 0
        package var inboundMessages = 0
        package var refusedResponses = 0
        /// Counter readings held back because they were lower than the last published (see `holdsCounterDip`).
        package var counterDipsHeld = 0
    }

    package init(context: GatewayContext) {
        self.context = context
    }

    package func install(_ list: [any GatewayExtension]) {
        extensions = list
        requestOwners = [:]
        for item in list {
            for name in item.requestNames where requestOwners[name] == nil { requestOwners[name] = item }
        }
    }

    /// The extension that answers `bridge/request/<name>` (each registers its names; the first one wins).
    package func requestOwner(_ name: String) -> (any GatewayExtension)? { requestOwners[name] }

    /// Drops the extensions (they hold the hub) and cancels their timers.
    package func dismantle() {
        extensions = []
        requestOwners = [:]
        tasks.cancelAll()
    }

    /// Hands an event to every extension, in list order, synchronously.
    package func emit(_ event: HubEvent) {
        for item in extensions { item.handle(event) }
    }

    // MARK: - Vendors

    package func register(_ vendor: any Vendor) {
        vendors[vendor.instanceID] = vendor
        vendorTypes[vendor.instanceID] = vendor.typeName
        // Vendors that integrate values themselves (counters) continue from the cache, never lower.
        var lastKnown: [DeviceID: [String: StateValue]] = [:]
        for (id, device) in devices where device.vendorID == vendor.instanceID {
            if let values = states[id]?.values { lastKnown[id] = values }
        }
        if !lastKnown.isEmpty { vendor.restore(lastKnown: lastKnown) }
        // Its health exists from the start (`starting`): bridge/vendors/<id>, Home Assistant's sensor and the
        // metrics' per-vendor series are there before the vendor first reports, or if it never does.
        if vendorHealth[vendor.instanceID] == nil {
            applyHealth(VendorHealth(vendorID: vendor.instanceID, state: .ok, breaker: nil))
        }
        // Devices restored from the cache keep the availability the broker holds (nothing is published) until
        // the vendor answers; if it has not within one poll interval, they go offline.
        let vendorID = vendor.instanceID
        let grace = Self.availabilityGrace(config.vendors.first { $0.id == vendorID }?.pollInterval)
        let clock = self.clock
        tasks.spawn { [self] in
            do { try await clock.sleep(for: grace) } catch { return }
            for device in devices.values where device.vendorID == vendorID && availability[device.id] == nil {
                setAvailability(device.id, false)
            }
        }
    }

    /// The configured vendor whose device ids `rawID` has the form of (`<vendor slug>_…`; the longest such slug).
    package func configuredVendor(owning rawID: String) -> String? {
        config.vendors.map(\.id).filter { rawID.hasPrefix(Slug.make($0) + "_") }.max { $0.count < $1.count }
    }

    /// One poll interval (60 s for a push vendor), between 5 s and 5 minutes.
    package static func availabilityGrace(_ pollInterval: Double?) -> Duration {
        .milliseconds(Int((min(300, max(5, pollInterval ?? 60)) * 1000).rounded()))
    }

    // MARK: - Connection

    package func connected() {
        connectGeneration += 1
        connectHeld = false
        var filters: [String] = []
        for item in extensions { filters += item.subscriptions }
        transport.subscribe(filters)
        publishBridgeOnline()
        let holders = extensions.filter(\.holdsConnect)
        guard !holders.isEmpty else { return announceConnect() }
        // The first connect's retained sweep reads what an earlier run left before this run announces anything,
        // so the broker does not echo thousands of this run's own announcements back on the sweep's filters.
        connectHeld = true
        let generation = connectGeneration
        tasks.spawn { [self] in
            for holder in holders { await holder.holdConnect() }
            // A newer connect took over (it announces itself), or the connection went (the next one announces).
            guard generation == connectGeneration, transport.isConnected else { return }
            connectHeld = false
            announceConnect()
        }
    }

    private func announceConnect() {
        context.firstConnectGate?.open()
        emit(.connected)
        logger.info("connected to the broker; published \(devices.count) devices")
    }

    /// Vendor states may go out now: connected, and the connect's announcements (discovery, availability) are
    /// not held back behind the retained sweep (`connected()`), so no state overtakes its device's discovery.
    package var announcing: Bool { transport.isConnected && !connectHeld }

    package func publishBridgeOnline() {
        let online = #"{"state":"online"}"#
        if let gate = context.firstConnectGate {
            gate.publishAlways(topics.bridgeState, online, qos: 1, retain: true)
        } else {
            transport.publish(topics.bridgeState, online, qos: 1, retain: true)
        }
    }

    // MARK: - Vendor events

    package func handle(_ event: VendorEvent) {
        switch event {
        case .inventory(let vendorID, let list):
            applyInventory(vendorID: vendorID, devices: list)
        case .state(let id, let values, let observedAt):
            applyState(id, values, observedAt: observedAt)
        case .availability(let id, let online):
            guard let device = devices[id], availability[id] != online else { return }
            noteAnswered(device.vendorID)
            setAvailability(id, online)
        case .health(let health):
            applyHealth(health)
        case .deviceAdded(let device):
            applyPartial(added: device)
        case .deviceRemoved(let id):
            applyPartial(removed: id)
        case .deviceEvent(let id, let type, let data, let time):
            deviceEvent(id, type: type, data: data, at: time)
        case .history(let id, let readings):
            guard let device = devices[id] else { return logger.debug("history for unknown device \(id) ignored") }
            noteAnswered(device.vendorID)
            let known = readings.filter { device.keys.contains($0.key) && $0.value.isFinite }
            if !known.isEmpty { emit(.historyReported(id, known)) }
        }
    }

    private func applyState(_ id: DeviceID, _ values: [String: StateValue], observedAt: Date) {
        guard let info = hot[id] else {
            logger.debug("state for unknown device \(id) ignored")
            return
        }
        noteAnswered(info.vendorID)
        var update = values
        // Merged in place: copying the state out and back would copy its dictionary on every update.
        let changed = info.hasCounters
            ? states[id, default: DeviceState()].mergeReportingChange(&update, observedAt: observedAt) { key, last, new in
                holdsCounterDip(id, key: key, last: last, new: new)
            }
            : states[id, default: DeviceState()].mergeReportingChange(update, observedAt: observedAt)
        if availability[id] != true, vendorHealth[info.vendorID]?.state != .down { setAvailability(id, true) }
        // Unchanged values are not passed on with every poll: only when the heartbeat refreshes `last_seen`.
        if !changed, let last = lastEmitted[id], observedAt.timeIntervalSince(last) < config.mqtt.stateHeartbeat { return }
        lastEmitted[id] = observedAt
        emit(.stateUpdated(id, update: update, changed: changed, observedAt: observedAt, source: .vendor))
    }

    /// The state a vendor confirmed as a command's outcome.
    package func applyConfirmed(_ confirmed: [String: StateValue], to id: DeviceID) {
        guard devices[id] != nil, !confirmed.isEmpty else { return }
        let moment = now()
        states[id, default: DeviceState()].merge(confirmed, observedAt: moment)
        lastEmitted[id] = moment
        emit(.stateUpdated(id, update: confirmed, changed: true, observedAt: moment, source: .command))
    }

    package func setAvailability(_ id: DeviceID, _ online: Bool) {
        availability[id] = online
        emit(.availabilityChanged(id, online: online))
    }

    /// A one-off event a vendor reported (a button press, a leak detected): `device_event` on `bridge/event`,
    /// and the device's event topic (see `StatePublisher`). Events of unknown devices are dropped with a debug line.
    package func deviceEvent(_ id: DeviceID, type: String, data: [String: StateValue], at time: Date) {
        guard let device = devices[id] else {
            logger.debug("event \(type) for unknown device \(id) ignored")
            return
        }
        noteAnswered(device.vendorID)
        var payload: [String: JSON] = ["device": .string(id.rawValue), "event": .string(type), "vendor": .string(device.vendorID)]
        if !data.isEmpty { payload["data"] = .object(data.mapValues(JSON.init)) }
        publishEvent(.deviceEvent, .object(payload))
        emit(.deviceEvent(id, type: type, data: data, at: time))
    }

    /// One device added or changed without a full inventory (a push vendor's node joined or was updated).
    package func applyPartial(added device: Device) {
        noteAnswered(device.vendorID)
        guard devices[device.id] != device else { return }
        if devices[device.id] == nil {
            let count = devices.values.lazy.filter { $0.vendorID == device.vendorID }.count
            let limit = maxDevices(device.vendorID)
            if count >= limit { return reportOverLimit(vendorID: device.vendorID, reported: count + 1, limit: limit) }
        }
        addOrUpdate(device)
        emit(.inventoryApplied(vendorID: device.vendorID, changed: true))
    }

    /// One device gone without a full inventory (a push vendor's node was removed).
    package func applyPartial(removed id: DeviceID) {
        guard let device = devices[id] else { return }
        removeDevice(device)
        emit(.inventoryApplied(vendorID: device.vendorID, changed: true))
    }

    // MARK: - Registry

    package func applyInventory(vendorID: String, devices reported: [Device]) {
        noteAnswered(vendorID)
        inventoriedVendors.insert(vendorID)
        let list = capped(reported, vendorID: vendorID)
        let incoming = Dictionary(list.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        var changed = false
        for old in devices.values where old.vendorID == vendorID && incoming[old.id] == nil {
            removeDevice(old)
            changed = true
        }
        for device in list where devices[device.id] != device {
            addOrUpdate(device)
            changed = true
        }
        emit(.inventoryApplied(vendorID: vendorID, changed: changed))
    }

    /// A device added or changed; a new one starts online unless its vendor is down.
    package func addOrUpdate(_ device: Device) {
        let isNew = devices[device.id] == nil
        store(device)
        if isNew {
            availability[device.id] = vendorHealth[device.vendorID].map { $0.state != .down } ?? true
            publishEvent(.deviceAdded, ["id": .string(device.id.rawValue), "name": .string(device.name), "vendor": .string(device.vendorID)])
            emit(.deviceAdded(device, restored: false))
        } else {
            emit(.deviceChanged(device))
        }
    }

    private func store(_ device: Device) {
        devices[device.id] = device
        hot[device.id] = HotInfo(vendorID: device.vendorID, hasCounters: device.keys.contains { StateKeys.spec($0)?.series == .counter })
    }

    package func removeDevice(_ device: Device) {
        let id = device.id
        devices[id] = nil
        hot[id] = nil
        states[id] = nil
        availability[id] = nil
        lastEmitted[id] = nil
        emit(.deviceRemoved(device))
        publishEvent(.deviceRemoved, ["id": .string(id.rawValue), "name": .string(device.name), "vendor": .string(device.vendorID)])
    }

    /// The previous run's devices and last states (flagged stale, offline until their vendor answers).
    /// Devices of vendors no longer configured are removed, with their topics.
    package func restore(devices cached: [Device], states cachedStates: [DeviceID: DeviceState]) {
        let configured = Set(config.vendors.map(\.id))
        for device in cached {
            guard configured.contains(device.vendorID) else {
                store(device)
                removeDevice(device)
                continue
            }
            if var state = cachedStates[device.id] {
                state.stale = true
                states[device.id] = state
            }
            store(device)
            // Unknown until the vendor answers (see `register`): publishing offline now and online a moment
            // later would flap every entity at every restart.
            availability[device.id] = nil
            emit(.deviceAdded(device, restored: true))
        }
    }

    // MARK: - Guards on what vendors report

    /// Home Assistant reads a `total_increasing` value that drops by less than 10 % as a glitch (it logs
    /// "not strictly increasing" and its statistics go negative), and a larger drop as a meter reset.
    /// So a counter reading slightly below the last known one is held at the last value; a drop of 10 %
    /// or more is a real reset and is published as is.
    package static let counterResetRatio = 0.9

    /// Whether a counter's reading below its last value is held at the last value (a glitch, not a reset).
    private func holdsCounterDip(_ id: DeviceID, key: String, last: Double, new: Double) -> Bool {
        guard StateKeys.spec(key)?.series == .counter, new >= last * Self.counterResetRatio else { return false }
        counters.counterDipsHeld += 1
        rateLimitedLog("counter-dip", .info, "\(id) reported \(key) \(JSONText.number(new)) below the last value \(JSONText.number(last)); kept \(JSONText.number(last)) (counters never run backwards)", every: 60)
        return true
    }

    /// The broker's retained copy of a restored device's state, read back at the first connect (see
    /// `StatePublisher`): each counter of the cached state is raised to the broker's value when that is higher.
    /// A cache older than the broker (restored after runs without one) would otherwise publish a lower reading,
    /// which Home Assistant books as a meter reset. Only devices whose vendor has not answered yet (stale): a
    /// vendor's own reading is newer than either. Returns the keys raised.
    @discardableResult
    package func floorRestoredCounters(_ id: DeviceID, atRetained retained: [String: Double]) -> [String] {
        guard states[id]?.stale == true else { return [] }
        var raised: [String] = []
        for (key, value) in retained where StateKeys.spec(key)?.series == .counter {
            guard value.isFinite, let current = states[id]?[key]?.number, current < value else { continue }
            states[id]?.values[key] = .number(value)
            raised.append(key)
        }
        if !raised.isEmpty {
            logger.notice("\(id): the broker holds higher counter readings than the cache (\(raised.sorted().joined(separator: ", "))); continuing from the broker's")
        }
        return raised
    }

    /// At most `max_devices` devices of one vendor (sorted by id, so the same ones stay); the rest are
    /// refused once with an error, not silently.
    private func capped(_ list: [Device], vendorID: String) -> [Device] {
        let limit = maxDevices(vendorID)
        guard list.count > limit else {
            cappedVendors.remove(vendorID)
            return list
        }
        reportOverLimit(vendorID: vendorID, reported: list.count, limit: limit)
        return Array(list.sorted { $0.id < $1.id }.prefix(limit))
    }

    private func maxDevices(_ vendorID: String) -> Int {
        config.vendors.first { $0.id == vendorID }?.maxDevices ?? 5000
    }

    /// Once per vendor until it is back within its limit: a log line and an `inventory_truncated` event.
    private func reportOverLimit(vendorID: String, reported: Int, limit: Int) {
        guard cappedVendors.insert(vendorID).inserted else { return }
        logger.error("vendor \(vendorID) reports \(reported) devices; only the first \(limit) are used. Raise vendors[].max_devices if that many are real.")
        publishEvent(.inventoryTruncated, [
            "vendor": .string(vendorID), "reported": .number(Double(reported)), "max_devices": .number(Double(limit)),
            "error": Self.errorJSON(GatewayError(
                .badRequest, message: "Vendor '\(vendorID)' reports \(reported) devices; max_devices is \(limit).",
                suggestion: "Raise vendors[].max_devices for this vendor if that many devices are real."
            )),
        ])
    }

    // MARK: - Vendor health

    /// Records a vendor's health, announces changes of state or breaker as `vendor_state_changed`,
    /// and makes the vendor's devices' availability follow it.
    package func applyHealth(_ health: VendorHealth) {
        let previous = vendorHealth[health.vendorID]
        let previousShown = previous.map(shownState)
        if health.lastSuccess != nil { answeredVendors.insert(health.vendorID) }
        vendorHealth[health.vendorID] = health
        // Any change counts, `next_attempt` moving included (a stale time in the past misleads).
        if previous != health { emit(.vendorHealthChanged(health, previous: previous)) }
        let shown = shownState(health)
        if previousShown != shown || previous?.breaker != health.breaker {
            var data: [String: JSON] = [
                "vendor": .string(health.vendorID), "state": .string(shown), "breaker": health.breaker.map(JSON.string) ?? .null,
            ]
            if let previousShown { data["previous_state"] = .string(previousShown) }
            if let error = health.lastError { data["error"] = Self.errorJSON(error) }
            publishEvent(.vendorStateChanged, .object(data))
            logHealthChange(health, shown: shown)
        }
        // A vendor's devices are announced online only after it answered once: not on the optimistic
        // `ok` a vendor reports before its first call; before that their availability stays as it was.
        let online = health.state != .down && answeredVendors.contains(health.vendorID)
        guard health.state == .down || online else { return }
        if online, health.devicesReportAvailability { return }
        for device in devices.values where device.vendorID == health.vendorID && availability[device.id] != online {
            setAvailability(device.id, online)
        }
    }

    /// The vendor delivered something (an inventory, a state, an event): it has answered. A vendor that
    /// reports no health of its own (the demo) goes from `starting` to `ok` here.
    package func noteAnswered(_ vendorID: String) {
        guard answeredVendors.insert(vendorID).inserted else { return }
        if var health = vendorHealth[vendorID], health.state == .ok, health.lastSuccess == nil, health.lastError == nil {
            health.lastSuccess = now()
            applyHealth(health)
        }
    }

    /// The state users see: `starting` until the vendor answered or failed once (a vendor reports `ok` before
    /// its first call, which would announce devices online for a moment at every start with the vendor down).
    package func shownState(_ health: VendorHealth) -> String {
        if health.state == .ok, health.lastSuccess == nil, health.lastError == nil, !answeredVendors.contains(health.vendorID) {
            return "starting"
        }
        return health.state.rawValue
    }

    /// One line per change that says what happened and what to do.
    private func logHealthChange(_ health: VendorHealth, shown: String) {
        var line = "vendor \(health.vendorID) is \(shown)" + (health.breaker.map { " (breaker \($0))" } ?? "")
        if health.state != .ok, let error = health.lastError {
            line += ": \(error.code.rawValue): \(error.message)"
            if let next = health.nextAttempt {
                line += " Next attempt in \(GatewayError.readable(.seconds(max(0, next.timeIntervalSince(now())))))."
            }
            line += " \(error.suggestion)"
        }
        switch health.state {
        case .ok: logger.notice("\(line)")
        case .degraded: logger.warning("\(line)")
        case .down: logger.error("\(line)")
        }
    }

    package func vendorHealthJSON(_ health: VendorHealth) -> JSON {
        var object: [String: JSON] = [
            "state": .string(shownState(health)), "breaker": health.breaker.map(JSON.string) ?? .null,
            "last_success": health.lastSuccess.map { .string(ISOTime.format($0)) } ?? .null,
            "last_error": health.lastError.map(Self.errorJSON) ?? .null,
            "next_attempt": health.nextAttempt.map { .string(ISOTime.format($0)) } ?? .null,
        ]
        if !health.quota.isEmpty {
            object["quota"] = .object(health.quota.mapValues { .object($0.mapValues(JSON.number)) })
        }
        return .object(object)
    }

    // MARK: - Logging

    /// Logs at most one line per `key` and interval, with the number of lines it held back.
    package func rateLimitedLog(_ key: String, _ level: Logger.Level, _ message: @autoclosure () -> String, every interval: TimeInterval = 10) {
        let moment = now()
        var entry = logLimits[key] ?? LogLimit()
        if let last = entry.last, moment.timeIntervalSince(last) < interval {
            entry.suppressed += 1
            logLimits[key] = entry
            return
        }
        let held = entry.suppressed
        entry = LogLimit(last: moment, suppressed: 0)
        logLimits[key] = entry
        let suffix = held > 0 ? " (\(held) similar line(s) in the last \(Int(interval)) s not logged)" : ""
        logger.log(level: level, "\(message())\(suffix)")
    }

    private struct LogLimit {
        package var last: Date?
        package var suppressed = 0
    }
}
