#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import VendorKit
import Synchronization

/// Options of a `type: demo` vendor entry.
public struct DemoOptions: Sendable, Hashable {
    /// Seconds between drift updates.
    public var pollInterval: Duration
    /// Extra simulated devices for load tests (`devices: N`).
    public var extraDevices: Int
    /// Seed for the drift; the same seed (and start time) gives the same readings.
    public var seed: UInt64
    /// The time zone whose time of day the sun and the home load follow (the machine's by default).
    public var timeZone: LocalZone

    public init(pollInterval: Duration = .seconds(5), extraDevices: Int = 0, seed: UInt64 = 0x1b5, timeZone: LocalZone = .current) {
        self.pollInterval = pollInterval
        self.extraDevices = extraDevices
        self.seed = seed
        self.timeZone = timeZone
    }
}

/// The embedded demo vendor: a light, thermostat, lock, plug, home energy system and air
/// monitor placed in rooms, with plausibly drifting readings and commands that change state.
/// It is how a new user sees the whole system work without hardware.
public final class DemoVendor: Vendor {
    public let instanceID: String
    public let typeName = "demo"
    private let options: DemoOptions
    private let sink: VendorEventSink
    private let clock: any Clock<Duration>
    private let now: @Sendable () -> Date
    private let world: Mutex<DemoWorld>

    public init(
        instanceID: String, options: DemoOptions, sink: VendorEventSink,
        clock: any Clock<Duration> = ContinuousClock(), now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.instanceID = instanceID
        self.options = options
        self.sink = sink
        self.clock = clock
        self.now = now
        self.world = Mutex(DemoWorld(instanceID: instanceID, extraDevices: options.extraDevices, seed: options.seed, start: now(), timeZone: options.timeZone))
    }

    public var devices: [Device] { world.withLock { $0.devices } }

    /// Energy counters and the battery level continue from the cache instead of restarting lower
    /// (Home Assistant reads a lower `total_increasing` value as a meter reset).
    public func restore(lastKnown states: [DeviceID: [String: StateValue]]) {
        world.withLock { $0.restore(states) }
    }

    /// The current readings of every device (tests, benchmarks).
    public func snapshot() -> [DeviceID: [String: StateValue]] { world.withLock { $0.snapshot() } }

    public func run() async throws {
        let (devices, states) = world.withLock { ($0.devices, $0.snapshot()) }
        sink.send(.inventory(vendorID: instanceID, devices: devices))
        let observed = now()
        for (id, values) in states { sink.send(.state(id, values, observedAt: observed)) }
        while !Task.isCancelled {
            try await clock.sleep(for: options.pollInterval)
            tick()
        }
    }

    /// Advances the simulation one step and reports every device's new readings.
    /// Public so benchmarks can drive updates as fast as the gateway can publish them.
    public func tick() {
        let observed = now()
        let updates = world.withLock { $0.drift(at: observed) }
        for (id, values) in updates { sink.send(.state(id, values, observedAt: observed)) }
    }

    /// Runs `rounds` simulation steps without reporting them and returns the events they would
    /// have produced (benchmarks time the gateway's path separately from the simulation).
    public func simulate(rounds: Int) -> [VendorEvent] {
        var events: [VendorEvent] = []
        let start = now()
        for round in 0..<rounds {
            let observed = start.addingTimeInterval(Double(round + 1) * 0.001)
            let updates = world.withLock { $0.drift(at: observed) }
            events.append(contentsOf: updates.map { .state($0.0, $0.1, observedAt: observed) })
        }
        return events
    }

    public func execute(_ command: DeviceCommand) async throws -> CommandOutcome {
        let result = world.withLock { $0.apply(command) }
        switch result {
        case .success(let confirmed): return CommandOutcome(confirmed: confirmed)
        case .failure(let error): throw error
        }
    }

    public func refresh(_ device: DeviceID) async throws {
        let values = world.withLock { $0.snapshot()[device] }
        guard let values else { throw GatewayError.unknownDevice(device.rawValue) }
        sink.send(.state(device, values, observedAt: now()))
    }

    /// The device's current simulated values; reading them has no side effects.
    public func readState(_ device: DeviceID) async throws -> [String: StateValue] {
        guard let values = world.withLock({ $0.snapshot()[device] }) else { throw GatewayError.unknownDevice(device.rawValue) }
        return values
    }
}
