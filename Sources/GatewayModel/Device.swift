#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A device as the gateway presents it: identity, description and the keys it reports.
public struct Device: Sendable, Hashable, Codable {
    /// The fields, in one immutable box: every extension copies a device out of the registry on every state update,
    /// and a copy of fifteen fields retained each of their strings and collections; a copy of the box is one
    /// retain. Devices change rarely (an inventory), so a change makes a new box.
    private var storage: Storage

    private final class Storage: Sendable {
        let fields: Fields
        init(_ fields: Fields) { self.fields = fields }
    }

    /// What a device is; encoded as the device itself (the cache's stored JSON keeps its shape).
    private struct Fields: Sendable, Hashable, Codable {
        var id: DeviceID
        var vendorID: String
        var vendorDeviceID: String
        var name: String
        var type: DeviceType
        var manufacturer: String?
        var model: String?
        var room: String?
        var swVersion: String?
        var serialNumber: String?
        var writableKeys: Set<String>?
        var keys: [String]
        var eventTypes: [String]?
        var viaDevice: DeviceID?
        var limits: [String: KeyLimits]?
    }

    public var id: DeviceID {
        get { storage.fields.id }
        set { update { $0.id = newValue } }
    }
    /// The vendor instance (`vendors[].id`) that owns it.
    public var vendorID: String {
        get { storage.fields.vendorID }
        set { update { $0.vendorID = newValue } }
    }
    /// The vendor's own id for it, used only inside the vendor adapter.
    public var vendorDeviceID: String {
        get { storage.fields.vendorDeviceID }
        set { update { $0.vendorDeviceID = newValue } }
    }
    public var name: String {
        get { storage.fields.name }
        set { update { $0.name = newValue } }
    }
    public var type: DeviceType {
        get { storage.fields.type }
        set { update { $0.type = newValue } }
    }
    public var manufacturer: String? {
        get { storage.fields.manufacturer }
        set { update { $0.manufacturer = newValue } }
    }
    public var model: String? {
        get { storage.fields.model }
        set { update { $0.model = newValue } }
    }
    public var room: String? {
        get { storage.fields.room }
        set { update { $0.room = newValue } }
    }
    public var swVersion: String? {
        get { storage.fields.swVersion }
        set { update { $0.swVersion = newValue } }
    }
    /// The vendor's serial number, when it gives one (Home Assistant device info).
    public var serialNumber: String? {
        get { storage.fields.serialNumber }
        set { update { $0.serialNumber = newValue } }
    }
    /// Keys a command can really change on this device. nil: every key the registry marks writable.
    /// A vendor that cannot carry out a registry-writable key (a backend that reports a lock but cannot
    /// lock it) lists only what it can do, so nothing advertises a command that would be refused.
    public var writableKeys: Set<String>? {
        get { storage.fields.writableKeys }
        set { update { $0.writableKeys = newValue } }
    }
    /// Normalized keys this device reports or accepts, in display order (names from `StateKeys`).
    public var keys: [String] {
        get { storage.fields.keys }
        set { update { $0.keys = newValue } }
    }
    /// One-off events it can report (`VendorEvent.deviceEvent`): button presses, a leak detected. They are
    /// published on `<base>/device/<id>/event` and become a Home Assistant `event` entity. nil: none.
    public var eventTypes: [String]? {
        get { storage.fields.eventTypes }
        set { update { $0.eventTypes = newValue } }
    }
    /// The device it is reached through, when that is itself a device of the gateway (a Matter bridge's bridged
    /// devices): Home Assistant shows it as "connected via". nil: the gateway itself.
    public var viaDevice: DeviceID? {
        get { storage.fields.viaDevice }
        set { update { $0.viaDevice = newValue } }
    }
    /// Where this device narrows the registry's range of a key, by key: an EV charger's current is 6 … 40 A on the
    /// device, not the registry's 0 … 80; a fan takes only the modes it has. nil: the registry's own.
    public var limits: [String: KeyLimits]? {
        get { storage.fields.limits }
        set { update { $0.limits = newValue } }
    }

    private mutating func update(_ change: (inout Fields) -> Void) {
        var fields = storage.fields
        change(&fields)
        storage = Storage(fields)
    }

    public init(from decoder: any Decoder) throws {
        storage = Storage(try Fields(from: decoder))
    }

    public func encode(to encoder: any Encoder) throws {
        try storage.fields.encode(to: encoder)
    }

    public static func == (lhs: Device, rhs: Device) -> Bool {
        lhs.storage === rhs.storage || lhs.storage.fields == rhs.storage.fields
    }

    public func hash(into hasher: inout Hasher) {
        storage.fields.hash(into: &hasher)
    }

    public init(
        vendorID: String, vendorDeviceID: String, name: String, type: DeviceType,
        manufacturer: String? = nil, model: String? = nil, room: String? = nil, swVersion: String? = nil,
        serialNumber: String? = nil, writableKeys: Set<String>? = nil, keys: [String], eventTypes: [String]? = nil, viaDevice: DeviceID? = nil,
        limits: [String: KeyLimits]? = nil
    ) {
        storage = Storage(Fields(
            id: DeviceID(vendorInstance: vendorID, vendorDeviceID: vendorDeviceID), vendorID: vendorID,
            vendorDeviceID: vendorDeviceID, name: name, type: type, manufacturer: manufacturer, model: model, room: room,
            swVersion: swVersion, serialNumber: serialNumber, writableKeys: writableKeys, keys: keys, eventTypes: eventTypes,
            viaDevice: viaDevice, limits: limits))
    }

    /// Each key's spec as this device has it (`spec(_:)`).
    public var specs: [KeySpec] { keys.compactMap(spec) }

    /// The registry's spec of a key, narrowed to this device's own limits (commands and Home Assistant use it).
    public func spec(_ key: String) -> KeySpec? {
        guard let spec = StateKeys.spec(key) else { return nil }
        guard let limit = limits?[key] else { return spec }
        return limit.narrowing(spec)
    }

    public func accepts(_ key: String) -> Bool {
        keys.contains(key) && isWritable(key)
    }

    /// True when a command can change `key` on this device (registry-writable and not restricted by the vendor).
    public func isWritable(_ key: String) -> Bool {
        guard StateKeys.spec(key)?.writable ?? false else { return false }
        return writableKeys.map { $0.contains(key) } ?? true
    }

    /// The slug of `room`, used in `<base>/environment/<room>`.
    public var roomSlug: String? { room.map(Slug.make) }
}

/// The latest known state of one device.
public struct DeviceState: Sendable, Hashable {
    public var values: [String: StateValue]
    /// When the vendor observed these values (not when they were published).
    public var lastSeen: Date?
    /// True while the values come from the cache and no fresh reading has arrived yet.
    public var stale: Bool

    public init(values: [String: StateValue] = [:], lastSeen: Date? = nil, stale: Bool = false) {
        self.values = values
        self.lastSeen = lastSeen
        self.stale = stale
    }

    public subscript(key: String) -> StateValue? {
        get { values[key] }
        set { values[key] = newValue }
    }

    /// Merges a partial fresh update: new keys replace old ones, the rest stay.
    public mutating func merge(_ update: [String: StateValue], observedAt: Date) {
        _ = mergeReportingChange(update, observedAt: observedAt)
    }

    /// `mergeReportingChange` for a device with counters: a number lower than the value it replaces is offered to
    /// `hold` (key, last value, new value), and when held, the last value stays, in the state and in `update`, and
    /// counts as unchanged. In the same pass as the merge, so each key is looked up once.
    public mutating func mergeReportingChange(_ update: inout [String: StateValue], observedAt: Date,
                                              holding hold: (_ key: String, _ last: Double, _ new: Double) -> Bool) -> Bool {
        var changed = stale
        for (key, value) in update {
            let previous = values.updateValue(value, forKey: key)
            guard previous != value else { continue }
            if case .number(let new) = value, case .number(let last)? = previous, new < last, hold(key, last, new) {
                values[key] = previous
                update[key] = previous
                continue
            }
            changed = true
        }
        if lastSeen.map({ observedAt >= $0 }) ?? true { lastSeen = observedAt }
        stale = false
        return changed
    }

    /// `merge`, telling whether anything a subscriber sees changed: a value, or the `stale` flag
    /// (a newer `last_seen` alone is not a change; it is refreshed on the state heartbeat).
    public mutating func mergeReportingChange(_ update: [String: StateValue], observedAt: Date) -> Bool {
        var changed = stale
        // One lookup per key: the value is stored, and the one it replaced tells whether it changed. Not the
        // `holding:` variant with a closure that holds nothing: that measured ~3 % more per state on the hot path.
        for (key, value) in update where values.updateValue(value, forKey: key) != value {
            changed = true
        }
        if lastSeen.map({ observedAt >= $0 }) ?? true { lastSeen = observedAt }
        stale = false
        return changed
    }
}

/// A device's own limits for one key, inside the registry's: a number's range, or the words a setting takes.
public struct KeyLimits: Sendable, Hashable, Codable {
    public var min: Double?
    public var max: Double?
    /// The words the device reports and accepts (a subset of the registry's, in the registry's order).
    public var options: [String]?

    public init(min: Double? = nil, max: Double? = nil, options: [String]? = nil) {
        self.min = min
        self.max = max
        self.options = options
    }

    /// The spec with this range or these words; never wider than the registry's. A range that would be empty
    /// (a device reporting a minimum above its maximum) leaves the registry's.
    public func narrowing(_ spec: KeySpec) -> KeySpec {
        var kind = spec.kind
        switch spec.kind {
        case .number(let low, let high):
            let lower = [low, min].compactMap { $0 }.max()
            let upper = [high, max].compactMap { $0 }.min()
            if let lower, let upper, lower > upper { return spec }
            kind = .number(min: lower, max: upper)
        case .enumeration(let words):
            guard let options else { return spec }
            let kept = words.filter(options.contains)
            if kept.isEmpty { return spec }
            kind = .enumeration(kept)
        default:
            return spec
        }
        return KeySpec(spec.name, label: spec.label, unit: spec.unit, kind: kind, writable: spec.writable, commands: spec.commands,
                       series: spec.series, category: spec.category)
    }
}
