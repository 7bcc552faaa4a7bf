#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A device as the gateway presents it: identity, description and the keys it reports.
public struct Device: Sendable, Hashable, Codable {
    public var id: DeviceID
    /// The vendor instance (`vendors[].id`) that owns it.
    public var vendorID: String
    /// The vendor's own id for it, used only inside the vendor adapter.
    public var vendorDeviceID: String
    public var name: String
    public var type: DeviceType
    public var manufacturer: String?
    public var model: String?
    public var room: String?
    public var swVersion: String?
    /// The vendor's serial number, when it gives one (Home Assistant device info).
    public var serialNumber: String?
    /// Keys a command can really change on this device. nil: every key the registry marks writable.
    /// A vendor that cannot carry out a registry-writable key (a backend that reports a lock but cannot
    /// lock it) lists only what it can do, so nothing advertises a command that would be refused.
    public var writableKeys: Set<String>?
    /// Normalized keys this device reports or accepts, in display order (names from `StateKeys`).
    public var keys: [String]
    /// One-off events it can report (`VendorEvent.deviceEvent`): button presses, a leak detected. They are
    /// published on `<base>/device/<id>/event` and become a Home Assistant `event` entity. nil: none.
    public var eventTypes: [String]?
    /// The device it is reached through, when that is itself a device of the gateway (a Matter bridge's bridged
    /// devices): Home Assistant shows it as "connected via". nil: the gateway itself.
    public var viaDevice: DeviceID?

    public init(
        vendorID: String, vendorDeviceID: String, name: String, type: DeviceType,
        manufacturer: String? = nil, model: String? = nil, room: String? = nil, swVersion: String? = nil,
        serialNumber: String? = nil, writableKeys: Set<String>? = nil, keys: [String], eventTypes: [String]? = nil, viaDevice: DeviceID? = nil
    ) {
        self.id = DeviceID(vendorInstance: vendorID, vendorDeviceID: vendorDeviceID)
        self.vendorID = vendorID
        self.vendorDeviceID = vendorDeviceID
        self.name = name
        self.type = type
        self.manufacturer = manufacturer
        self.model = model
        self.room = room
        self.swVersion = swVersion
        self.serialNumber = serialNumber
        self.writableKeys = writableKeys
        self.keys = keys
        self.eventTypes = eventTypes
        self.viaDevice = viaDevice
    }

    public var specs: [KeySpec] { keys.compactMap(StateKeys.spec) }

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

    /// `merge`, telling whether anything a subscriber sees changed: a value, or the `stale` flag
    /// (a newer `last_seen` alone is not a change; it is refreshed on the state heartbeat).
    public mutating func mergeReportingChange(_ update: [String: StateValue], observedAt: Date) -> Bool {
        var changed = stale
        for (key, value) in update where values[key] != value {
            values[key] = value
            changed = true
        }
        if lastSeen.map({ observedAt >= $0 }) ?? true { lastSeen = observedAt }
        stale = false
        return changed
    }
}
