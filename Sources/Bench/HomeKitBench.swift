import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import GatewayModel
import GatewayTesting
import HAP
import MQTT
import Synchronization
import VendorHomeKit

/// `lbs-bench homekit [rounds] [accessories]`: the HomeKit controller against real accessories (HAP-python 5.0.0
/// serving the recorded Eve Energy, `deploy/homekit/hap-peer.py`; its venv's python in `LBS_HAP_PYTHON` or
/// `.build/hap-venv`):
/// - pair setup and pair verify (plus one encrypted `GET /accessories`), each `rounds` times, with the vendor's code;
/// - event → MQTT: the real `lbs-gateway` subscribed to the accessory, which sends each change at once
///   (`--event-delay 0`) and says when its EVENT frame left; the latency ends when the state arrives on MQTT;
/// - memory per connected accessory: the gateway's resident memory with `accessories` peers connected minus with one,
///   divided by the difference.
enum HomeKitBench {
    struct Peer {
        var process: ProcessRunner
        var port: Int
        var control: Int
        var id: String
    }

    static var python: String? {
        if let given = ProcessInfo.processInfo.environment["LBS_HAP_PYTHON"], !given.isEmpty { return given }
        let local = FileManager.default.currentDirectoryPath + "/.build/hap-venv/bin/python"
        return FileManager.default.isExecutableFile(atPath: local) ? local : nil
    }

    static func startPeer(directory: String, name: String, eventDelayZero: Bool) async throws -> Peer {
        guard let python else { throw TestSupportError("no HAP-python venv: run deploy/homekit/peer-setup.sh or set LBS_HAP_PYTHON") }
        let root = FileManager.default.currentDirectoryPath
        try FileManager.default.createDirectory(atPath: "\(directory)/\(name)", withIntermediateDirectories: true)
        var arguments = ["\(root)/deploy/homekit/hap-peer.py", "--fixture", "\(root)/Tests/Fixtures/homekit/eve_energy.json",
                         "--state-dir", "\(directory)/\(name)", "--stock-srp"]
        if eventDelayZero { arguments += ["--event-delay", "0"] }
        let process = try ProcessRunner(executable: python, arguments: arguments, outputDirectory: directory, name: name)
        var ready: [String: Any]?
        try await waitUntil("peer \(name) ready", timeout: .seconds(30)) {
            let line = process.standardOutput().split(separator: "\n").first.map(String.init) ?? ""
            ready = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
            return ready != nil || !process.isRunning
        }
        guard let ready, let port = ready["port"] as? Int, let control = ready["control_port"] as? Int, let id = ready["id"] as? String else {
            throw TestSupportError("peer \(name) did not start: \(process.standardError().suffix(1000))")
        }
        return Peer(process: process, port: port, control: control, id: id)
    }

    static func control(_ peer: Peer, _ method: String, _ path: String, body: [String: Any]? = nil) async throws -> Any {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(peer.control)\(path)")!)
        request.httpMethod = method
        if let body { request.httpBody = try JSONSerialization.data(withJSONObject: body) }
        let (data, _) = try await URLSession.shared.data(for: request)
        return try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
    }

    static func percentile(_ values: [Double], _ p: Double) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
    }

    /// Pair setup `rounds` times (the peer forgets the pairing between rounds), then pair verify `rounds` times.
    static func pairing(rounds: Int) async throws -> (setup: [Double], verify: [Double], verifyAndRead: [Double]) {
        let directory = try TemporaryDirectory(prefix: "lbs-bench-homekit")
        defer { directory.remove() }
        let peer = try await startPeer(directory: directory.path, name: "peer", eventDelayZero: false)
        defer { peer.process.kill() }
        var setup: [Double] = [], verify: [Double] = [], verifyAndRead: [Double] = []
        var last: (ControllerIdentity, AccessoryPairing)?
        for _ in 0..<rounds {
            _ = try await control(peer, "POST", "/unpair-all", body: [:])
            let identity = ControllerIdentity.generate()
            let start = ContinuousClock.now
            let pairing = try await HomeKitProbe.pairSetup(host: "127.0.0.1", port: peer.port, setupCode: "031-45-154", identity: identity)
            setup.append((ContinuousClock.now - start).inSeconds * 1000)
            last = (identity, pairing)
        }
        guard let (identity, pairing) = last else { return ([], [], []) }
        for round in 0..<(rounds * 2) {
            let start = ContinuousClock.now
            _ = try await HomeKitProbe.pairVerify(host: "127.0.0.1", port: peer.port, identity: identity, pairing: pairing, readDatabase: round % 2 == 1)
            let milliseconds = (ContinuousClock.now - start).inSeconds * 1000
            if round % 2 == 0 { verify.append(milliseconds) } else { verifyAndRead.append(milliseconds) }
        }
        return (setup, verify, verifyAndRead)
    }

    struct Live {
        var latencies: [Double]
        var rssOneKB: Int
        var rssManyKB: Int
        var accessories: Int
    }

    /// The gateway with `count` paired peers: event latencies over `events` changes on the first, and memory.
    static func gateway(broker: MosquittoBroker, count: Int, events: Int) async throws -> (latencies: [Double], rssKB: Int) {
        let directory = try TemporaryDirectory(prefix: "lbs-bench-homekit-gw")
        defer { directory.remove() }
        var peers: [Peer] = []
        defer { for peer in peers { peer.process.kill() } }
        for index in 0..<count {
            peers.append(try await startPeer(directory: directory.path, name: "peer\(index)", eventDelayZero: true))
        }
        let code = directory.file("code")
        try "031-45-154\n".write(toFile: code, atomically: true, encoding: .utf8)
        chmod(code, 0o600)
        let accessories = peers.enumerated().map { "      - {name: plug\($0.offset), host: 127.0.0.1, port: \($0.element.port), setup_code_file: \(code)}" }
        let config = directory.file("config.yaml")
        try """
        mqtt: {url: \(broker.url), client_id: bench-homekit-\(count)}
        log_level: error
        http: {enabled: false}
        homeassistant: {enabled: false}
        storage: {path: \(directory.file("gateway.sqlite"))}
        vendors:
          - type: homekit
            id: hk
            accessories:
        \(accessories.joined(separator: "\n"))
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let binary = ProcessInfo.processInfo.environment["LBS_BENCH_GATEWAY"]
            ?? URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("lbs-gateway").path
        let process = try ProcessRunner(executable: binary, arguments: ["run", "--config", config], outputDirectory: directory.path, name: "gateway")
        defer { process.terminate() }

        let client = try MQTTClient(configuration: try MQTTConfiguration(url: broker.url, clientID: "bench-homekit-client-\(count)"))
        let inbound = client.messages
        let online = Mutex(Set<String>())
        let arrivals = Mutex<[Double: Double]>([:])
        let forward = Task {
            for await message in inbound {
                let now = Date().timeIntervalSince1970
                guard let object = (try? JSONSerialization.jsonObject(with: Data(message.payload))) as? [String: Any] else { continue }
                if message.topic.hasSuffix("/availability") {
                    if object["state"] as? String == "online" { online.withLock { _ = $0.insert(message.topic) } }
                } else if message.topic == "lbs/device/hk_plug0", let power = object["power"] as? Double {
                    arrivals.withLock { if $0[power] == nil { $0[power] = now } }
                }
            }
        }
        defer { forward.cancel() }
        client.start()
        try await waitUntil("bench client connected", timeout: .seconds(10)) { client.isConnected }
        try await client.subscribeAndWait(["lbs/device/+", "lbs/device/+/availability"], qos: .atMostOnce, timeout: .seconds(5))
        try await waitUntil("every accessory online", timeout: .seconds(120)) { online.withLock { $0.count } >= count }
        var latencies: [Double] = []
        for index in 0..<events {
            let value = Double(1000 + index) / 10
            let answer = try await control(peers[0], "POST", "/set", body: ["aid": 1, "iid": 34, "value": value, "force": true]) as? [String: Any]
            guard let sent = answer?["sent_at"] as? Double else { continue }
            try await waitUntil("power \(value) on MQTT", timeout: .seconds(5)) { arrivals.withLock { $0[value] != nil } }
            if let arrived = arrivals.withLock({ $0[value] }) { latencies.append((arrived - sent) * 1000) }
        }
        try await Task.sleep(for: .seconds(5))
        let status = (try? String(contentsOfFile: "/proc/\(process.pid)/status", encoding: .utf8)) ?? ""
        let rss = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
            .flatMap { Int($0.split(separator: " ").dropFirst().first { !$0.isEmpty } ?? "") } ?? 0
        await client.shutdown()
        return (latencies, rss)
    }
}

/// `lbs-bench homekit-bridge [events]`: the real `lbs-gateway` as a HomeKit bridge with 1,000 demo devices (HomeKit
/// shows 149 behind one bridge: the first 149 are bridged, the log says so), Home Assistant's controller (aiohomekit)
/// paired and subscribed to a light: MQTT `/set` → the HAP event at the controller; and the gateway's resident
/// memory with the bridge on and off.
enum HomeKitBridgeBench {
    static func rss(_ pid: Int32) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        return status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
            .flatMap { Int($0.split(separator: " ").dropFirst().first { !$0.isEmpty } ?? "") } ?? 0
    }

    static func run(broker: MosquittoBroker, devices: Int, events: Int, bridge: Bool) async throws -> (latencies: [Double], rssKB: Int, accessories: Int) {
        guard let python = HomeKitBench.python else { throw TestSupportError("no HAP-python venv: run deploy/homekit/peer-setup.sh or set LBS_HAP_PYTHON") }
        let directory = try TemporaryDirectory(prefix: "lbs-bench-bridge")
        defer { directory.remove() }
        let code = directory.file("code")
        try "482-19-573\n".write(toFile: code, atomically: true, encoding: .utf8)
        chmod(code, 0o600)
        let port = try freeLoopbackPort()
        let config = directory.file("config.yaml")
        try """
        mqtt: {url: \(broker.url), client_id: bench-bridge-\(bridge)}
        log_level: error
        http: {enabled: false}
        homeassistant: {enabled: false}
        storage: {path: \(directory.file("gateway.sqlite"))}
        \(bridge ? "homekit: {listen: \"127.0.0.1:\(port)\", setup_code_file: \(code), advertise: false}" : "")
        vendors: [{type: demo, id: demo, poll_interval: 3600, devices: \(devices)}]
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let binary = ProcessInfo.processInfo.environment["LBS_BENCH_GATEWAY"]
            ?? URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("lbs-gateway").path
        let process = try ProcessRunner(executable: binary, arguments: ["run", "--config", config], outputDirectory: directory.path, name: "gateway")
        defer { process.terminate() }
        let client = try MQTTClient(configuration: try MQTTConfiguration(url: broker.url, clientID: "bench-bridge-client-\(bridge)"))
        client.start()
        try await waitUntil("bench client connected", timeout: .seconds(10)) { client.isConnected }
        guard bridge else {
            try await Task.sleep(for: .seconds(15))
            let memory = rss(process.pid)
            await client.shutdown()
            return ([], memory, 0)
        }
        try await waitUntil("the bridge listens", timeout: .seconds(30)) { loopbackPortAcceptsConnections(port) }
        let controller = try HAPController(python: python, script: FileManager.default.currentDirectoryPath + "/deploy/homekit/hap-controller.py", logDirectory: directory.path)
        defer { controller.stop() }
        let paired = try await controller.send(["cmd": "pair", "host": "127.0.0.1", "port": port, "setup_code": "482-19-573",
                                                "pairing_file": directory.file("pairing.json"), "verify": true])
        guard paired["ok"] as? Bool == true else { throw TestSupportError("pairing failed: \(paired)") }
        var accessories: [[String: Any]] = []
        try await waitUntil("the devices are bridged", timeout: .seconds(30)) {
            accessories = (try await controller.send(["cmd": "accessories"]))["accessories"] as? [[String: Any]] ?? []
            return accessories.count > 100
        }
        // The demo light: its brightness characteristic (Lightbulb block 2, offset 2).
        let light = accessories.first { accessory in
            (accessory["services"] as? [[String: Any]] ?? []).contains { ($0["type"] as? String) == "43" }
                && (accessory["services"] as? [[String: Any]] ?? []).contains { service in
                    (service["characteristics"] as? [[String: Any]] ?? []).contains { $0["value"] as? String == "Demo Light" }
                }
        }?["aid"] as? Int
        guard let light else { throw TestSupportError("no demo light among the bridged accessories") }
        let brightness = "\(light).\(2 * 16 + 1 + 2)"
        _ = try await controller.send(["cmd": "subscribe", "ids": [brightness]])
        // The same change's state on MQTT, to tell the bridge's part from the command path's.
        let stateArrivals = Mutex<[Int: Double]>([:])
        let inbound = client.messages
        let watch = Task {
            for await message in inbound where message.topic == "lbs/device/demo_light" {
                let now = Date().timeIntervalSince1970
                if let object = (try? JSONSerialization.jsonObject(with: Data(message.payload))) as? [String: Any], let value = object["brightness"] as? Double {
                    stateArrivals.withLock { if $0[Int(value)] == nil { $0[Int(value)] = now } }
                }
            }
        }
        defer { watch.cancel() }
        try await client.subscribeAndWait(["lbs/device/demo_light"], qos: .atMostOnce, timeout: .seconds(5))
        // Past the start: 1,006 devices' first states and the bridge's first database are out of the way.
        try await Task.sleep(for: .seconds(5))
        var latencies: [Double] = []
        var mqttLatencies: [Double] = []
        for index in 0..<events {
            let value = 10 + index % 80
            _ = try await controller.send(["cmd": "events", "wait": 0])
            stateArrivals.withLock { $0.removeAll() }
            let sent = Date().timeIntervalSince1970
            client.publish("lbs/device/demo_light/set", "{\"brightness\":\(value)}", qos: .atMostOnce)
            let answer = try await controller.send(["cmd": "events", "wait": 2.0, "min": 1])
            let hit = (answer["events"] as? [[String: Any]] ?? []).first { ($0["value"] as? Double).map { Int($0) } == value || $0["value"] as? Int == value }
            if let arrived = hit?["t"] as? Double { latencies.append((arrived - sent) * 1000) }
            if let state = stateArrivals.withLock({ $0[value] }) { mqttLatencies.append((state - sent) * 1000) }

        }
        print(String(format: "homekit_bridge_set_to_mqtt_state: p50 %.2f ms, p99 %.2f ms (the same commands' state on MQTT)",
                     HomeKitBench.percentile(mqttLatencies, 0.5), HomeKitBench.percentile(mqttLatencies, 0.99)))
        try await Task.sleep(for: .seconds(3))
        let memory = rss(process.pid)
        await client.shutdown()
        return (latencies, memory, accessories.count)
    }
}
