import ConsciousnessSimulator
import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayModel
import GatewayTesting
import MQTT
import TestTraits
import Testing
@testable import VendorConsciousness

/// What the real consciousness backend showed: devices whose backend `last_seen` never moves got no heartbeat
/// (229 s of silence across 20 polls), and `status: online` was read as ON.
@Suite(.integration, .serialized, .timeLimit(.minutes(2))) struct ConsciousnessBackendTests {
    static func wire(_ json: String) throws -> WireDevice {
        try JSONDecoder().decode(WireDevice.self, from: Data(json.utf8))
    }

    @Test func onlineIsReachableNotOnAndTheBackendsTimeIsReportedAt() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let off = ConsciousnessMapping.map(try Self.wire(#"{"id":"l","type":"smart_light","status":"online","properties":{"power":false},"last_seen":"2026-11-26T10:00:00.123456"}"#),
                                           vendorID: "house", now: now)
        #expect(off.values["state"] == .string("OFF"))
        #expect(off.observedAt == now, "the reading is observed at the poll")
        #expect(off.values["reported_at"] == .string("2026-11-26T10:00:00.123Z"))
        let active = ConsciousnessMapping.map(try Self.wire(#"{"id":"l","type":"smart_light","status":"active","properties":{"power":false}}"#), vendorID: "house", now: now)
        #expect(active.values["state"] == .string("ON"))
        #expect(active.values["reported_at"] == nil)
        let inactive = ConsciousnessMapping.map(try Self.wire(#"{"id":"l","type":"smart_light","status":"inactive","properties":{"power":true}}"#), vendorID: "house", now: now)
        #expect(inactive.values["state"] == .string("OFF"))
        // Without an on/off property only `active` is running (what the backend's dashboard counts).
        let camera = ConsciousnessMapping.map(try Self.wire(#"{"id":"c","type":"security_camera","status":"online","properties":{"recording":true}}"#), vendorID: "house", now: now)
        #expect(camera.values["state"] == .string("OFF"))
        #expect(camera.online)
        let poweredOn = ConsciousnessMapping.map(try Self.wire(#"{"id":"l","type":"smart_light","status":"online","properties":{"power":true}}"#), vendorID: "house", now: now)
        #expect(poweredOn.values["state"] == .string("ON"))
        // `offline` is availability, not state.
        let offline = ConsciousnessMapping.map(try Self.wire(#"{"id":"l","type":"smart_light","status":"offline","properties":{"power":true}}"#), vendorID: "house", now: now)
        #expect(offline.values["state"] == .string("ON"))
        #expect(!offline.online)
    }

    @Test func extraFieldsAreMappedAsServed() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let camera = ConsciousnessMapping.map(try Self.wire(#"{"id":"c","type":"security_camera","status":"online","properties":{"recording":false,"motion_detection":true,"night_vision":"auto","wifi_signal":-61}}"#), vendorID: "house", now: now)
        #expect(camera.values["recording"] == .bool(false) && camera.values["motion_detection"] == .bool(true))
        #expect(camera.values["night_vision"] == .string("auto"))
        #expect(camera.values["wifi_signal"] == .number(-61))
        let speaker = ConsciousnessMapping.map(try Self.wire(#"{"id":"s","type":"smart_speaker","status":"active","properties":{"volume":140,"playing":true,"current_track":"Blue in Green","wifi_signal":70}}"#), vendorID: "house", now: now)
        #expect(speaker.values["volume"] == .number(100))
        #expect(speaker.values["playing"] == .bool(true) && speaker.values["track"] == .string("Blue in Green"))
        #expect(speaker.values["wifi_signal"] == nil, "70 is no dBm: left out, not mislabelled")
        #expect(speaker.device.writableKeys == ["state"], "the extras are read-only")
        let quiet = ConsciousnessMapping.map(try Self.wire(#"{"id":"s","type":"smart_speaker","status":"online","properties":{"current_track":"None"}}"#), vendorID: "house", now: now)
        #expect(quiet.values["track"] == nil && !quiet.device.keys.contains("track"))
    }

    /// The consciousness simulator (password `backend-secret`) and a gateway polling it as vendor `house`.
    static func houseGateway(pollInterval: Double, timeout: Double, mqtt: String = "") async throws -> (ConsciousnessSimulator, GatewayHarness) {
        let simulator = ConsciousnessSimulator(configuration: .init(password: "backend-secret"))
        _ = try await simulator.start()
        let directory = try TemporaryDirectory()
        try "backend-secret\n".write(toFile: directory.file("backend-password"), atomically: true, encoding: .utf8)
        let vendors = """
              - {type: consciousness, id: house, url: "\(await simulator.baseURL)", username: admin, password_file: backend-password, poll_interval: \(pollInterval), timeout: \(timeout)}
            """
        return (simulator, try await GatewayHarness.start(directory: directory, mqtt: mqtt, vendors: vendors))
    }

    /// The fields the real backend serves for its camera, speaker, lock and radios reach MQTT, read-only.
    @Test func extraFieldsArePublishedReadOnly() async throws {
        let (simulator, gateway) = try await Self.houseGateway(pollInterval: 30, timeout: 2)
        defer { Task { await gateway.stop(); await simulator.stop() } }
        let client = try await gateway.observer("lbs/#", "replies/#")
        let camera = try await client.waitForMessage(topic: "lbs/device/house_camera-front-door", timeout: .seconds(10)).json ?? [:]
        #expect(camera["recording"] as? Bool == true && camera["motion_detection"] as? Bool == true)
        #expect(camera["night_vision"] as? String == "on" && camera["wifi_signal"] as? Double == -45)
        let speaker = try await client.waitForMessage(topic: "lbs/device/house_speaker-living-room", timeout: .seconds(10)).json ?? [:]
        #expect(speaker["volume"] as? Double == 30 && speaker["playing"] as? Bool == false && speaker["track"] == nil)
        let lock = try await client.waitForMessage(topic: "lbs/device/house_lock-front-door", timeout: .seconds(10)).json ?? [:]
        #expect(lock["auto_lock"] as? Bool == true)
        let garage = try await client.waitForMessage(topic: "lbs/device/house_garage-door-main", timeout: .seconds(10)).json ?? [:]
        #expect(garage["wifi_signal"] as? Double == -52)

        let devices = try await client.waitForMessage(topic: "lbs/bridge/devices", timeout: .seconds(10)) { $0.text.contains("wifi_signal") }
        let list = try #require((try? JSONSerialization.jsonObject(with: Data(devices.payload))) as? [[String: Any]])
        let speakerEntry = try #require(list.first { $0["id"] as? String == "house_speaker-living-room" })
        let volume = try #require((speakerEntry["capabilities"] as? [[String: Any]])?.first { $0["key"] as? String == "volume" })
        #expect(volume["writable"] as? Bool == false && volume["unit"] as? String == "%")
        try await client.publish("lbs/device/house_speaker-living-room/set/volume", "50", responseTopic: "replies/volume")
        let refused = try await client.waitForMessage(topic: "replies/volume", timeout: .seconds(5))
        #expect(refused.text.contains("read_only_key"), "\(refused.text)")
        #expect(simulator.counters.totalControlCalls == 0)
        await client.shutdown()
    }

    /// Against a backend that behaves like the real one (turn_on/turn_off set `status`, never `power`): the seeded
    /// devices are OFF except the light whose `power` is true, and switching follows the backend's status.
    @Test func stateFollowsWhatTheBackendSwitchedNotItsReachability() async throws {
        let (simulator, gateway) = try await Self.houseGateway(pollInterval: 0.3, timeout: 2)
        defer { Task { await gateway.stop(); await simulator.stop() } }
        let client = try await gateway.observer("lbs/device/#", "replies/#")
        let seeded = ["thermostat-main", "camera-front-door", "sensor-hallway-motion", "speaker-living-room", "lock-front-door", "garage-door-main"]
        try await waitUntil("every seeded device's state", timeout: .seconds(10)) {
            (seeded + ["lights-kitchen"]).allSatisfy { client.messages(on: "lbs/device/house_\($0)").last?.json?["state"] != nil }
        }
        for id in seeded {
            #expect(client.messages(on: "lbs/device/house_\(id)").last?.json?["state"] as? String == "OFF", "\(id) is online, not running")
        }
        #expect(client.messages(on: "lbs/device/house_lights-kitchen").last?.json?["state"] as? String == "ON", "power: true")

        // OFF although the backend's `power` property still says true: its status is `inactive`.
        try await client.publish("lbs/device/house_lights-kitchen/set", "OFF", responseTopic: "replies/off")
        let off = try await client.waitForMessage(topic: "replies/off", timeout: .seconds(10))
        #expect(off.text.contains(#""status":"ok""#), "\(off.text)")
        try await client.publish("lbs/device/house_camera-front-door/set", "ON", responseTopic: "replies/on")
        let on = try await client.waitForMessage(topic: "replies/on", timeout: .seconds(10))
        #expect(on.text.contains(#""status":"ok""#), "\(on.text)")
        // Several polls later the published states still say what was switched.
        try await quietPeriod( .seconds(1))
        #expect(client.messages(on: "lbs/device/house_lights-kitchen").last?.json?["state"] as? String == "OFF")
        #expect(client.messages(on: "lbs/device/house_camera-front-door").last?.json?["state"] as? String == "ON")
        await client.shutdown()
    }

    @Test func anUnchangedDeviceStillGetsItsHeartbeat() async throws {
        let (simulator, gateway) = try await Self.houseGateway(pollInterval: 0.3, timeout: 1, mqtt: "state_heartbeat: 1")
        defer { Task { await gateway.stop(); await simulator.stop() } }
        let client = try await gateway.observer("lbs/device/house_lights-kitchen")
        try await waitUntil("three heartbeats of an unchanged device", timeout: .seconds(15)) {
            client.messages(on: "lbs/device/house_lights-kitchen").count >= 3
        }
        let seen = client.messages(on: "lbs/device/house_lights-kitchen").compactMap { $0.json?["last_seen"] as? String }
        #expect(Set(seen).count >= 3, "last_seen must move with the polls: \(seen)")
        await client.shutdown()
    }
}
