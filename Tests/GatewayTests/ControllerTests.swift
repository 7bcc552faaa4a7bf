import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayModel
import Logging
import TestTraits
import GatewayTesting
import Testing
import VendorDemo
import VendorKit

/// The controller with the demo vendor and a recording transport: fast checks of the topic
/// contract's logic. The same behaviours run against a real broker in `BrokerIntegrationTests`.
@Suite(.integration) struct ControllerTests {
    struct Harness {
        let transport = RecordingTransport()
        let controller: GatewayController
        let vendor: DemoVendor

        init(mode: HomeAssistantSettings.Mode = .device, extraDevices: Int = 0) async {
            var config = GatewayConfig(mqtt: MQTTSettings(url: "mqtt://127.0.0.1"), vendors: [VendorSettings(type: "demo", id: "demo")])
            config.homeAssistant.mode = mode
            config.homeAssistant.republishDelayMax = 0
            controller = await GatewayController(config: config, transport: transport, logger: Logger(label: "test"))
            let controller = self.controller
            vendor = DemoVendor(instanceID: "demo", options: DemoOptions(pollInterval: .seconds(3600), extraDevices: extraDevices),
                                sink: VendorEventSink { event in Task { await controller.handle(event) } })
            await controller.register(vendor)
            // Deliver the inventory and first states synchronously.
            await controller.handle(.inventory(vendorID: "demo", devices: vendor.devices))
            for device in vendor.devices { try? await vendor.refresh(device.id) }
            await controller.connected()
            // The sink hands each state over in a task of its own: they arrive in any order.
            for device in vendor.devices { _ = await transport.wait(for: "lbs/device/\(device.id.rawValue)") }
        }

        func send(_ topic: String, _ payload: String, retain: Bool = false, responseTopic: String? = nil, correlation: [UInt8]? = nil) async {
            await controller.handle(InboundMessage(topic: topic, payload: Array(payload.utf8), retain: retain,
                                                   responseTopic: responseTopic, correlationData: correlation))
        }
    }

    @Test func connectPublishesEverythingRetained() async throws {
        let h = await Harness()
        let t = h.transport
        #expect(t.subscriptions.contains("lbs/device/+/set"))
        #expect(t.last("lbs/bridge/state")?.payload == #"{"state":"online"}"#)
        #expect(t.last("lbs/bridge/state")?.retain == true && t.last("lbs/bridge/state")?.qos == 1)
        for id in ["demo_light", "demo_thermostat", "demo_lock", "demo_plug", "demo_energy", "demo_air"] {
            #expect(t.last("lbs/device/\(id)")?.retain == true, "state of \(id)")
            #expect(t.last("lbs/device/\(id)/availability")?.payload == #"{"state":"online"}"#)
            #expect(t.last("homeassistant/device/lbs_\(id)/config") != nil, "discovery of \(id)")
        }
        let lock = try #require(t.json("lbs/device/demo_lock"))
        #expect(lock["lock"] as? String == "LOCKED")
        #expect((lock["last_seen"] as? String)?.hasSuffix("Z") == true)
        let devicesPayload = try #require(t.last("lbs/bridge/devices")).payload
        let devices = try #require(try JSONSerialization.jsonObject(with: Data(devicesPayload.utf8)) as? [[String: Any]])
        #expect(devices.count == 6)
        let info = try #require(t.json("lbs/bridge/info"))
        #expect(info["base_topic"] as? String == "lbs")
    }

    /// With many devices, `bridge/devices` and discovery are built on every core at connect: the published list is
    /// still the canonical rendering (sorted keys, re-rendering gives the same bytes), in device-id order, and
    /// every device's discovery went out before its state.
    @Test func manyDevicesAreAnnouncedInOrderWhenBuiltOnEveryCore() async throws {
        let h = await Harness(extraDevices: 500)
        let t = h.transport
        let payload = try #require(t.last("lbs/bridge/devices")).payload
        let parsed = try JSONValue.parse(Array(payload.utf8)).get()
        #expect(parsed.render() == payload)
        guard case .array(let items) = parsed else { Issue.record("bridge/devices is not a list"); return }
        let ids = items.compactMap { $0["id"]?.string }
        #expect(ids.count == h.vendor.devices.count && ids.count > 500)
        #expect(ids == ids.sorted())
        // The demo's first states reach the controller on tasks of their own: wait for the checked ones to be out.
        for id in ids.prefix(5) + ids.suffix(5) { _ = await t.wait(for: "lbs/device/\(id)", timeout: .seconds(10)) }
        let topics = t.messages.map(\.topic)
        for id in ids.prefix(5) + ids.suffix(5) {
            let discovery = try #require(topics.firstIndex(of: "homeassistant/device/lbs_\(id)/config"), "discovery of \(id)")
            let state = try #require(topics.firstIndex(of: "lbs/device/\(id)"), "state of \(id)")
            #expect(discovery < state)
        }
    }

    @Test func setChangesStateAndAnswersTheResponseTopic() async throws {
        let h = await Harness()
        await h.send("lbs/device/demo_light/set", #"{"state":"ON","brightness":40}"#, responseTopic: "replies/me", correlation: [1, 2, 3])
        let state = await h.transport.wait(for: "lbs/device/demo_light") { $0.payload.contains(#""brightness":40"#) && $0.payload.contains(#""state":"ON""#) }
        #expect(state != nil)
        let reply = try #require(await h.transport.wait(for: "replies/me"))
        #expect(reply.payload.contains(#""status":"ok""#))
        #expect(reply.correlationData == [1, 2, 3])
    }

    @Test func retainedSetNeverRunsAndIsReported() async throws {
        let h = await Harness()
        h.transport.clear()
        await h.send("lbs/device/demo_lock/set", "UNLOCK", retain: true)
        let event = try #require(await h.transport.wait(for: "lbs/bridge/event"))
        #expect(event.payload.contains("command_failed") && event.payload.contains("retained_command"))
        // The fix names the MQTT tool that clears the retained message.
        #expect(event.payload.contains("mosquitto_pub -r -n -t"))
        try await quietPeriod( .milliseconds(50))
        #expect(h.transport.last("lbs/device/demo_lock") == nil)
        #expect(await h.controller.state(of: DeviceID(vendorInstance: "demo", vendorDeviceID: "lock"))?["lock"] == .string("LOCKED"))
    }

    @Test func badInputBecomesCommandFailedWithErrorResponse() async throws {
        let h = await Harness()
        let cases: [(String, String, String)] = [
            ("lbs/device/demo_light/set", "{oops", "invalid_json"),
            ("lbs/device/nope/set", "ON", "unknown_device"),
            ("lbs/device/NOT A SLUG/set", "ON", "unknown_device"),
            ("lbs/device/demo_light/set/brightness", "400", "out_of_range"),
            ("lbs/device/demo_light/set", #"{"flavour":"mint"}"#, "unknown_key"),
            ("lbs/device/demo_light/set", String(repeating: "x", count: 70_000), "payload_too_large"),
        ]
        for (topic, payload, code) in cases {
            h.transport.clear()
            await h.send(topic, payload, responseTopic: "replies/\(code)")
            let event = try #require(await h.transport.wait(for: "lbs/bridge/event"), "no event for \(code)")
            #expect(event.payload.contains(code), "event for \(code): \(event.payload)")
            let reply = try #require(await h.transport.wait(for: "replies/\(code)"))
            #expect(reply.payload.contains(#""status":"error""#) && reply.payload.contains(code))
        }
    }

    @Test func bridgeRequestsEchoTheTransaction() async throws {
        let h = await Harness()
        await h.send("lbs/bridge/request/health", #"{"transaction":"t-1"}"#)
        let health = try #require(await h.transport.wait(for: "lbs/bridge/response/health"))
        #expect(health.payload.contains(#""transaction":"t-1""#) && health.payload.contains(#""status":"ok""#))
        await h.send("lbs/bridge/request/device/refresh", #"{"id":"demo_air","transaction":7}"#)
        let refresh = try #require(await h.transport.wait(for: "lbs/bridge/response/device/refresh"))
        #expect(refresh.payload.contains(#""transaction":7"#))
        await h.send("lbs/bridge/request/teleport", "{}")
        let unknown = try #require(await h.transport.wait(for: "lbs/bridge/response/teleport"))
        #expect(unknown.payload.contains(#""status":"error""#) && unknown.payload.contains("Unknown bridge request"), "\(unknown.payload)")
        // Without storage the cache's request says what to configure, not "unknown request".
        await h.send("lbs/bridge/request/history", #"{"device":"demo_plug","key":"power"}"#)
        let history = try #require(await h.transport.wait(for: "lbs/bridge/response/history"))
        #expect(history.payload.contains("History needs the SQLite cache"), "\(history.payload)")
    }

    @Test func homeEnergyAndRoomEnvironmentAreAggregated() async throws {
        let h = await Harness()
        let energy = try #require(await h.transport.wait(for: "lbs/energy/home"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(energy.payload.utf8)) as? [String: Any])
        let solar = try #require(object["solar_power"] as? Double), grid = try #require(object["grid_power"] as? Double)
        let battery = try #require(object["battery_power"] as? Double), home = try #require(object["home_power"] as? Double)
        #expect(abs(solar + grid + battery - home) < 1.5)
        // The view is republished as each device of the room reports; the thermostat may come first.
        let room = await h.transport.wait(for: "lbs/environment/living_room") { $0.payload.contains("co2") }
        #expect(room?.payload.contains("temperature") == true)
    }

    @Test func removedDevicesLeaveNoGhosts() async throws {
        let h = await Harness()
        let remaining = h.vendor.devices.filter { $0.vendorDeviceID != "plug" }
        await h.controller.handle(.inventory(vendorID: "demo", devices: remaining))
        #expect(h.transport.last("homeassistant/device/lbs_demo_plug/config")?.payload == "")
        #expect(h.transport.last("lbs/device/demo_plug")?.payload == "")
        #expect(h.transport.last("lbs/device/demo_plug/availability")?.payload == "")
        #expect(h.transport.messages.contains { $0.topic == "lbs/bridge/event" && $0.payload.contains("device_removed") })
    }

    @Test func homeAssistantBirthRepublishesStates() async throws {
        let h = await Harness()
        h.transport.clear()
        await h.send("homeassistant/status", "online")
        #expect(await h.transport.wait(for: "lbs/device/demo_light") != nil)
        #expect(await h.transport.wait(for: "lbs/device/demo_light/availability") != nil)
    }
}
