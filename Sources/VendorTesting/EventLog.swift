#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import Synchronization

/// A `VendorEventSink` that records everything a vendor reported, in order, for tests.
public final class EventLog: Sendable {
    private let events = Mutex<[VendorEvent]>([])

    public init() {}

    public var sink: VendorEventSink { VendorEventSink { [self] event in events.withLock { $0.append(event) } } }

    public var all: [VendorEvent] { events.withLock { $0 } }

    public var inventories: [[Device]] {
        all.compactMap { if case .inventory(_, let devices) = $0 { devices } else { nil } }
    }

    public var health: [VendorHealth] {
        all.compactMap { if case .health(let health) = $0 { health } else { nil } }
    }

    /// The merged latest values per device.
    public var states: [DeviceID: [String: StateValue]] {
        var merged: [DeviceID: [String: StateValue]] = [:]
        for case .state(let id, let values, _) in all { merged[id, default: [:]].merge(values) { _, new in new } }
        return merged
    }

    /// When the newest state of `id` was observed.
    public func observedAt(_ id: DeviceID) -> Date? {
        all.reversed().lazy.compactMap { if case .state(id, _, let at) = $0 { at } else { nil } }.first
    }

    /// Devices added and removed one by one (push vendors), in order.
    public var added: [Device] { all.compactMap { if case .deviceAdded(let device) = $0 { device } else { nil } } }
    public var removed: [DeviceID] { all.compactMap { if case .deviceRemoved(let id) = $0 { id } else { nil } } }

    /// Each device's last reported availability.
    public var availability: [DeviceID: Bool] {
        var latest: [DeviceID: Bool] = [:]
        for case .availability(let id, let online) in all { latest[id] = online }
        return latest
    }

    /// One-off device events (button presses, leaks), in order.
    public var deviceEvents: [(id: DeviceID, type: String, data: [String: StateValue])] {
        all.compactMap { if case .deviceEvent(let id, let type, let data, _) = $0 { (id, type, data) } else { nil } }
    }

    public func clear() { events.withLock { $0.removeAll() } }
}
