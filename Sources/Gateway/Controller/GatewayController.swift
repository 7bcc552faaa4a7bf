import Cache
import Foundation
import GatewayModel
import Logging

/// The composition root of the running gateway: it owns the device registry and latest states,
/// turns vendor events into topics and MQTT messages into commands. Only this type and the
/// publisher helpers know topics; vendors only know the normalized model.
public actor GatewayController {
    public static let version = "0.2.0"

    let config: GatewayConfig
    let topics: Topics
    let transport: any MessageTransport
    let logger: Logger
    let clock: any Clock<Duration>
    let now: @Sendable () -> Date
    let discovery: HomeAssistantDiscovery
    let startedAt: Date
    let persistence: Persistence?

    var vendors: [String: any Vendor] = [:]
    var vendorTypes: [String: String] = [:]
    var vendorHealth: [String: VendorHealth] = [:]
    var devices: [DeviceID: Device] = [:]
    var states: [DeviceID: DeviceState] = [:]
    var availability: [DeviceID: Bool] = [:]
    /// What discovery was last published per device: its topics and a digest of the payloads
    /// (not the payloads themselves: kilobytes per device add up at 1,000 devices).
    var publishedDiscovery: [DeviceID: (topics: [String], digest: Int)] = [:]
    /// One bounded command lane per device (see `GatewayController+Lanes`).
    var lanes: [DeviceID: CommandLane] = [:]
    var commandSequence: UInt64 = 0
    /// Admitted commands waiting for the outbox writer, in arrival order.
    var storeQueue: [CommandJob] = []
    var storing = false
    /// `/get` and `device/refresh` requests, coalesced per device (see `refresh`).
    var refreshes: [String: RefreshState] = [:]
    /// Vendors that answered at least once since start: their devices may be announced online.
    var answeredVendors: Set<String> = []
    /// The `last_seen` each device's state was last published with: an unchanged state is re-sent only when
    /// the vendor's observation time moved a heartbeat past it (no clock read per update).
    var lastPublishedSeen: [DeviceID: Date] = [:]
    /// Retained discovery/availability topics of devices the gateway published before but does not know
    /// now (learned from the broker at start), by device id: cleared once their vendor's inventory lacks them.
    var orphanCandidates: [DeviceID: Set<String>] = [:]
    var sweepingRetained = false
    var sweepDone = false
    var eventInbox: EventInbox<VendorEvent>?
    var lastReportedDrops = Drops()
    var lastReportedStorageOK = true
    var logLimits: [String: LogLimit] = [:]
    var housekeepingStarted = false
    /// Vendors whose inventory was cut to `max_devices` (reported once).
    var cappedVendors: Set<String> = []
    /// Vendors that delivered their device list since start (orphans of other vendors are kept until they do).
    var inventoriedVendors: Set<String> = []
    /// Batch items of one vendor gathering at the front of their device lanes (see `joinBatch`).
    var batchGroups: [String: BatchGroup] = [:]
    var aggregatesPending = false
    var dirtyRooms: Set<String> = []
    var energyDirty = false
    var haRepublishPending = false
    var counters = Counters()
    /// What every state update needs per device, computed once and found with one lookup
    /// (copying a whole `Device` per update would retain each of its strings).
    var hot: [DeviceID: HotInfo] = [:]
    /// Devices that feed `energy/home`, and each room's devices, so the home views never scan all devices.
    var energyDevices: Set<DeviceID> = []
    var roomMembers: [String: Set<DeviceID>] = [:]
    /// A tick of a polling vendor stamps many devices with one time: format it once.
    var lastSeenCache: (Date, String)?
    var pendingWrites = WriteBatch()
    var dirtyStates: Set<DeviceID> = []
    var persistPending = false
    var bridgeExtras = BridgeExtras()

    struct HotInfo {
        var stateTopic: String
        var type: DeviceType
        var vendorID: String
        var room: String?
        var feedsEnergy: Bool
        var feedsEnvironment: Bool
        /// Reports a counter (`total_increasing`): updates pass `guardCounters`.
        var hasCounters: Bool
    }

    struct Counters {
        var commandsExecuted = 0
        var commandsFailed = 0
        var statesPublished = 0
        var inboundMessages = 0
        /// Commands refused before they were queued (`queue_full`, `storage_unavailable`).
        var commandsRefused = 0
        var refusedResponses = 0
        /// Counter readings held back because they were lower than the last published (see `guardCounters`).
        var counterDipsHeld = 0
    }

    struct CommandJob: Sendable {
        var command: DeviceCommand
        var reply: Reply
        /// Already in the outbox (resumed after a restart).
        var persisted = false
        /// Told the final outcome (nil = done), for batch requests.
        var completion: (@Sendable (GatewayError?) -> Void)?
        /// The batch group this command goes out with in one vendor call, if any.
        var batchGroup: String?
        /// Admission order (see `isSuperseded`).
        var sequence: UInt64 = 0
        /// The batch request this command came in (items of one request never supersede each other:
        /// the requester ordered them on purpose).
        var requestTag: String?
        /// Stored in the outbox (or no cache): its lane may run it.
        var ready = false
    }

    /// Where to answer a command or request: the v5 response topic, and/or a bridge response.
    struct Reply: Sendable {
        var responseTopic: String?
        var correlationData: [UInt8]?
        var bridgeResponse: String?
        var transaction: JSON?
    }

    public init(
        config: GatewayConfig, transport: any MessageTransport, logger: Logger, persistence: Persistence? = nil,
        clock: any Clock<Duration> = ContinuousClock(), now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.persistence = persistence
        self.config = config
        self.topics = Topics(base: config.mqtt.baseTopic, discoveryPrefix: config.homeAssistant.discoveryPrefix, haStatus: config.homeAssistant.statusTopic)
        self.transport = transport
        self.logger = logger
        self.clock = clock
        self.now = now
        self.discovery = HomeAssistantDiscovery(topics: topics, mode: config.homeAssistant.mode, version: Self.version)
        self.startedAt = now()
    }

    public func register(_ vendor: any Vendor) {
        vendors[vendor.instanceID] = vendor
        vendorTypes[vendor.instanceID] = vendor.typeName
        // Vendors that integrate values themselves (counters) continue from the cache, never lower.
        var lastKnown: [DeviceID: [String: StateValue]] = [:]
        for (id, device) in devices where device.vendorID == vendor.instanceID {
            if let values = states[id]?.values { lastKnown[id] = values }
        }
        if !lastKnown.isEmpty { vendor.restore(lastKnown: lastKnown) }
    }

    /// The vendor event inbox, so its drops and depth show in `health`.
    public func attach(_ inbox: EventInbox<VendorEvent>) {
        eventInbox = inbox
    }

    public var deviceIDs: [DeviceID] { devices.keys.sorted() }

    public func state(of id: DeviceID) -> DeviceState? { states[id] }

    // MARK: - Connection

    /// Runs after every (re)connect: the broker may have restarted without persistence,
    /// so subscriptions and every retained topic are sent again.
    public func connected() {
        transport.subscribe(topics.subscriptions)
        transport.publish(topics.bridgeState, #"{"state":"online"}"#, qos: 1, retain: true)
        publishBridgeInfo()
        publishBridgeDevices()
        if config.homeAssistant.enabled {
            publishGatewayDiscovery()
            for id in devices.keys.sorted() { publishDiscovery(id, force: true) }
        }
        for health in vendorHealth.values.sorted(by: { $0.vendorID < $1.vendorID }) { publishVendorHealth(health) }
        republishAllStates()
        publishAggregates()
        startHousekeeping()
        startRetainedSweep()
        publishBridgeHealth(force: true)
        logger.info("connected to the broker; published \(devices.count) devices")
    }

    func republishAllStates() {
        for id in devices.keys.sorted() {
            publishAvailability(id)
            publishState(id)
        }
    }

    /// The last thing before disconnecting on a clean shutdown.
    public func publishOffline() async -> Bool {
        await transport.publishAndWait(topics.bridgeState, #"{"state":"offline"}"#, retain: true, timeout: .seconds(2))
    }

    // MARK: - Vendor events

    /// Drains vendor events inside the actor: each wake-up handles the whole backlog, with no hop per event.
    public func consume(_ inbox: EventInbox<VendorEvent>) async {
        while let events = await inbox.next() {
            var handled = 0
            for event in events {
                handle(event)
                handled += 1
                // A large backlog is handled in slices: between them the actor takes commands and requests
                // that arrived meanwhile, so telemetry never makes a command wait for the whole backlog.
                if handled.isMultiple(of: Self.eventSlice) { await Task.yield() }
            }
        }
    }

    /// Vendor events handled before the actor lets waiting commands in.
    static let eventSlice = 256

    public func handle(_ event: VendorEvent) {
        switch event {
        case .inventory(let vendorID, let list):
            applyInventory(vendorID: vendorID, devices: list)
        case .state(let id, let values, let observedAt):
            guard let info = hot[id] else {
                logger.debug("state for unknown device \(id) ignored")
                return
            }
            answeredVendors.insert(info.vendorID)
            var update = values
            if info.hasCounters { guardCounters(id, &update) }
            // Merged in place: copying the state out and back would copy its dictionary on every update.
            let changed = states[id, default: DeviceState()].mergeReportingChange(update, observedAt: observedAt)
            if availability[id] != true, vendorHealth[info.vendorID]?.state != .down {
                availability[id] = true
                publishAvailability(id)
            }
            // Unchanged values are not re-sent on every poll: only when the heartbeat refreshes `last_seen`.
            if !changed, let last = lastPublishedSeen[id], observedAt.timeIntervalSince(last) < config.mqtt.stateHeartbeat { return }
            publishState(id, info)
            if changed { markAggregatesDirty(info) }
            if persistence != nil {
                Persistence.readings(for: id, values: update, at: observedAt, into: &pendingWrites.readings)
                dirtyStates.insert(id)
                schedulePersist()
            }
        case .availability(let id, let online):
            guard let device = devices[id], availability[id] != online else { return }
            answeredVendors.insert(device.vendorID)
            availability[id] = online
            publishAvailability(id)
        case .health(let health):
            applyHealth(health)
        }
    }

    func applyInventory(vendorID: String, devices reported: [Device]) {
        answeredVendors.insert(vendorID)
        inventoriedVendors.insert(vendorID)
        let list = capped(reported, vendorID: vendorID)
        let incoming = Dictionary(list.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        let existing = devices.values.filter { $0.vendorID == vendorID }
        var changed = false
        for old in existing where incoming[old.id] == nil {
            removeDevice(old)
            changed = true
        }
        for device in list {
            let previous = devices[device.id]
            guard previous != device else { continue }
            store(device)
            changed = true
            if persistence != nil, let stored = Persistence.storedDevice(device, now: now()) {
                pendingWrites.upserts.append(stored)
                schedulePersist()
            }
            if previous == nil {
                availability[device.id] = vendorHealth[vendorID].map { $0.state != .down } ?? true
                publishEvent("device_added", ["id": .string(device.id.rawValue), "name": .string(device.name), "vendor": .string(vendorID)])
                publishAvailability(device.id)
            }
            if config.homeAssistant.enabled { publishDiscovery(device.id, force: false) }
        }
        if !orphanCandidates.isEmpty { clearOrphans() }
        if changed {
            publishBridgeDevices()
            // The registry is what a restart recovers from (stale states, queued commands): write it now.
            if persistence != nil { flushPersistence() }
        }
    }

    func removeDevice(_ device: Device) {
        let id = device.id
        devices[id] = nil
        hot[id] = nil
        energyDevices.remove(id)
        if let room = device.roomSlug { roomMembers[room]?.remove(id) }
        states[id] = nil
        availability[id] = nil
        lastPublishedSeen[id] = nil
        if config.homeAssistant.enabled {
            for topic in discovery.clearTopics(for: device) { transport.publish(topic, "", qos: 1, retain: true) }
        }
        publishedDiscovery[id] = nil
        if persistence != nil {
            pendingWrites.removals.append(id.rawValue)
            dirtyStates.remove(id)
            schedulePersist()
        }
        transport.publish(topics.device(id), "", qos: 1, retain: true)
        transport.publish(topics.availability(id), "", qos: 1, retain: true)
        publishEvent("device_removed", ["id": .string(id.rawValue), "name": .string(device.name), "vendor": .string(device.vendorID)])
        energyDirty = true
        if let room = device.roomSlug { dirtyRooms.insert(room) }
        scheduleAggregates()
    }

    // MARK: - Publishing

    func publishState(_ id: DeviceID) {
        guard let info = hot[id] else { return }
        publishState(id, info)
    }

    func publishState(_ id: DeviceID, _ info: HotInfo) {
        guard let state = states[id] else { return }
        var lastSeenText: String?
        if let lastSeen = state.lastSeen {
            if let cached = lastSeenCache, cached.0 == lastSeen {
                lastSeenText = cached.1
            } else {
                let text = ISOTime.format(lastSeen)
                lastSeenCache = (lastSeen, text)
                lastSeenText = text
            }
        }
        transport.publish(info.stateTopic, StateSnapshot.render(type: info.type, state: state, lastSeenText: lastSeenText),
                          qos: 0, retain: config.mqtt.retainState)
        lastPublishedSeen[id] = state.lastSeen
        counters.statesPublished += 1
    }

    /// Registers a device's description and its precomputed strings.
    func store(_ device: Device) {
        devices[device.id] = device
        if let old = hot[device.id]?.room, old != device.roomSlug { roomMembers[old]?.remove(device.id) }
        let info = HotInfo(
            stateTopic: topics.device(device.id), type: device.type, vendorID: device.vendorID, room: device.roomSlug,
            feedsEnergy: device.keys.contains(where: HomeViews.energyKeys.contains),
            feedsEnvironment: device.keys.contains(where: HomeViews.environmentKeys.contains),
            hasCounters: device.keys.contains { StateKeys.spec($0)?.series == .counter }
        )
        hot[device.id] = info
        if info.feedsEnergy { energyDevices.insert(device.id) } else { energyDevices.remove(device.id) }
        if let room = info.room { roomMembers[room, default: []].insert(device.id) }
    }

    func publishAvailability(_ id: DeviceID) {
        let online = availability[id] ?? false
        transport.publish(topics.availability(id), online ? #"{"state":"online"}"# : #"{"state":"offline"}"#, qos: 1, retain: true)
    }

    /// Discovery goes out at start, on reconnect and when a device's description changes; never with state.
    func publishDiscovery(_ id: DeviceID, force: Bool) {
        guard let device = devices[id] else { return }
        let messages = discovery.messages(for: device)
        var hasher = Hasher()
        hasher.combine(messages)
        let digest = hasher.finalize()
        if !force, publishedDiscovery[id]?.digest == digest { return }
        // Component mode: entities that disappeared are cleared, not left as ghosts.
        let newTopics = Set(messages.map(\.topic))
        for old in publishedDiscovery[id]?.topics ?? [] where !newTopics.contains(old) {
            transport.publish(old, "", qos: 1, retain: true)
        }
        for message in messages { transport.publish(message.topic, message.payload, qos: 1, retain: true) }
        publishedDiscovery[id] = (messages.map(\.topic), digest)
    }

    func publishBridgeInfo() {
        let vendorsJSON: [JSON] = config.vendors.map { vendor in
            JSON.object([
                "id": .string(vendor.id), "type": .string(vendor.type),
                "poll_interval": vendor.pollInterval.map(JSON.number) ?? .null,
            ]).compacted
        }
        let info: JSON = [
            "version": .string(Self.version),
            "base_topic": .string(topics.base), "log_level": .string(currentLogLevel),
            "started_at": .string(ISOTime.format(startedAt)),
            "mqtt": ["url": .string(ConfigLoader.redactURL(config.mqtt.url)), "version": .string(config.mqtt.version.rawValue),
                     "client_id": .string(config.mqtt.clientID), "retain_state": .bool(config.mqtt.retainState)],
            "homeassistant": ["enabled": .bool(config.homeAssistant.enabled), "discovery_prefix": .string(config.homeAssistant.discoveryPrefix),
                              "discovery_mode": .string(config.homeAssistant.mode.rawValue)],
            "vendors": .array(vendorsJSON),
            "storage": storageJSON(),
            "dropped": dropsJSON(drops),
        ]
        transport.publish(topics.bridgeInfo, info.render(), qos: 1, retain: true)
    }

    func bridgeDevicesJSON() -> JSON {
        .array(devices.values.sorted { $0.id < $1.id }.map(deviceJSON))
    }

    func deviceJSON(_ device: Device) -> JSON {
        let capabilities: [JSON] = device.specs.map { spec in
            var entry: [String: JSON] = ["key": .string(spec.name), "writable": .bool(device.isWritable(spec.name)), "label": .string(spec.label)]
            if let unit = spec.unit { entry["unit"] = .string(unit) }
            switch spec.kind {
            case .number(let low, let high):
                entry["type"] = "number"
                if let low { entry["min"] = .number(low) }
                if let high { entry["max"] = .number(high) }
            case .enumeration(let values):
                entry["type"] = "enum"
                entry["values"] = .array(values.map(JSON.string))
                if device.isWritable(spec.name) { entry["commands"] = .array(CommandParser.accepted(spec, values).map(JSON.string)) }
            case .bool: entry["type"] = "bool"
            case .text: entry["type"] = "text"
            case .timestamp: entry["type"] = "timestamp"
            }
            return .object(entry)
        }
        return JSON.object([
            "id": .string(device.id.rawValue), "name": .string(device.name), "vendor": .string(device.vendorID),
            "vendor_type": .optional(vendorTypes[device.vendorID]), "type": .string(device.type.rawValue),
            "manufacturer": .optional(device.manufacturer), "model": .optional(device.model), "room": .optional(device.room),
            "capabilities": .array(capabilities),
            "topics": [
                "state": .string(topics.device(device.id)), "availability": .string(topics.availability(device.id)),
                "set": .string(topics.set(device.id)), "get": .string(topics.get(device.id)),
            ],
        ]).compacted
    }

    func publishBridgeDevices() {
        transport.publish(topics.bridgeDevices, bridgeDevicesJSON().render(), qos: 1, retain: true)
    }

    func publishEvent(_ type: String, _ data: JSON) {
        let event: JSON = ["type": .string(type), "data": data, "time": .string(ISOTime.format(now()))]
        transport.publish(topics.bridgeEvent, event.render(), qos: 1, retain: false)
    }

    // MARK: - Home-level views

    /// An update of a device that feeds a home view marks that view for the next coalesced publish.
    func markAggregatesDirty(_ info: HotInfo) {
        if info.feedsEnergy { energyDirty = true }
        if info.feedsEnvironment, let room = info.room { dirtyRooms.insert(room) }
        if energyDirty || !dirtyRooms.isEmpty { scheduleAggregates() }
    }

    func markAggregatesDirty(for id: DeviceID) {
        if let info = hot[id] { markAggregatesDirty(info) }
    }

    /// Sums are coalesced: a burst of readings gives one `energy/home` update, not one per reading.
    func scheduleAggregates() {
        guard !aggregatesPending else { return }
        aggregatesPending = true
        let clock = self.clock
        Task {
            try? await clock.sleep(for: .milliseconds(200))
            self.flushAggregates()
        }
    }

    func flushAggregates() {
        aggregatesPending = false
        if energyDirty {
            energyDirty = false
            let energy = HomeViews.energy(devices: devices(in: energyDevices), states: states)
            if let payload = energy {
                transport.publish(topics.energyHome, payload.render(), qos: 0, retain: true)
            }
            homeViewUpdated(.energy, payload: energy)
        }
        let rooms = dirtyRooms
        dirtyRooms.removeAll()
        for room in rooms.sorted() {
            let payload = HomeViews.environment(room: room, devices: devices(in: roomMembers[room] ?? []), states: states)
            transport.publish(topics.environment(room: room), payload?.render() ?? "", qos: 0, retain: true)
            homeViewUpdated(.environment(room: room, name: room), payload: payload)
        }
    }

    private func devices(in ids: Set<DeviceID>) -> [DeviceID: Device] {
        var subset: [DeviceID: Device] = [:]
        subset.reserveCapacity(ids.count)
        for id in ids { subset[id] = devices[id] }
        return subset
    }

    func publishAggregates() {
        energyDirty = true
        dirtyRooms.formUnion(devices.values.compactMap(\.roomSlug))
        flushAggregates()
    }
}
