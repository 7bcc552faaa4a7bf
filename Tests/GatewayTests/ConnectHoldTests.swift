import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayModel
import GatewayTesting
import Logging
import MQTT
import VendorKit
import Testing

/// Over a broker the first connect subscribes the retained sweep with a fence and announces nothing until the
/// fence is back (then the sweep is over and unsubscribed), and retained messages made before that connect are not
/// queued: the broker would send the sweep this run's own thousands of announcements back. The clock here moves
/// only when a test says so.
@Suite struct ConnectHoldTests {
    static let light = Device(vendorID: "demo", vendorDeviceID: "hall", name: "Hall", type: .light, keys: ["state", "brightness"])
    static let discovery = "homeassistant/device/lbs_demo_hall/config"
    static let plug = Device(vendorID: "demo", vendorDeviceID: "desk", name: "Desk", type: .plug, keys: ["state"])
    static let plugDiscovery = "homeassistant/device/lbs_demo_desk/config"

    struct Rig {
        let transport: RecordingTransport
        let clock = ManualClock()
        let controller: GatewayController

        init(loopsBack: Bool = true) async {
            transport = RecordingTransport(loopsBack: loopsBack)
            var config = GatewayConfig(mqtt: MQTTSettings(url: "mqtt://127.0.0.1"), vendors: [VendorSettings(type: "demo", id: "demo")])
            config.homeAssistant.republishDelayMax = 0
            controller = await GatewayController(config: config, transport: transport, logger: Logger(label: "test"),
                                                 features: GatewayApp.features(), clock: clock)
        }

        var fence: String? { transport.subscriptions.first { $0.hasPrefix("lbs/bridge/fence/") } }
        func published(_ topic: String) -> Bool { transport.messages.contains { $0.topic == topic } }
    }

    @Test func theFirstConnectAnnouncesOnceTheSweepsFenceIsBack() async throws {
        let rig = await Rig()
        await rig.controller.handle(.inventory(vendorID: "demo", devices: [Self.light]))
        // Before the first connect: the device's retained discovery and availability are not queued.
        #expect(!rig.published(Self.discovery) && !rig.published("lbs/device/demo_hall/availability"))
        #expect(rig.transport.messages.contains { $0.topic == "lbs/bridge/event" && !$0.retain })

        await rig.controller.connected()
        let fence = try #require(rig.fence)
        // The fence goes last in the sweep's SUBSCRIBE and is published at once; `online` is out, nothing else yet.
        #expect(rig.transport.subscriptions.last == fence)
        try await waitUntil("the fence published", timeout: .seconds(5)) { rig.published(fence) }
        #expect(rig.published("lbs/bridge/state") && !rig.published(Self.discovery) && !rig.published("lbs/bridge/devices"))
        // A vendor state meanwhile waits for the announcements (it must not overtake the device's discovery), and a
        // device that appears meanwhile is announced with them (sent now, the broker would echo it to the sweep).
        await rig.controller.handle(.state(Self.light.id, ["state": .string("ON")], observedAt: Date()))
        await rig.controller.handle(.inventory(vendorID: "demo", devices: [Self.light, Self.plug]))
        // Home Assistant's birth meanwhile (retained at the broker, republish delay 0) does not publish states early.
        await rig.controller.handle(InboundMessage(topic: "homeassistant/status", payload: Array("online".utf8), retain: true))
        try await quietPeriod(.milliseconds(50))
        #expect(!rig.published("lbs/device/demo_hall") && !rig.published(Self.plugDiscovery))

        // An earlier run's retained copy arrives before the fence, then the fence: the sweep ends, then the announcements.
        await rig.controller.handle(InboundMessage(topic: "lbs/device/demo_gone/availability", payload: Array(#"{"state":"online"}"#.utf8), retain: true))
        await rig.controller.handle(InboundMessage(topic: fence, payload: [], retain: false))
        try await waitUntil("the announcements", timeout: .seconds(5)) { rig.published("lbs/device/demo_hall") }
        let topics = rig.transport.messages.map(\.topic)
        #expect(rig.transport.unsubscriptions.contains("lbs/device/+/availability") && rig.transport.unsubscriptions.contains(fence))
        let discoveryAt = try #require(topics.firstIndex(of: Self.discovery))
        let stateAt = try #require(topics.firstIndex(of: "lbs/device/demo_hall"))
        #expect(discoveryAt < stateAt && rig.published(Self.plugDiscovery))
        #expect(rig.transport.last("lbs/device/demo_hall")?.payload.contains(#""state":"ON""#) == true)
        // Nothing waited on the clock: the fence ended the hold.
        #expect(rig.clock.now == ManualClock().now)
        // A reconnect announces at once (the sweep is over), and retained messages pass again.
        rig.transport.clear()
        await rig.controller.connected()
        #expect(rig.published(Self.discovery))
        #expect(rig.transport.subscriptions.filter { $0 == "lbs/device/+/availability" || $0 == fence }.count == 2)
    }

    @Test func withoutTheFenceTheAnnouncementsGoAfterTheGraceAndTheSweepRunsOn() async throws {
        let rig = await Rig()
        await rig.controller.handle(.inventory(vendorID: "demo", devices: [Self.light]))
        await rig.controller.connected()
        try await waitUntil("the hold waits", timeout: .seconds(5)) { rig.clock.sleeperCount > 0 }
        #expect(!rig.published(Self.discovery))
        rig.clock.advance(by: .milliseconds(500))   // GatewayHub.retainedReadGrace
        try await waitUntil("the announcements", timeout: .seconds(5)) { rig.published(Self.discovery) }
        // The sweep still collects for its usual time, then unsubscribes.
        #expect(!rig.transport.unsubscriptions.contains("lbs/device/+/availability"))
        try await waitUntil("the sweep's timer", timeout: .seconds(5)) { rig.clock.sleeperCount > 0 }
        rig.clock.advance(by: .seconds(3))          // RetainedSweep.sweepDuration
        try await waitUntil("the sweep ends", timeout: .seconds(5)) { rig.transport.unsubscriptions.contains("lbs/device/+/availability") }
    }

    @Test func aTransportThatDoesNotLoopBackAnnouncesAtOnce() async throws {
        let rig = await Rig(loopsBack: false)
        await rig.controller.handle(.inventory(vendorID: "demo", devices: [Self.light]))
        #expect(rig.published(Self.discovery))
        await rig.controller.connected()
        #expect(rig.fence == nil)
        #expect(rig.transport.messages.filter { $0.topic == Self.discovery }.count == 2)
    }
}

@Suite struct FirstConnectGateTests {
    @Test func beforeTheFirstAnnouncementsOnlyWhatTheyWouldNotRepeatPasses() {
        let inner = RecordingTransport(loopsBack: true)
        let gate = FirstConnectGate(inner, topics: Topics(base: "lbs", discoveryPrefix: "homeassistant"))
        gate.publish("homeassistant/device/lbs_a/config", "{}", qos: 1, retain: true, correlationData: nil)
        gate.publish("lbs/device/a/availability", #"{"state":"online"}"#, qos: 1, retain: true, correlationData: nil)
        gate.publish("lbs/device/a", #"{"state":"ON"}"#, qos: 1, retain: true, correlationData: nil)   // a command's state
        gate.publish("lbs/device/gone", "", qos: 1, retain: true, correlationData: nil)                 // a clear
        gate.publish("lbs/bridge/event", "{}", qos: 1, retain: false, correlationData: nil)
        gate.publishAlways("lbs/bridge/state", #"{"state":"online"}"#, qos: 1, retain: true)
        #expect(inner.messages.map(\.topic) == ["lbs/device/a", "lbs/device/gone", "lbs/bridge/event", "lbs/bridge/state"])
        gate.open()
        gate.publish("lbs/device/a/availability", #"{"state":"online"}"#, qos: 1, retain: true, correlationData: nil)
        #expect(inner.messages.last?.topic == "lbs/device/a/availability" && gate.loopsBack)
    }

    /// A state rendered into bytes (the state publisher's path) is gated the same way as text.
    @Test func bytePayloadsAreGatedLikeText() {
        let inner = RecordingTransport(loopsBack: true)
        let gate = FirstConnectGate(inner, topics: Topics(base: "lbs", discoveryPrefix: "homeassistant"))
        gate.publish("lbs/device/a/availability", utf8: Array(#"{"state":"online"}"#.utf8), qos: 1, retain: true)
        gate.publish("lbs/device/a", utf8: Array(#"{"state":"ON"}"#.utf8), qos: 1, retain: true)
        gate.publish("lbs/device/gone", utf8: [], qos: 1, retain: true)
        #expect(inner.messages.map(\.topic) == ["lbs/device/a", "lbs/device/gone"])
        #expect(inner.messages.first?.payload == #"{"state":"ON"}"#)
        gate.open()
        gate.publish("lbs/device/a/availability", utf8: Array(#"{"state":"online"}"#.utf8), qos: 1, retain: true)
        #expect(inner.messages.last?.topic == "lbs/device/a/availability")
    }
}

/// The same against a real broker: a start with hundreds of devices reads back only what an earlier run left,
/// not its own announcements (before: every device's discovery, availability and alert states came back).
@Suite(.serialized) struct ConnectEchoTests {
    @Test func aStartWithManyDevicesGetsNoEchoOfItsOwnAnnouncements() async throws {
        let h = try await GatewayHarness.start(vendors: "  - {type: demo, id: demo, poll_interval: 3600, devices: 400}")
        defer { Task { await h.stop(); await h.broker.stop(); h.directory.remove() } }
        let client = try await h.observer("lbs/device/demo_sim_399", "lbs/bridge/response/health")
        _ = try await client.waitForMessage(topic: "lbs/device/demo_sim_399", timeout: .seconds(20))
        try await client.publish("lbs/bridge/request/health", "{}", qos: .atLeastOnce)
        let health = try await client.waitForMessage(topic: "lbs/bridge/response/health", timeout: .seconds(5))
        let messages = ((health.json?["data"] as? [String: Any])?["messages"] as? [String: Any]) ?? [:]
        let inbound = try #require(messages["inbound"] as? Double, "\(health.text)")
        // The request itself, fences, the odd Home Assistant status: a handful, not 400 devices' worth.
        #expect(inbound < 50, "\(health.text)")
    }
}
