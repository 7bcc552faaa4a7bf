import GatewayCore
import Cache
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel

/// The live status page's data: devices, vendor health, the last 100 bridge events, the outbox and the
/// home's energy over 24 hours. The page reads `statusJSON()` once and then follows `feed` (server-sent
/// events); changes are gathered and sent at most every `flushInterval`, and only while a page is open,
/// so a flood of device updates costs the page a few frames, not the gateway its throughput.
@GatewayActor
package final class StatusPageExtension: GatewayExtension {
    package static let eventsKept = 100
    package static let flushInterval: Duration = .milliseconds(250)
    /// The energy plot: the home's flows over the last day in 5-minute steps.
    package static let energyKeys = ["solar_power", "grid_power", "battery_power", "home_power"]
    package static let energyWindow: TimeInterval = 86_400
    package static let energyStep: TimeInterval = 300

    package let hub: GatewayHub
    package let feed: LiveFeed
    private let store: CacheStore?
    private let commands: Commands
    private var events: [JSON] = []
    private var dirtyDevices: Set<DeviceID> = []
    /// The newest `<base>/energy/home` payload, as `HomeViewsPublisher` computed it (nil: no energy devices).
    private var energy: JSON?
    private var energyDirty = false
    private var flushing = false

    package init(hub: GatewayHub, commands: Commands, store: CacheStore?, feed: LiveFeed) {
        self.hub = hub
        self.commands = commands
        self.store = store
        self.feed = feed
    }

    package func handle(_ event: HubEvent) {
        switch event {
        case .bridgeEventPublished(let type, let data, let time):
            let entry: JSON = ["type": .string(type), "data": data, "time": .string(ISOTime.format(time))]
            events.append(entry)
            if events.count > Self.eventsKept { events.removeFirst(events.count - Self.eventsKept) }
            feed.send(event: "event", json: entry.render())
        case .stateUpdated(let id, _, _, _, _), .availabilityChanged(let id, _):
            markDirty(id)
        case .deviceAdded(let device, _), .deviceChanged(let device):
            markDirty(device.id)
        case .deviceRemoved(let device):
            dirtyDevices.remove(device.id)
            feed.send(event: "device_removed", json: JSON.object(["id": .string(device.id.rawValue)]).render())
        case .vendorHealthChanged(let health, _):
            feed.send(event: "vendor", json: vendorJSON(health.vendorID).render())
        case .homeViewUpdated(.energy, let payload):
            energy = payload
            guard feed.hasSubscribers else { return }
            energyDirty = true
            scheduleFlush()
        default:
            break
        }
    }

    package func shutdown() async {
        feed.close()
    }

    private func markDirty(_ id: DeviceID) {
        guard feed.hasSubscribers else { return }
        dirtyDevices.insert(id)
        scheduleFlush()
    }

    private func scheduleFlush() {
        guard !flushing else { return }
        flushing = true
        let clock = hub.clock
        hub.tasks.spawn { [weak self] in
            try? await clock.sleep(for: Self.flushInterval)
            self?.flush()
        }
    }

    private func flush() {
        flushing = false
        if !dirtyDevices.isEmpty {
            let rows = dirtyDevices.sorted().compactMap(deviceJSON)
            dirtyDevices.removeAll()
            feed.send(event: "devices", json: JSON.array(rows).render())
            feed.send(event: "outbox", json: outboxJSON().render())
        }
        if energyDirty {
            energyDirty = false
            feed.send(event: "energy", json: (energy ?? .null).render())
        }
    }

    // MARK: - What the page shows

    /// `GET /api/status`.
    package func statusText() -> String { statusJSON().render() }

    /// `GET /api/energy`.
    package func energyHistoryText() async -> String { await energyHistory().render() }

    package func statusJSON() -> JSON {
        let config = hub.config
        return [
            "gateway": [
                "version": .string(GatewayController.version), "base_topic": .string(hub.topics.base),
                "started_at": .string(ISOTime.format(hub.context.startedAt)), "now": .string(ISOTime.format(hub.now())),
            ],
            "allow_commands": .bool(config.http.allowCommands),
            "devices": .array(hub.devices.keys.sorted().compactMap(deviceJSON)),
            "vendors": .array(hub.vendors.keys.sorted().map(vendorJSON)),
            "events": .array(events),
            "outbox": outboxJSON(),
            "energy": energy ?? .null,
        ]
    }

    private func deviceJSON(_ id: DeviceID) -> JSON? {
        guard let device = hub.devices[id] else { return nil }
        let state = hub.states[id] ?? DeviceState()
        // The one control the page offers per row: on/off, or lock/unlock.
        let control: JSON = ["state", "lock"].first { device.keys.contains($0) && device.isWritable($0) }.map(JSON.string) ?? .null
        return JSON.object([
            "id": .string(id.rawValue), "name": .string(device.name), "type": .string(device.type.rawValue),
            "vendor": .string(device.vendorID), "room": .optional(device.room),
            "online": .bool(hub.availability[id] ?? false), "stale": .bool(state.stale),
            "last_seen": state.lastSeen.map { .string(ISOTime.format($0)) } ?? .null,
            "values": .object(state.values.mapValues(JSON.init)),
            "units": .object(Dictionary(uniqueKeysWithValues: device.specs.compactMap { spec in spec.unit.map { (spec.name, JSON.string($0)) } })),
            "control": control,
        ])
    }

    private func vendorJSON(_ vendorID: String) -> JSON {
        var object: [String: JSON] = ["id": .string(vendorID), "type": .optional(hub.vendorTypes[vendorID])]
        if let health = hub.vendorHealth[vendorID], case .object(let fields) = hub.vendorHealthJSON(health) {
            object.merge(fields) { current, _ in current }
        } else {
            // A vendor without a breaker or stream reports no health: it is fine once it has answered.
            object["state"] = .string(hub.answeredVendors.contains(vendorID) ? "ok" : "starting")
        }
        return .object(object)
    }

    private func outboxJSON() -> JSON {
        let waiting = commands.waitingCommands()
        return ["commands_waiting": .number(Double(waiting.count)), "commands": .array(Array(waiting.prefix(50)))]
    }

    // MARK: - The 24-hour energy plot

    /// Per key, the sum over the home's energy devices of each device's 5-minute average, from the cache's
    /// history. Home consumption is derived from the flows where no device reports it (as `energy/home` does).
    package func energyHistory() async -> JSON {
        let end = hub.now().timeIntervalSince1970
        // Buckets on whole 5-minute marks, so a reload draws the same points.
        let start = ((end - Self.energyWindow) / Self.energyStep).rounded(.down) * Self.energyStep
        guard let store else {
            return ["available": false, "reason": "no storage: configure storage.path to keep history", "series": [:]]
        }
        let allowed = hub.config.energyHomeKeys
        var wanted: [(device: String, key: String)] = []
        for (id, device) in hub.devices.sorted(by: { $0.key < $1.key }) {
            let permitted = allowed[device.vendorID]
            for key in Self.energyKeys where device.keys.contains(key) && (permitted?.contains(key) ?? true) {
                wanted.append((id.rawValue, key))
            }
        }
        let queries = wanted
        let step = Self.energyStep
        let buckets = Int(((end - start) / step).rounded(.up))
        do {
            let sums = try await store.runReading { db -> [String: [Double?]] in
                var sums: [String: [Double?]] = [:]
                for query in queries {
                    let points = try db.history(deviceID: query.device, key: query.key, from: start, to: end, resolution: .raw)
                    var total = [Double](repeating: 0, count: buckets)
                    var count = [Int](repeating: 0, count: buckets)
                    for point in points where point.value.isFinite {
                        let index = Int((point.time - start) / step)
                        guard index >= 0, index < buckets else { continue }
                        total[index] += point.value
                        count[index] += 1
                    }
                    var series = sums[query.key] ?? [Double?](repeating: nil, count: buckets)
                    for index in 0..<buckets where count[index] > 0 {
                        series[index] = (series[index] ?? 0) + total[index] / Double(count[index])
                    }
                    sums[query.key] = series
                }
                return sums
            }
            var series = sums
            if series["home_power"] == nil, series["solar_power"] != nil || series["grid_power"] != nil || series["battery_power"] != nil {
                series["home_power"] = (0..<buckets).map { index in
                    let parts = ["solar_power", "grid_power", "battery_power"].compactMap { series[$0]?[index] }
                    return parts.isEmpty ? nil : parts.reduce(0, +)
                }
            }
            let rendered = series.mapValues { values in
                JSON.array(values.enumerated().compactMap { index, value in
                    value.map { JSON.array([.number(start + Double(index) * step), .number(($0 * 10).rounded() / 10)]) }
                })
            }
            return ["available": true, "from": .number(start), "to": .number(end), "step_s": .number(step), "unit": "W", "series": .object(rendered)]
        } catch {
            return ["available": false, "reason": .string("history query failed: \(error)"), "series": [:]]
        }
    }
}
