import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayModel
import Logging
import Testing
import VendorKit

/// What push vendors (Matter, Sense) report beyond states: one-off events and partial inventory.
@Suite struct PushVendorEventTests {
    static let button = Device(vendorID: "sv", vendorDeviceID: "button", name: "Hall button", type: .button, keys: ["battery"],
                               eventTypes: ["short_press", "long_press"])
    static let plug = Device(vendorID: "sv", vendorDeviceID: "plug", name: "Plug", type: .plug, keys: ["state", "power"])

    @GatewayActor static func controller(_ transport: RecordingTransport, maxDevices: Int? = nil) -> GatewayController {
        var config = GatewayConfig(mqtt: MQTTSettings(url: "mqtt://127.0.0.1"), vendors: [VendorSettings(type: "scripted", id: "sv")])
        if let maxDevices { config.vendors[0].maxDevices = maxDevices }
        config.homeAssistant.enabled = true
        config.homeAssistant.mode = .component
        return GatewayController(config: config, transport: transport, logger: Logger(label: "test"))
    }

    @Test func aButtonPressIsABridgeEventADeviceEventAndAHomeAssistantEventEntity() async throws {
        let transport = RecordingTransport()
        let controller = await Self.controller(transport)
        await controller.connected()
        await controller.handle(.inventory(vendorID: "sv", devices: [Self.button]))
        let discovery = try #require(transport.json("homeassistant/event/lbs_sv_button/event/config"))
        #expect(discovery["state_topic"] as? String == "lbs/device/sv_button/event")
        #expect(discovery["event_types"] as? [String] == ["short_press", "long_press"])
        #expect(discovery["device_class"] as? String == "button")

        await controller.handle(.deviceEvent(Self.button.id, type: "short_press", data: ["presses": .number(1)], at: Date()))
        let event = try #require(transport.json("lbs/device/sv_button/event"))
        #expect(event["event_type"] as? String == "short_press")
        #expect(event["presses"] as? Double == 1)
        #expect(transport.last("lbs/device/sv_button/event")?.retain == false, "a press is not a state: never retained")
        let bridge = try #require(transport.messages.last { $0.topic == "lbs/bridge/event" && $0.payload.contains("device_event") })
        #expect(bridge.payload.contains(#""event":"short_press""#))
        #expect(bridge.payload.contains(#""device":"sv_button""#))

        // An unknown device's event is dropped, not published.
        transport.clear()
        await controller.handle(.deviceEvent(DeviceID(vendorInstance: "sv", vendorDeviceID: "ghost"), type: "short_press", data: [:], at: Date()))
        #expect(transport.messages.isEmpty)
    }

    @Test func aPushVendorsHealthHasNoBreakerAndStillDrivesAvailability() async throws {
        let transport = RecordingTransport()
        let controller = await Self.controller(transport)
        await controller.connected()
        await controller.handle(.inventory(vendorID: "sv", devices: [Self.plug]))
        await controller.handle(.health(VendorHealth(vendorID: "sv", state: .ok, breaker: nil, lastSuccess: Date())))
        let ok = try #require(transport.json("lbs/bridge/vendors/sv"))
        #expect(ok["state"] as? String == "ok")
        #expect(ok["breaker"] is NSNull, "no breaker: null, not a made-up state")
        await controller.handle(.health(VendorHealth(
            vendorID: "sv", state: .down, breaker: nil, lastError: GatewayError(.authFailed, message: "bad password"), nextAttempt: Date() + 900
        )))
        #expect(transport.last("lbs/device/sv_plug/availability")?.payload.contains("offline") == true)
        let changed = try #require(transport.messages.last { $0.topic == "lbs/bridge/event" && $0.payload.contains("vendor_state_changed") })
        #expect(changed.payload.contains(#""breaker":null"#) && changed.payload.contains("auth_failed"))
    }

    @Test func aNodeAddedOrRemovedAloneLeavesTheOthersAlone() async throws {
        let transport = RecordingTransport()
        let controller = await Self.controller(transport)
        await controller.connected()
        await controller.handle(.inventory(vendorID: "sv", devices: [Self.button]))
        transport.clear()
        await controller.handle(.deviceAdded(Self.plug))
        #expect(await controller.deviceIDs == [Self.button.id, Self.plug.id].sorted())
        #expect(transport.messages.contains { $0.topic == "lbs/device/sv_plug/availability" })
        #expect(!transport.messages.contains { $0.topic == "lbs/device/sv_button" && $0.payload.isEmpty }, "the button is not cleared")
        let devices = try #require(transport.last("lbs/bridge/devices"))
        #expect(devices.payload.contains("sv_plug") && devices.payload.contains("sv_button"))

        transport.clear()
        await controller.handle(.deviceRemoved(Self.plug.id))
        #expect(await controller.deviceIDs == [Self.button.id])
        #expect(transport.last("lbs/device/sv_plug/availability")?.payload == "", "its retained topics are cleared")
        #expect(transport.messages.contains { $0.topic == "lbs/bridge/event" && $0.payload.contains("device_removed") })
    }

    @Test func partialAdditionsRespectMaxDevices() async throws {
        let transport = RecordingTransport()
        let controller = await Self.controller(transport, maxDevices: 1)
        await controller.handle(.inventory(vendorID: "sv", devices: [Self.button]))
        await controller.handle(.deviceAdded(Self.plug))
        #expect(await controller.deviceIDs == [Self.button.id])
        #expect(transport.messages.contains { $0.topic == "lbs/bridge/event" && $0.payload.contains("inventory_truncated") })
    }
}
