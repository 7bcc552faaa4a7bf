import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayModel
import Logging
import TestTraits
import GatewayTesting
import Testing
import VendorKit

/// When the connection cannot keep up, states are held back per device (latest wins) and commands'
/// confirmed states still go out at once.
@Suite(.integration) struct OverloadCoalescingTests {
    static let meter = Device(vendorID: "sv", vendorDeviceID: "meter", name: "Meter", type: .energyMeter, keys: ["solar_power"])
    static let light = Device(vendorID: "sv", vendorDeviceID: "light", name: "Light", type: .light, keys: ["state"])

    @GatewayActor static func controller(_ transport: RecordingTransport) -> GatewayController {
        let config = GatewayConfig(mqtt: MQTTSettings(url: "mqtt://127.0.0.1"), vendors: [VendorSettings(type: "scripted", id: "sv")])
        return GatewayController(config: config, transport: transport, logger: Logger(label: "test"))
    }

    /// Two devices, connected, and a connection 2,001 messages behind (above the default `mqtt.max_backlog`).
    static func behindTheBroker() async -> (RecordingTransport, GatewayController) {
        let transport = RecordingTransport()
        let controller = await Self.controller(transport)
        await controller.handle(.inventory(vendorID: "sv", devices: [Self.meter, Self.light]))
        await controller.connected()
        transport.clear()
        transport.setBacklog(2_001)
        return (transport, controller)
    }

    func states(_ transport: RecordingTransport, _ device: Device) -> [String] {
        transport.messages.filter { $0.topic == "lbs/device/\(device.id.rawValue)" }.map(\.payload)
    }

    @Test func aSlowConnectionGetsEachDevicesLatestStateOnce() async throws {
        let (transport, controller) = await Self.behindTheBroker()
        for watts in 1...500 {
            await controller.handle(.state(Self.meter.id, ["solar_power": .number(Double(watts))], observedAt: Date()))
        }
        #expect(states(transport, Self.meter).isEmpty, "held back while the connection is behind")
        let health = await controller.bridge.healthJSON().render()
        #expect(health.contains(#""states_held_back":1"#), "\(health)")
        #expect(health.contains(#""coalesced_states":499"#), "\(health)")

        transport.setBacklog(0)
        let published = await transport.wait(for: "lbs/device/sv_meter")
        let payload = try #require(published?.payload)
        #expect(payload.contains(#""solar_power":500"#), "the latest value wins: \(payload)")
        // Wait a few drain ticks: no second copy follows.
        try await quietPeriod( .milliseconds(100))
        #expect(states(transport, Self.meter).count == 1)
    }

    @Test func aCommandsConfirmedStateIsNotHeldBack() async throws {
        let (transport, controller) = await Self.behindTheBroker()
        await controller.handle(.state(Self.meter.id, ["solar_power": .number(1)], observedAt: Date()))
        await controller.hub.applyConfirmed(["state": .string("ON")], to: Self.light.id)
        #expect(states(transport, Self.light).count == 1, "a confirmed state goes straight out")
        #expect(states(transport, Self.meter).isEmpty)
    }
}
