import Cache
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import Logging

/// A running gateway (zigbee2mqtt's `controller.ts`): it builds the hub and the extensions of the features it
/// is given, and is what the services and tests talk to. Everything it does, it hands to the hub. Which
/// features run, and in which order, the composition root decides (`LBSGatewayApp`).
@GatewayActor
public final class GatewayController {
    public nonisolated static let version = "0.2.0"

    /// The request names served on `<base>/bridge/request/<name>`.
    public nonisolated static let requestNames = [
        "info", "devices", "device/refresh", "health", "history", "batch", "restart", "options", "scenes", "scene/add", "scene/remove", "scene/run",
    ]

    /// Every `type` published on `<base>/bridge/event`.
    public nonisolated static var eventTypes: [String] { BridgeEventType.allCases.map(\.rawValue) }

    package let hub: GatewayHub
    package let bridge: BridgeAPI
    package let commands: Commands
    package let cache: CacheWriter?

    /// `features`: the extensions in dispatch order (see `GatewayApp.features` in `LBSGatewayApp`). The order is
    /// part of the topic contract: on a (re)connect the bridge topics go out first, then discovery, then each
    /// device's availability and state, then the home views; a new device's discovery goes out before its
    /// availability and its first state.
    package init(
        config: GatewayConfig, transport: any MessageTransport, logger: Logger, persistence: CacheLink? = nil,
        features: [any GatewayFeature], clock: any Clock<Duration> = ContinuousClock(), now: @escaping @Sendable () -> Date = { Date() }
    ) {
        let topics = Topics(base: config.mqtt.baseTopic, discoveryPrefix: config.homeAssistant.discoveryPrefix, haStatus: config.homeAssistant.statusTopic,
                            discoveryNodeID: config.homeAssistant.nodeID)
        let gate = transport.loopsBack ? FirstConnectGate(transport, topics: topics) : nil
        let context = GatewayContext(config: config, topics: topics, transport: gate ?? transport, firstConnectGate: gate, logger: logger,
                                     clock: clock, now: now, startedAt: now())
        let hub = GatewayHub(context: context)
        let parts = GatewayParts(hub: hub, bridge: BridgeAPI(hub: hub), commands: Commands(hub: hub, persistence: persistence), persistence: persistence,
                                 cache: persistence.map { CacheWriter(hub: hub, persistence: $0) })
        hub.install(features.flatMap { $0.extensions(parts) })
        self.hub = hub
        bridge = parts.bridge
        commands = parts.commands
        cache = parts.cache
    }

    /// Extensions hold the hub and the hub holds them: the cycle ends with the controller, and their
    /// timers with it.
    isolated deinit {
        hub.dismantle()
    }

    public func register(_ vendor: any Vendor) {
        hub.register(vendor)
    }

    /// The vendor event inbox, so its drops and depth show in `health`.
    public func attach(_ inbox: EventInbox<VendorEvent>) {
        hub.eventInbox = inbox
    }

    public func configureBridge(_ controls: BridgeControls) {
        bridge.controls = controls
    }

    public var deviceIDs: [DeviceID] { hub.devices.keys.sorted() }

    /// One line for systemd's `STATUS=` (what `systemctl status` shows): devices, and the vendors that are down.
    public func statusLine() -> String {
        let online = hub.availability.values.filter { $0 }.count
        let down = hub.vendorHealth.values.filter { $0.state == .down }.map(\.vendorID).sorted()
        return "\(hub.devices.count) devices (\(online) online); " + (down.isEmpty ? "no vendor down" : "vendors down: " + down.joined(separator: ", "))
    }

    public func state(of id: DeviceID) -> DeviceState? { hub.states[id] }

    // MARK: - Connection and messages

    /// Runs after every (re)connect: the broker may have restarted without persistence,
    /// so subscriptions and every retained topic are sent again.
    public func connected() {
        hub.connected()
    }

    public func handle(_ message: InboundMessage) {
        hub.handle(message)
    }

    /// The last thing before disconnecting on a clean shutdown.
    public func publishOffline() async -> Bool {
        await hub.transport.publishAndWait(hub.topics.bridgeState, #"{"state":"offline"}"#, retain: true, timeout: .seconds(2))
    }

    // MARK: - Vendor events

    /// Drains vendor events on the gateway's executor: each wake-up handles the whole backlog, with no hop per event.
    public func consume(_ inbox: EventInbox<VendorEvent>) async {
        while let events = await inbox.next() {
            // A large backlog is handled in slices: between them the executor takes commands and requests that
            // arrived meanwhile, so telemetry never makes a command wait for the whole backlog.
            var start = events.startIndex
            while start < events.endIndex {
                let slice = events[start..<min(start + Self.eventSlice, events.endIndex)]
                start = slice.endIndex
                if slice.count < Self.coalescedSlice {
                    for event in slice { hub.handle(event) }
                } else {
                    // A poll's worth of states leaves as a few TCP segments, not one per state (`coalescingWrites`).
                    hub.transport.coalescingWrites {
                        for event in slice { hub.handle(event) }
                    }
                }
                if slice.count == Self.eventSlice { await Task.yield() }
            }
            inbox.recycle(events)
        }
    }

    /// Vendor events handled before the executor lets waiting commands in.
    package static let eventSlice = 256
    /// Slices at least this long (a poll's states) are published as one burst. A command's outcome, a few events,
    /// goes out as it comes: nothing it publishes waits for the end of a burst.
    package static let coalescedSlice = 16

    public func handle(_ event: VendorEvent) {
        hub.handle(event)
    }

    // MARK: - Start and stop

    /// Puts the previous run's devices and states back (stale, offline) before any vendor answers.
    public func restoreFromCache() async {
        await cache?.restore()
    }

    /// After a restart: resumes the commands the outbox holds (see `Commands.resumeOutbox`).
    public func resumeOutbox() async {
        await commands.resumeOutbox()
    }

    /// Publishes `bridge/health` until cancelled.
    public func runBridgeHealth() async {
        await bridge.runHealth()
    }

    /// Hands over what is pending (the cache's last batch) and ends the extensions' tasks.
    /// Call after the vendors stopped and before disconnecting.
    public func flushForShutdown() async {
        await commands.drain(within: .seconds(2))
        await hub.tasks.cancelAndWait()
        for item in hub.extensions { await item.shutdown() }
    }

    /// The periodic self-check (drops, storage state); runs by itself every 5 s once connected.
    public func housekeeping() {
        bridge.housekeeping()
    }
}
