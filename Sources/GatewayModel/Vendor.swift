#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What a vendor adapter reports. Adapters never talk MQTT; the gateway turns these into topics.
public enum VendorEvent: Sendable {
    /// The vendor's full device inventory. Devices not in it any more are removed (no ghosts).
    case inventory(vendorID: String, devices: [Device])
    /// A partial, fresh state update for one device.
    case state(DeviceID, [String: StateValue], observedAt: Date)
    /// The vendor can (or can no longer) reach one device.
    case availability(DeviceID, online: Bool)
    /// The vendor's health changed (breaker, last error, quota). The gateway publishes it and
    /// sets the availability of the vendor's devices from it.
    case health(VendorHealth)
    /// One device joined or changed, without a full inventory (a push vendor's node was added).
    /// `max_devices` still holds.
    case deviceAdded(Device)
    /// One device is gone, without a full inventory (a push vendor's node was removed).
    case deviceRemoved(DeviceID)
    /// A one-off event of a device: a button press, a leak detected, a device detected. Published as
    /// `device_event` on `<base>/bridge/event` and on `<base>/device/<id>/event` (a Home Assistant `event`
    /// entity); `type` should be one of the device's `eventTypes`.
    case deviceEvent(DeviceID, type: String, data: [String: StateValue], at: Date)
    /// Past readings with their own times (a utility's interval data, a monitor's backlog): written to the
    /// history (`bridge/request/history`) as they are, not published as the current state. Send the current
    /// state with `.state` as well.
    case history(DeviceID, [TimedReading])
}

/// One past value of one key, at the time it was measured.
public struct TimedReading: Sendable, Hashable {
    public var key: String
    public var value: Double
    public var at: Date

    public init(key: String, value: Double, at: Date) {
        self.key = key
        self.value = value
        self.at = at
    }
}

/// Where an adapter sends its events. Backed by an `AsyncStream` the controller drains.
public struct VendorEventSink: Sendable {
    private let deliver: @Sendable (VendorEvent) -> Void

    public init(_ deliver: @escaping @Sendable (VendorEvent) -> Void) {
        self.deliver = deliver
    }

    public func send(_ event: VendorEvent) { deliver(event) }
}

/// A vendor with bridge requests of its own, named after its type (`<base>/bridge/request/homekit/pair`).
/// The gateway hands it a request's JSON object and publishes what it returns as the response's `data`;
/// a thrown `GatewayError` becomes an error response. With several instances of one type, the request's
/// `"vendor"` names the instance (it may be left out when there is only one).
public protocol VendorRequestHandling: Vendor {
    /// The names it answers, each starting with its type and a slash: `homekit/pair`.
    var requestNames: [String] { get }
    func request(_ name: String, body: [String: JSONValue]) async throws -> JSONValue
}

/// One vendor instance (`vendors[]` entry). Everything that knows a vendor's wire format
/// lives behind this protocol, in the vendor's own folder.
public protocol Vendor: Sendable {
    /// The `id` from the config; the prefix of every device id it owns.
    var instanceID: String { get }
    /// The `type` from the config (`demo`, `consciousness`, …).
    var typeName: String { get }

    /// Discovers devices and keeps their state fresh (polling or push) until cancelled.
    /// Reports through the sink it was created with.
    func run() async throws

    /// Carries out one command. Throws a `GatewayError` describing what went wrong.
    func execute(_ command: DeviceCommand) async throws -> CommandOutcome

    /// Carries out several commands for different devices at once, in one vendor call where the
    /// vendor has one (the consciousness backend's `batch-control`). Results are keyed by command id;
    /// a missing result counts as not carried out. The default runs `execute` for each concurrently.
    func executeBatch(_ commands: [DeviceCommand]) async -> [String: Result<CommandOutcome, GatewayError>]

    /// Asks the vendor for fresh state of one device now (`<base>/device/<id>/get`).
    func refresh(_ device: DeviceID) async throws

    /// Reads one device's current state from the vendor, without side effects on the device. Used to settle
    /// a command whose outcome is unknown (a timeout after it was sent): the gateway compares the state
    /// read back with what the command asked for instead of sending it again. Throws when it cannot read.
    func readState(_ device: DeviceID) async throws -> [String: StateValue]

    /// True when one `refresh` call reads every device of the vendor (one list endpoint): the gateway then
    /// coalesces refreshes of all its devices into one call, not one per device.
    var refreshesAllDevices: Bool { get }

    /// The last known state of this vendor's devices from the cache, handed over once before `run()`.
    /// A vendor that simulates or integrates values itself (the demo's energy counters) continues from
    /// it, so counters never restart lower after a restart. Default: ignored.
    func restore(lastKnown states: [DeviceID: [String: StateValue]])
}

extension Vendor {
    public var refreshesAllDevices: Bool { false }

    public func restore(lastKnown states: [DeviceID: [String: StateValue]]) {}

    public func readState(_ device: DeviceID) async throws -> [String: StateValue] {
        throw GatewayError(.internal, message: "Vendor '\(instanceID)' cannot read a device's state back.")
    }

    public func executeBatch(_ commands: [DeviceCommand]) async -> [String: Result<CommandOutcome, GatewayError>] {
        await withTaskGroup(of: (String, Result<CommandOutcome, GatewayError>).self) { group in
            for command in commands {
                group.addTask {
                    do {
                        return (command.id, .success(try await self.execute(command)))
                    } catch let error as GatewayError {
                        return (command.id, .failure(error))
                    } catch {
                        return (command.id, .failure(GatewayError(.internal, message: "\(error)")))
                    }
                }
            }
            var results: [String: Result<CommandOutcome, GatewayError>] = [:]
            for await (id, result) in group { results[id] = result }
            return results
        }
    }
}
