import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayModel
import Logging
import Testing
import VendorKit

/// The order of messages users rely on ("Order of messages" in `mqtt-topics.md`): discovery and availability
/// go out before a device's state, the bridge topics before the devices, home views last.
@Suite struct EventOrderTests {
    static let meter = Device(vendorID: "sv", vendorDeviceID: "meter", name: "Meter", type: .energyMeter, room: "Garage",
                              keys: ["solar_power", "solar_energy", "temperature"])

    @GatewayActor static func controller(_ transport: RecordingTransport) -> GatewayController {
        var config = GatewayConfig(mqtt: MQTTSettings(url: "mqtt://127.0.0.1"), vendors: [VendorSettings(type: "scripted", id: "sv")])
        config.homeAssistant.enabled = true
        return GatewayController(config: config, transport: transport, logger: Logger(label: "test"))
    }

    /// Index of the first message on a topic matching `predicate`; fails the test when there is none.
    func index(_ messages: [RecordingTransport.Published], _ what: String, _ predicate: (String) -> Bool) -> Int {
        guard let index = messages.firstIndex(where: { predicate($0.topic) }) else {
            Issue.record("no message for \(what) in \(messages.map(\.topic))")
            return -1
        }
        return index
    }

    @Test func aNewDeviceIsAnnouncedBeforeItsAvailabilityAndItsFirstState() async {
        let transport = RecordingTransport()
        let controller = await Self.controller(transport)
        await controller.connected()
        transport.clear()
        await controller.handle(.inventory(vendorID: "sv", devices: [Self.meter]))
        await controller.handle(.state(Self.meter.id, ["solar_power": .number(10), "temperature": .number(21)], observedAt: Date()))
        let messages = transport.messages
        let added = index(messages, "device_added event") { $0 == "lbs/bridge/event" }
        let discovery = index(messages, "discovery") { $0.hasPrefix("homeassistant/") && $0.contains("sv_meter") }
        let availability = index(messages, "availability") { $0 == "lbs/device/sv_meter/availability" }
        let state = index(messages, "state") { $0 == "lbs/device/sv_meter" }
        let devices = index(messages, "bridge/devices") { $0 == "lbs/bridge/devices" }
        #expect(added < discovery)
        #expect(discovery < availability, "Home Assistant must know the entity before its availability")
        #expect(availability < state, "a consumer never sees values of a device it thinks offline")
        #expect(devices < state, "bridge/devices lists a device before its first state")
    }

    @Test func aReconnectSendsBridgeThenDiscoveryThenAvailabilityThenStateThenHomeViews() async {
        let transport = RecordingTransport()
        let controller = await Self.controller(transport)
        await controller.handle(.inventory(vendorID: "sv", devices: [Self.meter]))
        await controller.handle(.state(Self.meter.id, ["solar_power": .number(10), "temperature": .number(21)], observedAt: Date()))
        transport.clear()
        await controller.connected()
        // The home views follow once the retained energy/home of an earlier run was read back.
        _ = await transport.wait(for: "lbs/energy/home")
        let messages = transport.messages
        let online = index(messages, "bridge/state") { $0 == "lbs/bridge/state" }
        let info = index(messages, "bridge/info") { $0 == "lbs/bridge/info" }
        let devices = index(messages, "bridge/devices") { $0 == "lbs/bridge/devices" }
        let health = index(messages, "bridge/health") { $0 == "lbs/bridge/health" }
        let discovery = index(messages, "discovery") { $0.hasPrefix("homeassistant/") && $0.contains("sv_meter") }
        let availability = index(messages, "availability") { $0 == "lbs/device/sv_meter/availability" }
        let state = index(messages, "state") { $0 == "lbs/device/sv_meter" }
        let energy = index(messages, "energy/home") { $0 == "lbs/energy/home" }
        let room = index(messages, "environment/garage") { $0 == "lbs/environment/garage" }
        #expect(online < info && info < devices && devices < health && health < discovery)
        #expect(discovery < availability && availability < state)
        #expect(state < energy && state < room)
    }
}
