import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayModel
import GatewayTesting
import Logging
import VendorKit
import Testing

/// A retained read-back ends when its fence comes back behind the broker's copies, not after a fixed grace. The
/// clock here is never advanced unless the test says so: a read that returns ended by its fence. The waits are long
/// (30 s) only because the suite starts hundreds of tests at once on two cores; they end as soon as the read runs.
@Suite struct RetainedReadFenceTests {
    struct Rig {
        let transport = RecordingTransport()
        let clock = ManualClock()
        let controller: GatewayController

        init() async {
            let config = GatewayConfig(mqtt: MQTTSettings(url: "mqtt://127.0.0.1"), vendors: [VendorSettings(type: "demo", id: "demo")])
            controller = await GatewayController(config: config, transport: transport, logger: Logger(label: "test"),
                                                 features: GatewayApp.features(), clock: clock)
        }
    }

    @Test func aReadBackEndsWhenItsFenceComesBackBehindTheCopies() async throws {
        let rig = await Rig()
        let hub = await rig.controller.hub
        let read = Task { await hub.readRetained(["lbs/device/demo_a", "lbs/device/demo_b"]) }
        var fence: RecordingTransport.Published?
        try await waitUntil("the fence published", timeout: .seconds(30)) {
            fence = rig.transport.messages.first { $0.topic.hasPrefix("lbs/bridge/fence/") }
            return fence != nil
        }
        let sent = try #require(fence)
        #expect(sent.payload.isEmpty && sent.qos == 0 && !sent.retain)
        // Subscribed in the same SUBSCRIBE as the read-back's topics.
        #expect(rig.transport.subscriptions.suffix(3) == ["lbs/device/demo_a", "lbs/device/demo_b", sent.topic])
        // The fence of another read-back, or an unrelated message, does not end this one.
        await hub.handle(InboundMessage(topic: "lbs/bridge/fence/0", payload: [], retain: false))
        await hub.handle(InboundMessage(topic: "lbs/device/demo_a", payload: Array("{}".utf8), retain: true))
        try await quietPeriod(.milliseconds(50))
        #expect(!rig.transport.unsubscriptions.contains(sent.topic))
        await hub.handle(InboundMessage(topic: sent.topic, payload: [], retain: false))
        #expect(await read.value)
        #expect(rig.transport.unsubscriptions.suffix(3) == ["lbs/device/demo_a", "lbs/device/demo_b", sent.topic])
        #expect(await hub.pendingFences.isEmpty)
    }

    @Test func withoutItsFenceTheGraceEndsTheRead() async throws {
        let rig = await Rig()
        let hub = await rig.controller.hub
        let read = Task { await hub.readRetained(["lbs/energy/home"]) }
        try await waitUntil("the read waits", timeout: .seconds(30)) { rig.clock.sleeperCount > 0 }
        rig.clock.advance(by: .milliseconds(500))   // GatewayHub.retainedReadGrace
        #expect(await read.value)
        #expect(await hub.pendingFences.isEmpty)
        #expect(rig.transport.unsubscriptions.contains("lbs/energy/home"))
    }
}
