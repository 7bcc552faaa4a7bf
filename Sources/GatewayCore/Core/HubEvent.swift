#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel

/// What the hub tells its extensions, in the order things happen. Dispatch is synchronous and in
/// the order of the extension list (see `GatewayController.extensions(for:)`), which is how the
/// order of messages users rely on comes about: see "Order of messages" in `mqtt-topics.md`.
package enum HubEvent {
    /// The broker connection is (again) up: subscriptions are made and `bridge/state` is online.
    /// Everything retained goes out again (the broker may have restarted without persistence).
    case connected
    /// A device joined the registry: from a vendor, or (`restored`) from the cache at start-up, before
    /// the first connect (nothing needs publishing then: `connected` sends everything).
    case deviceAdded(Device, restored: Bool)
    /// A known device's description changed (name, room, keys…).
    case deviceChanged(Device)
    /// A device left the registry; its retained topics are cleared.
    case deviceRemoved(Device)
    /// A vendor's full inventory was applied; `changed` when devices were added, changed or removed.
    case inventoryApplied(vendorID: String, changed: Bool)
    /// New values for a device. `changed` is false for a heartbeat (same values, `last_seen` moved).
    case stateUpdated(DeviceID, update: [String: StateValue], changed: Bool, observedAt: Date, source: StateSource)
    case availabilityChanged(DeviceID, online: Bool)
    case vendorHealthChanged(VendorHealth, previous: VendorHealth?)
    /// A one-off event a vendor reported for a device (a button press, a leak detected).
    case deviceEvent(DeviceID, type: String, data: [String: StateValue], at: Date)
    /// Past readings of a device's keys, each at its own time (for the history only).
    case historyReported(DeviceID, [TimedReading])
    /// Home Assistant came (back) online and its random delay passed: states go out again.
    case homeAssistantBirth
    /// A home view (`energy/home`, `environment/<room>`) was published; nil when it was cleared.
    case homeViewUpdated(HomeView, payload: JSON?)
    /// Something `bridge/info` shows changed (log level, storage state, drops).
    case bridgeInfoChanged
    /// An event went out on `<base>/bridge/event` (the status page keeps the last ones).
    case bridgeEventPublished(type: String, data: JSON, time: Date)
    /// Vendors an earlier run published that are no longer configured (found by the retained sweep; their retained
    /// health is cleared): Home Assistant is told to remove their health sensors.
    case vendorsRetired(Set<String>)
    /// A vendor call that carries out a command returned (`error` nil when it succeeded).
    case vendorCallFinished(vendorID: String, duration: Duration, error: GatewayError?)
    /// A command reached its outcome: `result` is `ok` or the error code; `duration` from its arrival.
    case commandFinished(vendorID: String, result: String, duration: Duration)
    /// The cache's writability may have changed (an outbox or write-behind write failed or succeeded).
    case storageHealthChanged
}

/// Where new values came from.
package enum StateSource {
    /// Reported by the vendor (a poll or a push).
    case vendor
    /// Confirmed by the vendor as the outcome of a command.
    case command
}

/// A home view (`energy/home`, `environment/<room>`): Home Assistant sees each as a device of its own.
public enum HomeView: Sendable, Hashable {
    case energy
    /// `room` is the slug in `<base>/environment/<room>`, `name` the room as configured.
    case environment(room: String, name: String)

    package var slug: String {
        switch self {
        case .energy: "energy_home"
        case .environment(let room, _): "environment_" + room
        }
    }
}

/// Every `type` published on `<base>/bridge/event`, documented in `mqtt-topics.md` (a test keeps the two in step).
public enum BridgeEventType: String, CaseIterable, Sendable {
    case deviceAdded = "device_added"
    case deviceRemoved = "device_removed"
    case commandFailed = "command_failed"
    case vendorStateChanged = "vendor_state_changed"
    case responseRefused = "response_refused"
    case storageStateChanged = "storage_state_changed"
    case inventoryTruncated = "inventory_truncated"
    case deviceEvent = "device_event"
    case alertRaised = "alert_raised"
    case alertCleared = "alert_cleared"
    case sceneRun = "scene_run"
}
