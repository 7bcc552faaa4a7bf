import Foundation
@testable import FeatureHomeKitBridge
@testable import GatewayCore
import GatewayTesting
import MQTT
import TestTraits
import GatewayModel
import HAP
import Testing
import VendorHomeKit

/// The gateway as a HomeKit bridge against Home Assistant's own HomeKit controller (aiohomekit, driven by
/// `deploy/homekit/hap-controller.py`): pair with the setup code over TCP, the demo light and lock with the right
/// services, reads equal to MQTT state, writes that change MQTT state, an MQTT `/set` arriving as an event, a
/// second controller refused, pairings and aids that survive a restart.
@Suite(.integration, .serialized, .timeLimit(.minutes(3)), .enabled(if: HAPPeer.enabled, "set LBS_HAP_PYTHON (deploy/homekit/peer-setup.sh; .ci/run does)"))
struct HomeKitBridgeTests {
    static let code = "482-19-573"

    static func start(directory: TemporaryDirectory, port: Int, broker: MosquittoBroker? = nil) async throws -> GatewayHarness {
        let codeFile = directory.file("homekit-code")
        if !FileManager.default.fileExists(atPath: codeFile) {
            _ = FileManager.default.createFile(atPath: codeFile, contents: Data((code + "\n").utf8), attributes: [.posixPermissions: 0o600])
        }
        return try await GatewayHarness.start(
            broker: broker, directory: directory,
            yaml: "homekit: {listen: \"127.0.0.1:\(port)\", setup_code_file: \(codeFile), advertise: false, devices: [demo_light, demo_lock, demo_thermostat, energy_home]}",
            storage: true
        )
    }

    /// aid of the bridged accessory whose Accessory Information name is `name`.
    static func aid(named name: String, in accessories: [[String: Any]]) -> Int? {
        accessories.first { accessory in
            (accessory["services"] as? [[String: Any]] ?? []).contains { service in
                (service["characteristics"] as? [[String: Any]] ?? []).contains { ($0["type"] as? String)?.uppercased().hasPrefix("00000023") == true || $0["type"] as? String == "23" ? $0["value"] as? String == name : false }
            }
        }?["aid"] as? Int
    }

    static func serviceTypes(_ aid: Int, in accessories: [[String: Any]]) -> [String] {
        let accessory = accessories.first { $0["aid"] as? Int == aid }
        return (accessory?["services"] as? [[String: Any]] ?? []).compactMap { $0["type"] as? String }
    }

    @Test func aiohomekitPairsReadsWritesSubscribesAndKeepsItsPairingAcrossARestart() async throws {
        let directory = try TemporaryDirectory()
        let port = try freeLoopbackPort()
        var gateway = try await Self.start(directory: directory, port: port)
        let client = try await gateway.observer("lbs/device/#", "lbs/energy/home")
        _ = try await client.waitForMessage(topic: "lbs/device/demo_light", timeout: .seconds(10))
        try await waitUntil("the bridge listens on \(port)", timeout: .seconds(10)) { loopbackPortAcceptsConnections(port) }
        _ = try await client.waitForMessage(topic: "lbs/energy/home", timeout: .seconds(10))

        let controller = try HAPController(logDirectory: directory.path)
        defer { controller.stop() }
        let pairingFile = directory.file("pairing.json")
        let paired = try await controller.send(["cmd": "pair", "host": "127.0.0.1", "port": port, "setup_code": Self.code, "pairing_file": pairingFile, "verify": true])
        #expect(paired["ok"] as? Bool == true, "\(paired)")
        var listed: [String: Any] = [:]
        // The home energy view joins once it was published (a rebuild after it).
        try await waitUntil("the home energy accessory is there", timeout: .seconds(10)) {
            listed = try await controller.send(["cmd": "accessories"])
            return (listed["accessories"] as? [[String: Any]])?.count == 5
        }
        let accessories = try #require(listed["accessories"] as? [[String: Any]], "\(listed)")
        #expect(Self.serviceTypes(1, in: accessories).map { $0.uppercased() } .contains { $0 == "3E" || $0.hasPrefix("0000003E") })
        let light = try #require(Self.aid(named: "Demo Light", in: accessories), "\(accessories)")
        let lock = try #require(Self.aid(named: "Demo Front Door Lock", in: accessories))
        #expect(Self.serviceTypes(light, in: accessories).contains { $0 == "43" || $0.uppercased().hasPrefix("00000043") })
        #expect(Self.serviceTypes(lock, in: accessories).contains { $0 == "45" || $0.uppercased().hasPrefix("00000045") })
        #expect(accessories.count == 5, "the bridge, the three devices chosen and the home energy view")
        // The home's power on Eve's characteristic, as energy/home has it.
        let home = try #require(Self.aid(named: "Home energy", in: accessories))
        let homePower = "\(home).\(BridgeModel.iid(.consumption, 8))"
        let homeRead = try await controller.send(["cmd": "read", "ids": [homePower]])
        let published = try #require(client.messages(on: "lbs/energy/home").last?.json?["home_power"] as? Double)
        #expect(abs(((homeRead["values"] as? [String: Any])?[homePower] as? Double ?? -1) - published) < 500, "\(homeRead) vs \(published)")

        // Reads are the MQTT state.
        let on = "\(light).\(BridgeModel.iid(.lightbulb, 1))", brightness = "\(light).\(BridgeModel.iid(.lightbulb, 2))"
        let lockCurrent = "\(lock).\(BridgeModel.iid(.lock, 1))", lockTarget = "\(lock).\(BridgeModel.iid(.lock, 2))"
        let mqttLight = try #require(client.messages(on: "lbs/device/demo_light").last?.json)
        let read = try await controller.send(["cmd": "read", "ids": [on, brightness, lockCurrent]])
        let values = try #require(read["values"] as? [String: Any], "\(read)")
        #expect((values[on] as? Bool) == (mqttLight["state"] as? String == "ON") || (values[on] as? Int) == (mqttLight["state"] as? String == "ON" ? 1 : 0), "\(values) vs \(mqttLight)")
        #expect((values[brightness] as? Double) == (mqttLight["brightness"] as? Double), "\(values) vs \(mqttLight)")
        let mqttLock = try await client.waitForMessage(topic: "lbs/device/demo_lock", timeout: .seconds(5))
        #expect((values[lockCurrent] as? Int) == (mqttLock.json?["lock"] as? String == "LOCKED" ? 1 : 0))

        // A write goes through the command path and changes MQTT state.
        let wanted = mqttLight["state"] as? String == "ON" ? false : true
        let written = try await controller.send(["cmd": "write", "items": [[on, wanted]]])
        #expect(written["ok"] as? Bool == true && (written["statuses"] as? [String: Any])?.isEmpty != false, "\(written)")
        _ = try await client.waitForMessage(topic: "lbs/device/demo_light", timeout: .seconds(5)) { $0.json?["state"] as? String == (wanted ? "ON" : "OFF") }
        let unlocked = try await controller.send(["cmd": "write", "items": [[lockTarget, 0]]])
        #expect(unlocked["ok"] as? Bool == true && (unlocked["statuses"] as? [String: Any])?.isEmpty != false, "\(unlocked)")
        _ = try await client.waitForMessage(topic: "lbs/device/demo_lock", timeout: .seconds(5)) { $0.json?["lock"] as? String == "UNLOCKED" }
        // A value outside the characteristic's range is refused with HAP's invalid-value status, not sent.
        let refused = try await controller.send(["cmd": "write", "items": [[brightness, 250]]])
        #expect((refused["statuses"] as? [String: Any])?[brightness] as? Int == -70410, "\(refused)")

        // An MQTT /set arrives as an event within 2 s.
        let subscribed = try await controller.send(["cmd": "subscribe", "ids": [brightness, on]])
        #expect(subscribed["ok"] as? Bool == true, "\(subscribed)")
        try await client.publish("lbs/device/demo_light/set", #"{"brightness":33}"#, qos: .atLeastOnce)
        let events = try await controller.send(["cmd": "events", "wait": 2.0, "min": 1])
        let brightnessEvents = (events["events"] as? [[String: Any]] ?? []).filter { $0["id"] as? String == brightness }
        #expect(brightnessEvents.last?["value"] as? Double == 33, "\(events)")

        // A second controller cannot pair while the bridge is paired.
        let stranger = try HAPController(logDirectory: directory.path)
        defer { stranger.stop() }
        let second = try await stranger.send(["cmd": "pair", "host": "127.0.0.1", "port": port, "setup_code": Self.code, "pairing_file": directory.file("second.json")])
        #expect(second["ok"] as? Bool == false && (second["error"] as? String ?? "").contains("Unavailable"), "\(second)")

        // Restart: the pairing and the aids are kept; the controller verifies with its saved pairing.
        await gateway.stop()
        await client.shutdown()
        controller.stop()
        gateway = try await Self.start(directory: directory, port: port, broker: gateway.broker)
        defer { Task { [gateway] in await gateway.stop() } }
        let watcher = try await gateway.observer("lbs/device/demo_light")
        _ = try await watcher.waitForMessage(topic: "lbs/device/demo_light", timeout: .seconds(10))
        try await waitUntil("the bridge listens again", timeout: .seconds(10)) { loopbackPortAcceptsConnections(port) }
        let again = try HAPController(logDirectory: directory.path)
        defer { again.stop() }
        let loaded = try await again.send(["cmd": "load", "pairing_file": pairingFile, "host": "127.0.0.1", "port": port])
        #expect(loaded["ok"] as? Bool == true && loaded["connected"] as? Bool == true, "\(loaded)")
        let relisted = try await again.send(["cmd": "accessories"])
        let after = try #require(relisted["accessories"] as? [[String: Any]], "\(relisted)")
        #expect(Self.aid(named: "Demo Light", in: after) == light && Self.aid(named: "Demo Front Door Lock", in: after) == lock)
        let pairings = try await again.send(["cmd": "list_pairings"])
        #expect((pairings["pairings"] as? [[String: Any]])?.count == 1, "\(pairings)")
        await watcher.shutdown()
    }

    /// HomeKit in, HomeKit out: an Eve Energy (HAP-python) paired by the gateway's HomeKit vendor and bridged back out.
    /// A non-admin controller added by the admin can read but not manage pairings, and loses its session when the
    /// admin removes it; an accessory that goes away answers "not reachable" instead of its last value.
    @Test func aRemovedControllerLosesItsSessionAndAnOfflineDeviceIsNotReachable() async throws {
        let directory = try TemporaryDirectory()
        let peer = try await HAPPeer.start(fixture: "eve_energy.json", stateDirectory: directory.file("peer"))
        defer { Task { await peer.stop() } }
        let peerCode = directory.file("peer-code")
        _ = FileManager.default.createFile(atPath: peerCode, contents: Data((peer.setupCode + "\n").utf8), attributes: [.posixPermissions: 0o600])
        let codeFile = directory.file("homekit-code")
        _ = FileManager.default.createFile(atPath: codeFile, contents: Data((Self.code + "\n").utf8), attributes: [.posixPermissions: 0o600])
        let port = try freeLoopbackPort()
        let gateway = try await GatewayHarness.start(
            directory: directory,
            yaml: "homekit: {listen: \"127.0.0.1:\(port)\", setup_code_file: \(codeFile), advertise: false, devices: [hk_plug]}",
            vendors: """
              - type: homekit
                id: hk
                accessories:
                  - {name: plug, host: 127.0.0.1, port: \(peer.port), setup_code_file: \(peerCode)}
            """,
            storage: true
        )
        defer { Task { await gateway.stop() } }
        let client = try await gateway.observer("lbs/device/#")
        _ = try await client.waitForMessage(topic: "lbs/device/hk_plug/availability", timeout: .seconds(30)) { $0.json?["state"] as? String == "online" }
        try await waitUntil("the bridge listens on \(port)", timeout: .seconds(10)) { loopbackPortAcceptsConnections(port) }

        let admin = try HAPController(logDirectory: directory.path)
        defer { admin.stop() }
        let paired = try await admin.send(["cmd": "pair", "host": "127.0.0.1", "port": port, "setup_code": Self.code, "pairing_file": directory.file("a.json"), "verify": true])
        #expect(paired["ok"] as? Bool == true, "\(paired)")
        var accessories: [[String: Any]] = []
        // The plug joins the bridge once the vendor delivered it (a rebuild after its inventory).
        try await waitUntil("the plug is bridged", timeout: .seconds(10)) {
            accessories = (try await admin.send(["cmd": "accessories"]))["accessories"] as? [[String: Any]] ?? []
            return accessories.count == 2
        }
        let plug = try #require(Self.aid(named: "Eve Energy 50FF", in: accessories), "\(accessories)")
        #expect(Self.serviceTypes(plug, in: accessories).contains { $0 == "47" || $0.uppercased().hasPrefix("00000047") })
        let on = "\(plug).\(BridgeModel.iid(.outlet, 1))", power = "\(plug).\(BridgeModel.iid(.outlet, 8))"
        let first = try await admin.send(["cmd": "read", "ids": [on, power]])
        #expect((first["statuses"] as? [String: Any])?.isEmpty != false && (first["values"] as? [String: Any])?[power] != nil, "\(first)")

        // A user (not admin) controller: reads, may not manage pairings, and is cut off when removed.
        let added = try await admin.send(["cmd": "add_pairing", "pairing_file": directory.file("b.json"), "admin": false])
        #expect(added["ok"] as? Bool == true, "\(added)")
        let user = try HAPController(logDirectory: directory.path)
        defer { user.stop() }
        let loaded = try await user.send(["cmd": "load", "pairing_file": directory.file("b.json"), "host": "127.0.0.1", "port": port])
        #expect(loaded["ok"] as? Bool == true, "\(loaded)")
        let userRead = try await user.send(["cmd": "read", "ids": [on]])
        #expect((userRead["values"] as? [String: Any])?[on] != nil, "\(userRead)")
        // A change one controller makes reaches the other as an event, not the one that made it (HAP's rule).
        _ = try await admin.send(["cmd": "subscribe", "ids": [on]])
        _ = try await user.send(["cmd": "subscribe", "ids": [on]])
        let current = (userRead["values"] as? [String: Any])?[on] as? Bool ?? false
        let toggled = try await admin.send(["cmd": "write", "items": [[on, !current]]])
        #expect(toggled["ok"] as? Bool == true, "\(toggled)")
        let seen = try await user.send(["cmd": "events", "wait": 3.0, "min": 1])
        #expect((seen["events"] as? [[String: Any]] ?? []).contains { $0["id"] as? String == on }, "the other controller gets the change: \(seen)")
        let echo = try await admin.send(["cmd": "events", "wait": 1.0, "min": 1])
        #expect(!(echo["events"] as? [[String: Any]] ?? []).contains { $0["id"] as? String == on }, "no echo to the writer: \(echo)")
        let userList = try await user.send(["cmd": "list_pairings"])
        #expect(userList["ok"] as? Bool == false, "a user may not list pairings: \(userList)")
        let removed = try await admin.send(["cmd": "remove_pairing", "id": try #require(added["id"] as? String)])
        #expect(removed["ok"] as? Bool == true, "\(removed)")
        let afterRemoval = try await user.send(["cmd": "read", "ids": [on], "timeout": 15])
        #expect(afterRemoval["ok"] as? Bool == false, "the removed controller's session must be closed: \(afterRemoval)")
        let remaining = try await admin.send(["cmd": "list_pairings"])
        #expect((remaining["pairings"] as? [[String: Any]])?.count == 1, "\(remaining)")

        // The accessory goes away: the bridged plug is "not reachable", not its last value.
        await peer.stop()
        _ = try await client.waitForMessage(topic: "lbs/device/hk_plug/availability", timeout: .seconds(20)) { $0.json?["state"] as? String == "offline" }
        let offline = try await admin.send(["cmd": "read", "ids": [on]])
        #expect((offline["statuses"] as? [String: Any])?[on] as? Int == -70402, "\(offline)")
        await client.shutdown()
    }

    /// The Home app finds the bridge over mDNS: `_hap._tcp` through the system's Avahi, with the TXT record HAP
    /// wants (category 2, not paired, its id); once paired, `sf` is 0.
    @Test(.enabled(if: Avahi.available || Avahi.required, "needs a running avahi-daemon (deploy/avahi.sh start; .ci/run does)"))
    func announcedOverMDNSUntilPaired() async throws {
        let directory = try TemporaryDirectory()
        let port = try freeLoopbackPort()
        let codeFile = directory.file("homekit-code")
        _ = FileManager.default.createFile(atPath: codeFile, contents: Data((Self.code + "\n").utf8), attributes: [.posixPermissions: 0o600])
        let name = "LBS Test Bridge \(UInt16.random(in: 0...UInt16.max))"
        let gateway = try await GatewayHarness.start(
            directory: directory, yaml: "homekit: {listen: \"127.0.0.1:\(port)\", setup_code_file: \(codeFile), name: \(name)}", storage: true
        )
        defer { Task { await gateway.stop() } }
        await gateway.waitUntilOnline()
        let browser = AvahiBrowser()
        var record: HAPServiceRecord?
        try await waitUntil("the bridge is announced", timeout: .seconds(20)) {
            record = try await browser.browse().first { $0.name == name }
            return record != nil
        }
        let announced = try #require(record)
        #expect(announced.port == port && announced.category == 2 && !announced.isPaired && announced.configNumber != nil, "\(announced)")

        let controller = try HAPController(logDirectory: directory.path)
        defer { controller.stop() }
        let paired = try await controller.send(["cmd": "pair", "host": "127.0.0.1", "port": port, "setup_code": Self.code, "pairing_file": directory.file("a.json")])
        #expect(paired["ok"] as? Bool == true, "\(paired)")
        #expect(paired["accessory_id"] as? String == announced.deviceID)
        try await waitUntil("the record says paired", timeout: .seconds(20)) {
            try await browser.browse().first { $0.name == name }?.isPaired == true
        }
    }

    /// The real `lbs-gateway` binary as the bridge: aiohomekit pairs, a write reaches MQTT, and after SIGTERM and a
    /// new start (a new process) the saved pairing verifies and the aids are the same; a kill -9 does not leave the
    /// bridge unable to start again either.
    @Test func theRealBinaryAsABridge() async throws {
        let binary = try #require(Binaries.gateway, "lbs-gateway is not built")
        let broker = try await MosquittoBroker.started()
        defer { Task { await broker.stop() } }
        let directory = try TemporaryDirectory()
        let port = try freeLoopbackPort()
        let codeFile = directory.file("homekit-code")
        _ = FileManager.default.createFile(atPath: codeFile, contents: Data((Self.code + "\n").utf8), attributes: [.posixPermissions: 0o600])
        let config = directory.file("config.yaml")
        try """
        mqtt: {url: \(broker.url), client_id: bridge-\(UInt32.random(in: 0...UInt32.max))}
        log_level: warning
        http: {enabled: false}
        storage: {path: \(directory.file("gateway.sqlite"))}
        homekit: {listen: "127.0.0.1:\(port)", setup_code_file: \(codeFile), advertise: false, devices: [demo_light, demo_plug]}
        vendors:
          - {type: demo, id: demo, poll_interval: 3600}
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let client = try await TestMQTTClient.connect(to: broker.url)
        try await client.subscribe("lbs/device/#")
        var gateway = try ProcessRunner(executable: binary, arguments: ["run", "--config", config], outputDirectory: directory.path, name: "gateway")
        try await waitUntil("the bridge listens on \(port)", timeout: .seconds(30)) { loopbackPortAcceptsConnections(port) }
        _ = try await client.waitForMessage(topic: "lbs/device/demo_plug", timeout: .seconds(10))

        let controller = try HAPController(logDirectory: directory.path)
        defer { controller.stop() }
        let pairingFile = directory.file("pairing.json")
        let paired = try await controller.send(["cmd": "pair", "host": "127.0.0.1", "port": port, "setup_code": Self.code, "pairing_file": pairingFile, "verify": true])
        #expect(paired["ok"] as? Bool == true, "\(paired)")
        var accessories: [[String: Any]] = []
        try await waitUntil("both devices are bridged", timeout: .seconds(10)) {
            accessories = (try await controller.send(["cmd": "accessories"]))["accessories"] as? [[String: Any]] ?? []
            return accessories.count == 3
        }
        let plug = try #require(Self.aid(named: "Demo Plug", in: accessories), "\(accessories)")
        let on = "\(plug).\(BridgeModel.iid(.outlet, 1))"
        let wanted = client.messages(on: "lbs/device/demo_plug").last?.json?["state"] as? String == "ON" ? false : true
        let written = try await controller.send(["cmd": "write", "items": [[on, wanted]]])
        #expect(written["ok"] as? Bool == true, "\(written)")
        _ = try await client.waitForMessage(topic: "lbs/device/demo_plug", timeout: .seconds(5)) { $0.json?["state"] as? String == (wanted ? "ON" : "OFF") }
        controller.stop()

        // SIGTERM, then a new process: the pairing and the aids are the same.
        #expect(await gateway.stop(grace: .seconds(10)) == .exited(0))
        gateway = try ProcessRunner(executable: binary, arguments: ["run", "--config", config], outputDirectory: directory.path, name: "gateway2")
        try await waitUntil("the bridge listens again", timeout: .seconds(30)) { loopbackPortAcceptsConnections(port) }
        let again = try HAPController(logDirectory: directory.path)
        defer { again.stop() }
        let loaded = try await again.send(["cmd": "load", "pairing_file": pairingFile, "host": "127.0.0.1", "port": port])
        #expect(loaded["ok"] as? Bool == true, "\(loaded)")
        try await waitUntil("both devices are bridged again", timeout: .seconds(10)) {
            accessories = (try await again.send(["cmd": "accessories"]))["accessories"] as? [[String: Any]] ?? []
            return accessories.count == 3
        }
        #expect(Self.aid(named: "Demo Plug", in: accessories) == plug)
        again.stop()

        // kill -9: the next start takes the port and the pairing again.
        gateway.kill()
        _ = await gateway.waitForExit(timeout: .seconds(5))
        gateway = try ProcessRunner(executable: binary, arguments: ["run", "--config", config], outputDirectory: directory.path, name: "gateway3")
        defer { Task { [gateway] in _ = await gateway.stop() } }
        try await waitUntil("the bridge listens after kill -9", timeout: .seconds(30)) { loopbackPortAcceptsConnections(port) }
        let third = try HAPController(logDirectory: directory.path)
        defer { third.stop() }
        let verified = try await third.send(["cmd": "load", "pairing_file": pairingFile, "host": "127.0.0.1", "port": port])
        #expect(verified["ok"] as? Bool == true, "\(verified)")
        await client.shutdown()
    }

    /// The gateway's own HomeKit controller against its own bridge, over TCP: pair setup, pair verify, and a read
    /// with the descriptions iOS asks for (`meta`, `perms`, `type`, `ev`); a second pair setup is refused.
    @Test func ourControllerAgainstOurBridge() async throws {
        let directory = try TemporaryDirectory()
        let port = try freeLoopbackPort()
        let codeFile = directory.file("homekit-code")
        _ = FileManager.default.createFile(atPath: codeFile, contents: Data((Self.code + "\n").utf8), attributes: [.posixPermissions: 0o600])
        let gateway = try await GatewayHarness.start(
            directory: directory, yaml: "homekit: {listen: \"127.0.0.1:\(port)\", setup_code_file: \(codeFile), advertise: false, devices: [demo_light]}", storage: true
        )
        defer { Task { await gateway.stop() } }
        await gateway.waitUntilOnline()
        try await waitUntil("the bridge listens on \(port)", timeout: .seconds(10)) { loopbackPortAcceptsConnections(port) }
        let identity = ControllerIdentity.generate()
        let pairing = try await HomeKitProbe.pairSetup(host: "127.0.0.1", port: port, setupCode: Self.code, identity: identity)
        var accessories: [HAPAccessory] = []
        try await waitUntil("the light is bridged", timeout: .seconds(10)) {
            let answer = try await HomeKitProbe.get(host: "127.0.0.1", port: port, identity: identity, pairing: pairing, path: "/accessories")
            accessories = try AccessoryDatabase.parse(answer?.body ?? [])
            return accessories.count == 2
        }
        let light = try #require(accessories.first { $0.aid != 1 })
        let brightness = try #require(light.services(HAPType(apple: "43")).first?.characteristic(HAPType(apple: "8")))
        let read = try #require(try await HomeKitProbe.get(host: "127.0.0.1", port: port, identity: identity, pairing: pairing,
                                                           path: "/characteristics?id=\(light.aid).\(brightness.iid)&meta=1&perms=1&type=1&ev=1"))
        #expect(read.kind == .response(status: 200))
        let item = try #require(try? JSONValue.parse(read.body).get()["characteristics"].flatMap { if case .array(let list) = $0 { list.first } else { nil } })
        #expect(item["type"] == .string("8") && item["format"] == .string("int") && item["unit"] == .string("percentage") && item["maxValue"] == .number(100))
        #expect(item["perms"] == .array([.string("pr"), .string("pw"), .string("ev")]) && item["ev"] == .bool(false) && item["value"]?.number != nil)
        // Paired: a second pair setup is refused as HAP says (Unavailable).
        await #expect(throws: HAPError.refused(.unavailable, step: "pair-setup M2", retryDelay: nil)) {
            _ = try await HomeKitProbe.pairSetup(host: "127.0.0.1", port: port, setupCode: Self.code)
        }
    }
}
