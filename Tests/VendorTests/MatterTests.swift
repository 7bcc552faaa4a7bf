import Foundation
import GatewayModel
import GatewayTesting
import Resilience
import TestTraits
import Testing
import VendorKit
@testable import VendorMatter
import VendorSimulators
import VendorTesting

/// `type: matter` against a simulator of python-matter-server's WebSocket API serving the recorded node dumps:
/// the full sync, commands that come back as attribute updates, nodes joining and leaving, a button, errors,
/// and a server that shuts down and comes back.
@Suite(.integration, .serialized) struct MatterTests {
    static func dumps() throws -> [Data] {
        let folder = Fixtures.path("matter", "nodes")
        return try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".json") }.sorted()
            .map { try Data(contentsOf: URL(fileURLWithPath: folder + "/" + $0)) }
    }

    func start(_ simulator: MatterSimulator, timeout: Duration = .seconds(5)) async throws -> (MatterVendor, EventLog, Task<Void, any Error>) {
        try await simulator.start()
        let log = EventLog()
        var options = MatterOptions(url: await simulator.url, requestTimeout: timeout)
        options.reconnect = ReconnectingStream.Policy(minDelay: .milliseconds(100), maxDelay: .milliseconds(300), downAfter: 1)
        let vendor = MatterVendor(instanceID: "matter", options: options, sink: log.sink, context: VendorContext())
        let task = Task { try await vendor.run() }
        return (vendor, log, task)
    }

    static func id(_ raw: String) -> DeviceID { DeviceID(vendorInstance: "matter", vendorDeviceID: raw) }

    static func command(_ device: String, _ changes: [String: StateValue], seconds: Double = 10) -> DeviceCommand {
        DeviceCommand(id: UUID().uuidString, device: id(device), vendorID: "matter", vendorDeviceID: device, changes: changes,
                      issuedAt: Date(), expiresAt: Date().addingTimeInterval(seconds))
    }

    @Test func everyNodeIsSyncedAndACommandComesBackAsTheNodesReport() async throws {
        let simulator = try MatterSimulator(nodes: try Self.dumps())
        let (vendor, log, task) = try await start(simulator)
        defer { task.cancel(); Task { await simulator.stop() } }
        try await waitUntil("synced") { log.inventories.count == 1 && log.health.last?.state == .ok }
        let devices = try #require(log.inventories.first)
        #expect(devices.count == 17, "16 nodes and the bridge's bridged device")
        #expect(log.states[Self.id("20")] == ["lock": .string("LOCKED"), "battery": .number(40)])
        #expect(log.availability[Self.id("20")] == true && log.availability[Self.id("1_42")] == false)

        let outcome = try await vendor.execute(Self.command("20", ["lock": .string("UNLOCK")]))
        #expect(outcome.confirmed.isEmpty, "nothing optimistic: the node reports the change")
        #expect(simulator.commands.last == "device_command 20/1/257 UnlockDoor")
        try await waitUntil("the lock reported UNLOCKED") { log.states[Self.id("20")]?["lock"] == .string("UNLOCKED") }

        _ = try await vendor.execute(Self.command("5", ["brightness": .number(100), "color_temp_kelvin": .number(2700)]))
        try await waitUntil("the light reported") { log.states[Self.id("5")]?["brightness"] == .number(100) }
        #expect(log.states[Self.id("5")]?["color_temp_kelvin"] == .number(2703), "370 mireds back from the node: 10⁶/370 = 2703 K")
        _ = try await vendor.execute(Self.command("12", ["target_temperature": .number(21)]))
        try await waitUntil("the thermostat reported") { log.states[Self.id("12")]?["target_temperature"] == .number(21) }
        #expect(simulator.commands.last == "write_attribute 12/1/513/18 2100")
        _ = try await vendor.execute(Self.command("1_42", ["state": .string("ON")]))
        #expect(simulator.commands.last == "device_command 1/40/6 On", "a bridged device's command goes to its endpoint on the bridge node")
    }

    /// The recorded EVSE through the server: a device from the first sync, charging disabled and enabled again with
    /// Energy EVSE's Disable and EnableCharging (timed, as the SDK wants them), the new SupplyState and State coming
    /// back as the node's reports.
    @Test func anEVSEIsADeviceAndItsChargingIsSwitchedByTheEVSECommands() async throws {
        let all = try Self.dumps()
        let evse = try #require(all.first { String(decoding: $0, as: UTF8.self).contains("\"node_id\": 23,") })
        let simulator = try MatterSimulator(nodes: [evse])
        let (vendor, log, task) = try await start(simulator)
        defer { task.cancel(); Task { await simulator.stop() } }
        try await waitUntil("synced") { log.inventories.count == 1 && log.health.last?.state == .ok }
        let device = try #require(log.inventories.first?.first)
        #expect(device.id == Self.id("23") && device.type == .evCharger && device.name == "evse")
        #expect(log.states[Self.id("23")] == ["state": .string("ON"), "charging_state": .string("charging"), "supply_state": .string("charging_enabled"),
                                              "charging_current": .number(30)])
        #expect(log.availability[Self.id("23")] == true)

        let off = try await vendor.execute(Self.command("23", ["state": .string("OFF")]))
        #expect(off.confirmed.isEmpty, "nothing optimistic: the node reports the change")
        #expect(simulator.commands.last == "device_command 23/1/153 Disable")
        try await waitUntil("charging disabled") {
            log.states[Self.id("23")]?["state"] == .string("OFF") && log.states[Self.id("23")]?["supply_state"] == .string("disabled")
                && log.states[Self.id("23")]?["charging_state"] == .string("plugged_in_demand")
        }
        _ = try await vendor.execute(Self.command("23", ["state": .string("ON")]))
        #expect(simulator.commands.last == "device_command 23/1/153 EnableCharging")
        try await waitUntil("charging again") {
            log.states[Self.id("23")]?["state"] == .string("ON") && log.states[Self.id("23")]?["charging_state"] == .string("charging")
        }
    }

    @Test func nodesJoinLeaveGoOfflineAndAButtonIsAnEvent() async throws {
        let simulator = try MatterSimulator(nodes: try Self.dumps().prefix(3).map { $0 })
        let (_, log, task) = try await start(simulator)
        defer { task.cancel(); Task { await simulator.stop() } }
        try await waitUntil("synced") { log.inventories.count == 1 }
        let all = try Self.dumps()
        let fan = try #require(all.first { String(decoding: $0, as: UTF8.self).contains("\"node_id\": 99") })
        try simulator.add(fan)
        try await waitUntil("the fan joined") { log.added.contains { $0.id == Self.id("99") } && log.states[Self.id("99")]?["fan_mode"] != nil }
        simulator.setAvailable(node: 99, false)
        try await waitUntil("the fan is offline") { log.availability[Self.id("99")] == false }
        // A report from a node marked unavailable is kept, not published (a state would say it is alive)…
        simulator.report(node: 99, path: "1/514/0", json: "3")
        try await quietPeriod( .milliseconds(200))
        #expect(log.states[Self.id("99")]?["fan_mode"] == .string("low"))
        // …until the node is back: then its whole state goes out.
        simulator.setAvailable(node: 99, true)
        try await waitUntil("the fan is back, high") { log.states[Self.id("99")]?["fan_mode"] == .string("high") && log.availability[Self.id("99")] == true }
        simulator.remove(node: 99)
        try await waitUntil("the fan left") { log.removed.contains(Self.id("99")) }
        // A dimmable light (node 13) has a Generic Switch on endpoint 0.
        let light = try #require(all.first { String(decoding: $0, as: UTF8.self).contains("\"node_id\": 13") })
        try simulator.add(light)
        try await waitUntil("the light joined") { log.added.contains { $0.id == Self.id("13") } }
        simulator.switchEvent(node: 13, endpoint: 0, event: 1, data: #"{"newPosition":1}"#)
        try await waitUntil("a press") { log.deviceEvents.contains { $0.id == Self.id("13") && $0.type == "initial_press" } }
        #expect(log.deviceEvents.last?.data["new_position"] == .number(1))
    }

    @Test func aShutdownTakesEverythingOfflineAndTheReconnectResyncs() async throws {
        let simulator = try MatterSimulator(nodes: try Self.dumps())
        let (_, log, task) = try await start(simulator)
        defer { task.cancel(); Task { await simulator.stop() } }
        try await waitUntil("synced") { log.inventories.count == 1 }
        simulator.shutdown()
        try await waitUntil("down and offline") {
            log.health.last?.state == .down && log.availability[Self.id("20")] == false
        }
        try await waitUntil("reconnected and resynced", timeout: .seconds(10)) {
            simulator.connections == 2 && log.inventories.count == 2 && log.availability[Self.id("20")] == true
        }
        #expect(log.health.last?.state == .ok)
    }

    @Test func errorsAreInTheTaxonomyAndAnUnansweredCommandIsOfUnknownOutcome() async throws {
        let simulator = try MatterSimulator(nodes: try Self.dumps())
        let (vendor, log, task) = try await start(simulator, timeout: .seconds(1))
        defer { task.cancel(); Task { await simulator.stop() } }
        try await waitUntil("synced") { log.inventories.count == 1 }
        simulator.setAvailable(node: 61, false)
        try await waitUntil("the plug is offline") { log.availability[Self.id("61")] == false }
        let offline = await gatewayError { _ = try await vendor.execute(Self.command("61", ["state": .string("ON")])) }
        #expect(offline?.code == .vendorUnavailable && offline?.countsAgainstVendor == false)
        // The shutter's cluster has no such command: the server's error 0 is a refusal.
        let refused = await gatewayError { _ = try await vendor.execute(Self.command("148", ["state": .string("ON")])) }
        #expect(refused?.code == .vendorRejected)
        simulator.leaveCommandsUnanswered()
        let silent = await gatewayError { _ = try await vendor.execute(Self.command("148", ["position": .number(50)])) }
        #expect(silent?.code == .vendorTimeout && silent?.outcomeUnknown == true)
        // The outcome is settled by reading the node back, never by sending again.
        #expect(try await vendor.readState(Self.id("148"))["position"] == .number(100))
        #expect(simulator.commands.filter { $0.contains("GoToLiftPercentage") }.count == 1)
    }

    @Test func aServerOfAnotherSchemaIsAClearError() async throws {
        let simulator = try MatterSimulator(nodes: [])
        simulator.setSchema(version: 8, minimum: 6)
        let (_, log, task) = try await start(simulator)
        defer { task.cancel(); Task { await simulator.stop() } }
        try await waitUntil("down") { log.health.last?.state == .down }
        let message = log.health.last?.lastError?.message ?? ""
        #expect(message.contains("schema 8") && message.contains("schema 11"), "\(message)")
        #expect(log.inventories.isEmpty)
    }

    @Test func theEntryIsCheckedWithKeyPaths() {
        func parse(_ pairs: [(String, String)], environment: [String: String] = [:]) -> (MatterOptions?, [String]) {
            var reader = ConfigReader()
            let settings = VendorSettings(type: "matter", id: "matter", options: .mapping(pairs.map { (key: $0.0, value: ConfigNode.scalar($0.1, line: 1)) }))
            let options = MatterVendorFactory.parse(settings, reader: &reader, environment: environment)
            return (options, reader.problems.map(\.path))
        }
        let plain = parse([])
        #expect(plain.1.isEmpty && plain.0?.url == "ws://localhost:5580/ws" && plain.0?.pinCode == nil)
        #expect(parse([("url", "http://127.0.0.1:5580/ws")]).1 == ["vendors[0].url"])
        #expect(parse([("urll", "ws://x")]).1 == ["vendors[0].urll"])
        #expect(parse([], environment: ["LBS_MATTER_PIN_CODE": "12ab"]).1 == ["vendors[0].pin_code_file"])
        #expect(parse([("timeout", "5")], environment: ["LBS_MATTER_PIN_CODE": "123456"]).0?.pinCode?.reveal() == "123456")
    }
}
