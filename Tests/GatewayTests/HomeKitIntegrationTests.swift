import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayTesting
import MQTT
import TestTraits
import Testing

/// `type: homekit` end to end against a real HAP accessory (HAP-python serving recorded devices), a real broker and
/// the gateway's services: pair once with the setup code, pair-verify on every connection, events to MQTT,
/// `/set` to `PUT /characteristics`, a restart that does not pair again, a pairing removed on the accessory.
@Suite(.integration, .serialized, .timeLimit(.minutes(3)), .enabled(if: HAPPeer.enabled, "set LBS_HAP_PYTHON (deploy/homekit/peer-setup.sh; .ci/run does)"))
struct HomeKitIntegrationTests {
    static func vendors(_ peer: HAPPeer, name: String, codeFile: String?) -> String {
        """
          - type: homekit
            id: hk
            poll_interval: 1
            accessories:
              - {name: \(name), host: 127.0.0.1, port: \(peer.port)\(codeFile.map { ", setup_code_file: \($0)" } ?? "")}
        """
    }

    static func writeCode(_ directory: TemporaryDirectory, _ code: String) throws -> String {
        let file = directory.file("\(UUID().uuidString)-code")
        _ = FileManager.default.createFile(atPath: file, contents: Data((code + "\n").utf8), attributes: [.posixPermissions: 0o600])
        return file
    }

    @Test func pairsOnceThenEventsAndCommandsFlowAndARestartDoesNotPairAgain() async throws {
        let directory = try TemporaryDirectory()
        let peer = try await HAPPeer.start(fixture: "ecobee3.json", stateDirectory: directory.file("peer"))
        defer { Task { await peer.stop() } }
        let code = try Self.writeCode(directory, peer.setupCode)
        var gateway = try await GatewayHarness.start(directory: directory, vendors: Self.vendors(peer, name: "thermostat", codeFile: code), storage: true)
        let client = try await gateway.observer("lbs/device/#", "lbs/bridge/vendors/hk", "homeassistant/device/#", "replies/#")
        // The recorded values arrive: the thermostat and its room sensors (behind it).
        let thermostat = try await client.waitForMessage(topic: "lbs/device/hk_thermostat", timeout: .seconds(30)) { $0.json?["temperature"] as? Double == 21.8 }
        #expect(thermostat.json?["hvac_mode"] as? String == "heat" && thermostat.json?["target_temperature"] as? Double == 22.2, "\(thermostat.text)")
        let kitchen = try await client.waitForMessage(topic: "lbs/device/hk_thermostat_2", timeout: .seconds(10))
        #expect(kitchen.json?["temperature"] as? Double == 21.5, "\(kitchen.text)")
        _ = try await client.waitForMessage(topic: "lbs/device/hk_thermostat/availability", timeout: .seconds(10)) { $0.json?["state"] as? String == "online" }
        let discovery = try await client.waitForMessage(topic: "homeassistant/device/lbs_hk_thermostat_2/config", timeout: .seconds(10))
        #expect((discovery.json?["device"] as? [String: Any])?["via_device"] as? String == "lbs_hk_thermostat")
        let pairings = try await peer.pairings()
        #expect(pairings.count == 1 && pairings.first?["admin"] as? Bool == true, "\(pairings)")

        // A change on the thermostat (an event, no polling: `ev` on Current Temperature) reaches MQTT.
        try await peer.set(aid: 1, iid: 19, value: 19.5)
        _ = try await client.waitForMessage(topic: "lbs/device/hk_thermostat", timeout: .seconds(5)) { $0.json?["temperature"] as? Double == 19.5 }
        // A room sensor's motion.
        try await peer.set(aid: 2, iid: 2060, value: true)
        _ = try await client.waitForMessage(topic: "lbs/device/hk_thermostat_2", timeout: .seconds(5)) { $0.json?["motion"] as? Bool == true }

        // `/set` → one PUT /characteristics; the accessory does not echo a write to its writer, so the written
        // value is the confirmation.
        try await client.publish("lbs/device/hk_thermostat/set", #"{"target_temperature":23.5,"hvac_mode":"cool"}"#, qos: .atLeastOnce, responseTopic: "replies/set")
        let reply = try await client.waitForMessage(topic: "replies/set", timeout: .seconds(10))
        #expect(reply.json?["status"] as? String == "ok", "\(reply.text)")
        _ = try await client.waitForMessage(topic: "lbs/device/hk_thermostat", timeout: .seconds(5)) {
            $0.json?["target_temperature"] as? Double == 23.5 && $0.json?["hvac_mode"] as? String == "cool"
        }
        let writes = try await peer.writes()
        #expect(writes.contains { $0["aid"] as? Int == 1 && $0["iid"] as? Int == 20 && $0["value"] as? Double == 23.5 }, "\(writes)")
        #expect(writes.contains { $0["aid"] as? Int == 1 && $0["iid"] as? Int == 18 && $0["value"] as? Int == 2 }, "\(writes)")
        // A read-only key is refused before anything is sent.
        try await client.publish("lbs/device/hk_thermostat/set", #"{"temperature":10}"#, qos: .atLeastOnce, responseTopic: "replies/ro")
        let readOnly = try await client.waitForMessage(topic: "replies/ro", timeout: .seconds(10))
        #expect(readOnly.text.contains("read_only_key"), "\(readOnly.text)")

        // Restart: the stored pairing is verified, never set up again.
        await gateway.stop()
        await client.shutdown()
        gateway = try await GatewayHarness.start(broker: gateway.broker, directory: directory, vendors: Self.vendors(peer, name: "thermostat", codeFile: code), storage: true)
        let again = try await gateway.observer("lbs/device/hk_thermostat/availability")
        _ = try await again.waitForMessage(topic: "lbs/device/hk_thermostat/availability", timeout: .seconds(30)) { $0.json?["state"] as? String == "online" }
        #expect(try await peer.pairings().count == 1)
        await gateway.stop()
        await again.shutdown()
    }

    @Test func pairedByRequestThenAPairingRemovedOnTheAccessoryIsReported() async throws {
        let directory = try TemporaryDirectory()
        let peer = try await HAPPeer.start(fixture: "eve_energy.json", stateDirectory: directory.file("peer"))
        defer { Task { await peer.stop() } }
        // No setup code in the config: the vendor waits for homekit/pair and says so.
        let gateway = try await GatewayHarness.start(directory: directory, vendors: Self.vendors(peer, name: "plug", codeFile: nil), storage: true)
        defer { Task { await gateway.stop() } }
        let client = try await gateway.observer("lbs/device/#", "lbs/bridge/vendors/hk", "lbs/bridge/response/#")
        let waiting = try await client.waitForMessage(topic: "lbs/bridge/vendors/hk", timeout: .seconds(10)) { $0.json?["last_error"] is [String: Any] }
        #expect(waiting.text.contains("homekit/pair"), "\(waiting.text)")

        // A wrong code is refused as such; the right one pairs and the plug appears.
        try await client.publish("lbs/bridge/request/homekit/pair", #"{"vendor":"hk","name":"plug","setup_code":"031-45-155","transaction":"p0"}"#, qos: .atLeastOnce)
        let wrong = try await client.waitForMessage(topic: "lbs/bridge/response/homekit/pair", timeout: .seconds(20)) { $0.json?["transaction"] as? String == "p0" }
        #expect(wrong.json?["status"] as? String == "error" && wrong.text.contains("refused the setup code"), "\(wrong.text)")
        try await client.publish("lbs/bridge/request/homekit/pair", #"{"name":"plug","setup_code":"03145154","transaction":"p1"}"#, qos: .atLeastOnce)
        let paired = try await client.waitForMessage(topic: "lbs/bridge/response/homekit/pair", timeout: .seconds(20)) { $0.json?["transaction"] as? String == "p1" }
        #expect(paired.json?["status"] as? String == "ok", "\(paired.text)")
        #expect((paired.json?["data"] as? [String: Any])?["accessory_id"] as? String == peer.accessoryID)
        let plug = try await client.waitForMessage(topic: "lbs/device/hk_plug", timeout: .seconds(20)) { $0.json?["state"] != nil }
        #expect(plug.json?["energy"] as? Double != nil, "\(plug.text)")
        // Eve's power is polled (every second here): a new reading shows without an event.
        try await peer.set(aid: 1, iid: 34, value: 61.5)
        _ = try await client.waitForMessage(topic: "lbs/device/hk_plug", timeout: .seconds(5)) { $0.json?["power"] as? Double == 61.5 }
        try await client.publish("lbs/device/hk_plug/set/state", "ON", qos: .atLeastOnce)
        _ = try await client.waitForMessage(topic: "lbs/device/hk_plug", timeout: .seconds(5)) { $0.json?["state"] as? String == "ON" }
        #expect(try await peer.writes().contains { $0["iid"] as? Int == 30 && $0["value"] as? Bool == true })
        // Identify: the accessory's own Identify characteristic (3E/14) is written.
        try await client.publish("lbs/bridge/request/homekit/identify", #"{"name":"plug","transaction":"i1"}"#, qos: .atLeastOnce)
        let identified = try await client.waitForMessage(topic: "lbs/bridge/response/homekit/identify", timeout: .seconds(10))
        #expect(identified.json?["status"] as? String == "ok", "\(identified.text)")
        #expect(try await peer.writes().contains { $0["aid"] as? Int == 1 && $0["iid"] as? Int == 3 && $0["value"] as? Bool == true })

        // The accessory is reset: its sessions close, pair-verify fails; the vendor says so and how to fix it.
        try await peer.unpairAll()
        let health = try await client.waitForMessage(topic: "lbs/bridge/vendors/hk", timeout: .seconds(20)) {
            (($0.json?["last_error"] as? [String: Any])?["code"] as? String) == "auth_failed" && ($0.text.contains("no longer accepts"))
        }
        #expect(health.text.contains("homekit/unpair"), "\(health.text)")
        _ = try await client.waitForMessage(topic: "lbs/device/hk_plug/availability", timeout: .seconds(5)) { $0.json?["state"] as? String == "offline" }

        // Pair anew by request: unpair here (the accessory already forgot us), then pair with the code.
        try await client.publish("lbs/bridge/request/homekit/unpair", #"{"vendor":"hk","name":"plug","transaction":"u1"}"#, qos: .atLeastOnce)
        let unpaired = try await client.waitForMessage(topic: "lbs/bridge/response/homekit/unpair", timeout: .seconds(10))
        #expect(unpaired.json?["status"] as? String == "ok", "\(unpaired.text)")
        try await client.publish("lbs/bridge/request/homekit/pair", #"{"vendor":"hk","name":"plug","setup_code":"031-45-154","transaction":"p2"}"#, qos: .atLeastOnce)
        let again = try await client.waitForMessage(topic: "lbs/bridge/response/homekit/pair", timeout: .seconds(20)) { $0.json?["transaction"] as? String == "p2" }
        #expect(again.json?["status"] as? String == "ok", "\(again.text)")
        _ = try await client.waitForMessage(topic: "lbs/device/hk_plug/availability", timeout: .seconds(20)) {
            $0.json?["state"] as? String == "online" && client.messages(on: "lbs/bridge/response/homekit/pair").count == 3
        }
        #expect(try await peer.pairings().count == 1)
        await client.shutdown()
    }

    /// By its id alone: `homekit/discover` lists it (unpaired) through the system's Avahi, and the gateway finds
    /// its address over mDNS, pairs and connects.
    @Test(.enabled(if: Avahi.available || Avahi.required, "needs a running avahi-daemon (deploy/avahi.sh start; .ci/run does)"))
    func foundByItsIDOverMDNS() async throws {
        let directory = try TemporaryDirectory()
        let peer = try await HAPPeer.start(fixture: "eve_energy.json", stateDirectory: directory.file("peer"))
        defer { Task { await peer.stop() } }
        let name = "LBS Test Eve \(UInt16.random(in: 0...UInt16.max))"
        let (host, processes) = try Avahi.publish(peer, name: name, directory: directory.path)
        var published = processes
        defer { Task { [published] in for process in published { _ = await process.stop(grace: .seconds(2)) } } }
        let code = try Self.writeCode(directory, peer.setupCode)
        let vendors = """
          - type: homekit
            id: hk
            accessories:
              - {name: plug, device_id: "\(peer.accessoryID.lowercased())", setup_code_file: \(code)}
        """
        let gateway = try await GatewayHarness.start(directory: directory, vendors: vendors, storage: true)
        defer { Task { await gateway.stop() } }
        let client = try await gateway.observer("lbs/device/hk_plug", "lbs/device/hk_plug/availability", "lbs/bridge/response/#")
        _ = try await client.waitForMessage(topic: "lbs/device/hk_plug/availability", timeout: .seconds(30)) { $0.json?["state"] as? String == "online" }
        let state = try await client.waitForMessage(topic: "lbs/device/hk_plug", timeout: .seconds(5))
        #expect(state.json?["state"] as? String == "OFF", "\(state.text)")

        // The record as mDNS has it (Avahi still announces sf=1 here: it is our publication, not the accessory's).
        try await client.publish("lbs/bridge/request/homekit/discover", #"{"transaction":"d1"}"#, qos: .atLeastOnce)
        let discovered = try await client.waitForMessage(topic: "lbs/bridge/response/homekit/discover", timeout: .seconds(15))
        #expect(discovered.json?["status"] as? String == "ok", "\(discovered.text)")
        let list = try #require((discovered.json?["data"] as? [String: Any])?["accessories"] as? [[String: Any]])
        let mine = try #require(list.first { $0["id"] as? String == peer.accessoryID }, "\(list)")
        #expect(mine["name"] as? String == name && mine["address"] as? String == "127.0.0.1" && mine["port"] as? Int == peer.port)
        #expect(mine["model"] as? String == "Eve Energy" && mine["category_name"] as? String == "outlet" && mine["paired"] as? Bool == false)

        // Accessories change behind it (now a VELUX gateway with a sensor and a window) and it announces a new c#:
        // the database is read again on the open session and the devices follow.
        let watcher = try await gateway.observer("lbs/device/#", "lbs/bridge/event", "lbs/bridge/response/#")
        let configNumber = try await peer.replaceDatabase(fixture: "velux_gateway.json")
        _ = await published[1].stop(grace: .seconds(2))
        published[1] = try Avahi.publishService(peer, name: name, host: host, configNumber: configNumber, directory: directory.path)
        // The periodic mDNS read is a minute; a discover request reads it now.
        try await waitUntil("the window behind the new database is published", timeout: .seconds(30)) {
            try await watcher.publish("lbs/bridge/request/homekit/discover", #"{"all":true}"#, qos: .atLeastOnce)
            return (try? await watcher.waitForMessage(topic: "lbs/device/hk_plug_3", timeout: .seconds(2))) != nil
        }
        let window = try await watcher.waitForMessage(topic: "lbs/device/hk_plug_3", timeout: .seconds(5))
        #expect(window.json?["cover"] as? String == "CLOSED" && window.json?["position"] as? Double == 0, "\(window.text)")
        let sensor = try await watcher.waitForMessage(topic: "lbs/device/hk_plug_2", timeout: .seconds(5))
        #expect(sensor.json?["co2"] as? Double == 400, "\(sensor.text)")
        #expect(try await peer.pairings().count == 1, "no new pairing")
        await watcher.shutdown()
        await client.shutdown()
    }
}
