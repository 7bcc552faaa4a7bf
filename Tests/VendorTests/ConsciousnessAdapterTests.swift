import ConsciousnessSimulator
import Foundation
import GatewayModel
import GatewayTesting
import Resilience
import TestTraits
import Testing
import VendorConsciousness
import VendorKit
import VendorTesting

@Suite(.integration) struct ConsciousnessAdapterTests {
    @Test func loginAndInventoryMapAllSevenTypesAndTheHouse() async throws {
        let rig = try await Rig.start()
        defer { Task { await rig.stop() } }
        try await rig.vendor.poll()

        #expect(rig.simulator.counters.logins == 1)
        let inventory = try #require(rig.log.inventories.last)
        #expect(inventory.count == 8)
        let byID = Dictionary(uniqueKeysWithValues: inventory.map { ($0.vendorDeviceID, $0) })
        let expected: [String: (DeviceType, String?, [String])] = [
            "lights-kitchen": (.light, "Kitchen", ["state", "brightness", "power"]),
            "thermostat-main": (.thermostat, "Living Room", ["state", "temperature", "target_temperature", "hvac_mode", "humidity", "battery"]),
            "camera-front-door": (.camera, "Front Door", ["state", "recording", "motion_detection", "night_vision", "wifi_signal"]),
            "sensor-hallway-motion": (.motionSensor, "Hallway", ["state", "motion", "battery"]),
            "speaker-living-room": (.speaker, "Living Room", ["state", "volume", "playing", "wifi_signal"]),
            "lock-front-door": (.lock, "Front Door", ["state", "lock", "auto_lock", "battery"]),
            "garage-door-main": (.garageDoor, "Garage", ["state", "cover", "wifi_signal"]),
            "house": (.hub, nil, ["consciousness_status", "awareness_level", "emotion", "arousal", "valence"]),
        ]
        for (vendorDeviceID, (type, room, keys)) in expected {
            let device = try #require(byID[vendorDeviceID], "missing \(vendorDeviceID)")
            #expect(device.type == type, "\(vendorDeviceID)")
            #expect(device.room == room, "\(vendorDeviceID)")
            #expect(device.keys == keys, "\(vendorDeviceID)")
            #expect(device.manufacturer == "House Consciousness")
            #expect(device.keys.allSatisfy { StateKeys.spec($0) != nil }, "unregistered key on \(vendorDeviceID)")
        }
        #expect(byID["lights-kitchen"]?.model == "smart_light")
        #expect(byID["lights-kitchen"]?.id.rawValue == "consciousness_lights-kitchen")
        #expect(byID["house"]?.id.rawValue == "consciousness_house")

        // Every backend device carries the backend's own time as `reported_at`; the rest is compared below.
        #expect(rig.log.states[rig.id("lights-kitchen")]?["reported_at"]?.string?.hasSuffix("Z") == true)
        let states = rig.log.states.mapValues { $0.filter { $0.key != "reported_at" } }
        // Seeded `online`: reachable, not running. Only the light has a `power` property (true); the others are OFF.
        #expect(states[rig.id("lights-kitchen")] == ["state": .string("ON"), "brightness": .number(80), "power": .number(12.5)])
        #expect(states[rig.id("thermostat-main")] == [
            // The served shape: current_temp/target_temp 72 (°F by the heuristic) and mode "auto".
            "state": .string("OFF"), "temperature": .number(22.2), "target_temperature": .number(22.2), "hvac_mode": .string("auto"),
            "humidity": .number(45), "battery": .number(100),
        ])
        // The backend's extra fields, read-only: wifi_signal in dBm as served, the speaker's "None" track left out.
        #expect(states[rig.id("lock-front-door")] == ["state": .string("OFF"), "lock": .string("LOCKED"), "auto_lock": .bool(true), "battery": .number(78)])
        #expect(states[rig.id("garage-door-main")] == ["state": .string("OFF"), "cover": .string("CLOSED"), "wifi_signal": .number(-52)])
        #expect(states[rig.id("sensor-hallway-motion")] == ["state": .string("OFF"), "motion": .bool(false), "battery": .number(85)])
        #expect(states[rig.id("camera-front-door")] == [
            "state": .string("OFF"), "recording": .bool(true), "motion_detection": .bool(true), "night_vision": .string("on"),
            "wifi_signal": .number(-45),
        ])
        #expect(states[rig.id("speaker-living-room")] == ["state": .string("OFF"), "volume": .number(30), "playing": .bool(false), "wifi_signal": .number(-38)])
        #expect(states[rig.id("house")] == [
            "consciousness_status": .string("active"), "awareness_level": .number(85), "emotion": .string("calm"),
            "arousal": .number(0.3), "valence": .number(0.7),
        ])
        // last_seen (local time, no zone) is read as UTC and never lies in the future.
        let observed = try #require(rig.log.observedAt(rig.id("lights-kitchen")))
        #expect(observed <= Date())

        // A second poll with the same devices sends no new inventory and needs no new login.
        try await rig.vendor.poll()
        #expect(rig.log.inventories.count == 1)
        #expect(rig.simulator.counters.logins == 1)
        #expect(rig.log.health.last?.state == .ok)
    }

    @Test func commandRoundTripChangesTheSimulatorDevice() async throws {
        let rig = try await Rig.start()
        defer { Task { await rig.stop() } }

        let off = try await rig.vendor.executeCommand(rig.command("lights-kitchen", ["state": .string("OFF")]))
        #expect(off.confirmed["state"] == .string("OFF"))
        #expect(off.confirmed["brightness"] == .number(80))
        #expect(rig.simulator.counters.controlCalls(deviceID: "lights-kitchen", action: "turn_off") == 1)
        #expect(rig.simulator.devicesJSON().contains(#""id":"lights-kitchen","name":"Kitchen Smart Lights","type":"smart_light","status":"inactive""#))

        // TOGGLE uses the last known state.
        let toggled = try await rig.vendor.executeCommand(rig.command("lights-kitchen", ["state": .string("TOGGLE")]))
        #expect(toggled.confirmed["state"] == .string("ON"))
        #expect(rig.simulator.counters.controlCalls(deviceID: "lights-kitchen", action: "turn_on") == 1)

        let unknown = await gatewayError { _ = try await rig.vendor.executeCommand(rig.command("nope", ["state": .string("ON")])) }
        #expect(unknown?.code == .notFound)
    }

    @Test func unsupportedChangesAreRejectedWithoutReachingTheBackend() async throws {
        let rig = try await Rig.start()
        defer { Task { await rig.stop() } }

        let lock = await gatewayError { _ = try await rig.vendor.executeCommand(rig.command("lock-front-door", ["lock": .string("LOCK")])) }
        #expect(lock?.code == .vendorRejected)
        #expect(lock?.message.contains("cannot lock") == true)
        let dim = await gatewayError { _ = try await rig.vendor.executeCommand(rig.command("lights-kitchen", ["brightness": .number(10)])) }
        #expect(dim?.code == .vendorRejected)
        #expect(dim?.message.contains("brightness") == true)
        let word = await gatewayError { _ = try await rig.vendor.executeCommand(rig.command("lights-kitchen", ["state": .string("MAYBE")])) }
        #expect(word?.code == .invalidPayload)
        let empty = await gatewayError { _ = try await rig.vendor.executeCommand(rig.command("lights-kitchen", [:])) }
        #expect(empty?.code == .invalidPayload)
        #expect(rig.simulator.counters.totalControlCalls == 0)
        #expect(rig.simulator.counters.requests == 0)
    }

    @Test func batchWithAnUnknownIDGivesPerItemResults() async throws {
        let rig = try await Rig.start()
        defer { Task { await rig.stop() } }

        let results = await rig.vendor.executeBatch([
            rig.command("lights-kitchen", ["state": .string("OFF")], id: "a"),
            rig.command("nope", ["state": .string("ON")], id: "b"),
            rig.command("speaker-living-room", ["state": .bool(true)], id: "c"),
            rig.command("lights-kitchen", ["brightness": .number(5)], id: "d"),
        ])
        #expect(results.count == 4)
        #expect(try results["a"]?.get().confirmed == ["state": .string("OFF")])
        #expect(try results["c"]?.get().confirmed == ["state": .string("ON")])
        guard case .failure(let unknown)? = results["b"], case .failure(let unsupported)? = results["d"] else {
            Issue.record("expected per-item failures, got \(results)")
            return
        }
        #expect(unknown.code == .vendorRejected)
        #expect(unknown.message.contains("Device not found"))
        #expect(unsupported.code == .vendorRejected)
        #expect(rig.simulator.counters.controlCalls(deviceID: "lights-kitchen", action: "turn_off") == 1)
        #expect(rig.simulator.counters.controlCalls(deviceID: "speaker-living-room", action: "turn_on") == 1)
        #expect(rig.simulator.counters.requestsByRoute["POST /api/v1/devices/batch-control"] == 1)
        // The confirmed state is the item's outcome, which the gateway publishes; it is not sent a second time as an event.
        #expect(rig.log.states[rig.id("lights-kitchen")]?["state"] == nil)
    }

    @Test func refreshRelistsAndPublishesThatDevice() async throws {
        let rig = try await Rig.start()
        defer { Task { await rig.stop() } }
        try await rig.vendor.poll()
        _ = try await rig.vendor.executeCommand(rig.command("garage-door-main", ["state": .string("OFF")]))
        rig.log.clear()

        try await rig.vendor.refreshDevice(rig.id("garage-door-main"))
        let states = rig.log.states
        #expect(states.keys.map(\.rawValue) == ["consciousness_garage-door-main"])
        #expect(states[rig.id("garage-door-main")]?["state"] == .string("OFF"))

        try await rig.vendor.refreshDevice(rig.id("house"))
        #expect(rig.log.states[rig.id("house")]?["emotion"] == .string("calm"))

        let missing = await gatewayError { try await rig.vendor.refreshDevice(rig.id("gone")) }
        #expect(missing?.code == .unknownDevice)
    }

    @Test(arguments: [true, false])
    func expiredTokenCausesExactlyOneReloginAndTheCallSucceeds(serverSideExpiry: Bool) async throws {
        let rig = try await Rig.start()
        defer { Task { await rig.stop() } }
        try await rig.vendor.poll()
        #expect(rig.simulator.counters.logins == 1)

        if serverSideExpiry {
            rig.simulator.expireAllTokens()
        } else {
            rig.simulator.inject(.expiredToken, times: 1)
        }
        let outcome = try await rig.vendor.executeCommand(rig.command("lights-kitchen", ["state": .string("OFF")]))
        #expect(outcome.confirmed["state"] == .string("OFF"))
        #expect(rig.simulator.counters.logins == 2)
        #expect(rig.simulator.counters.controlCalls(deviceID: "lights-kitchen", action: "turn_off") == 1)
        // A renewed token is not an error worth reporting.
        #expect(rig.log.health.last?.state == .ok)
        #expect(rig.log.health.last?.lastError == nil)

        // A token refused twice in a row is auth_failed, after one re-login only.
        rig.simulator.inject(.expiredToken, times: 2)
        let twice = await gatewayError { try await rig.vendor.poll() }
        #expect(twice?.code == .authFailed)
        #expect(twice?.requiresReauthentication == false)
        #expect(rig.simulator.counters.logins == 3)
    }

    @Test func tokenIsRenewedBeforeItExpires() async throws {
        let rig = try await Rig.start(expiresIn: 100)
        defer { Task { await rig.stop() } }
        try await rig.vendor.poll()
        rig.clock.advance(by: .seconds(89))
        try await rig.vendor.poll()
        #expect(rig.simulator.counters.logins == 1)
        rig.clock.advance(by: .seconds(2))  // 91 % of the lifetime
        try await rig.vendor.poll()
        #expect(rig.simulator.counters.logins == 2)
        #expect(rig.simulator.counters.requestsByRoute["POST /api/v1/auth/login"] == 2)
    }

    @Test func wrongPasswordIsAuthFailedAndDoesNotTripTheBreaker() async throws {
        let rig = try await Rig.start(loginPassword: "definitely-wrong-password")
        defer { Task { await rig.stop() } }

        for _ in 0..<5 {
            let error = await gatewayError { try await rig.vendor.poll() }
            #expect(error?.code == .authFailed)
            #expect(error?.retryable == false)
            #expect(error?.message.contains("definitely-wrong-password") == false)
        }
        // The refusal is held off, so the four polls right after it log in no more.
        #expect(rig.simulator.counters.failedLogins == 1)
        #expect(rig.vendor.http.breaker.state == .closed)
        let health = try #require(rig.log.health.last)
        #expect(health.breaker == "closed")
        #expect(health.state == .down)
        #expect(health.nextAttempt != nil)
        #expect(health.lastError?.code == .authFailed)
        #expect(!"\(health)".contains("definitely-wrong-password"))
        #expect(!"\(rig.vendor)".contains("definitely-wrong-password"))
    }
}
