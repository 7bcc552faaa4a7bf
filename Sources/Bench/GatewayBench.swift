import CMosquitto
import Foundation
import GatewayCore
import LBSGatewayApp
import GatewayModel
import GatewayTesting
import Logging
import MQTT
import Synchronization
import VendorDemo
import VendorKit

/// Counts messages a subscriber receives, to measure delivered throughput the same way for both sides.
final class DeliveryCounter: Sendable {
    let client: MQTTClient
    private final class Tally: Sendable {
        let state = Mutex<(count: Int, first: ContinuousClock.Instant?, last: ContinuousClock.Instant?)>((0, nil, nil))
    }
    private let tally = Tally()

    init(url: String, filter: String) async throws {
        var configuration = try MQTTConfiguration(url: url, clientID: "bench-sub-\(UInt32.random(in: 0...UInt32.max))")
        configuration.inboundBufferSize = 1_000_000
        client = try MQTTClient(configuration: configuration)
        let messages = client.messages
        let tally = self.tally
        Task {
            for await _ in messages {
                let now = ContinuousClock.now
                tally.state.withLock { $0.count += 1; if $0.first == nil { $0.first = now }; $0.last = now }
            }
        }
        client.start()
        try await waitUntil("subscriber connected", timeout: .seconds(10)) { client.isConnected }
        try await client.subscribeAndWait([filter], qos: .atMostOnce, timeout: .seconds(5))
    }

    func reset() { tally.state.withLock { $0 = (0, nil, nil) } }
    var count: Int { tally.state.withLock { $0.count } }
    var last: ContinuousClock.Instant? { tally.state.withLock { $0.last } }

    /// Waits until `expected` messages arrived or nothing arrived for 2 s.
    func waitFor(_ expected: Int) async -> Int {
        var seen = -1
        var quietSince = ContinuousClock.now
        while count < expected {
            let now = count
            if now != seen { seen = now; quietSince = .now }
            if ContinuousClock.now - quietSince > .seconds(2) { break }
            try? await Task.sleep(for: .milliseconds(2))
        }
        return count
    }
}

/// A separate `mosquitto_sub` process that exits after `count` live (non-retained) messages, so
/// counting never competes with the publisher for this process's threads.
struct ExternalCounter {
    let process: ProcessRunner
    let directory: TemporaryDirectory

    static func start(port: Int, filter: String, count: Int) async throws -> ExternalCounter {
        let directory = try TemporaryDirectory(prefix: "lbs-bench-sub")
        let process = try ProcessRunner(
            executable: "mosquitto_sub",
            arguments: ["-h", "127.0.0.1", "-p", "\(port)", "-t", filter, "-q", "0", "-R", "-C", "\(count)", "-V", "mqttv5"],
            outputDirectory: directory.path, name: "sub")
        // Let it subscribe before anything is published.
        try await Task.sleep(for: .milliseconds(700))
        return ExternalCounter(process: process, directory: directory)
    }

    /// When the subscriber had all its messages (nil: it did not get them in time).
    func finished(timeout: Duration) async -> ContinuousClock.Instant? {
        let status = await process.waitForExit(timeout: timeout)
        guard status == .exited(0) else {
            _ = await process.stop(grace: .milliseconds(100))
            return nil
        }
        return .now
    }

    /// Messages the subscriber printed (read before its directory is removed).
    func received() -> Int { process.standardOutput().split(separator: "\n").count }

    func remove() { directory.remove() }

    func receivedAndRemove() -> Int {
        defer { remove() }
        return received()
    }
}

struct ThroughputResult {
    var messages: Int
    var delivered: Int
    var seconds: Double
    var rate: Double { Double(delivered) / seconds }
}

enum GatewayBench {
    /// The ceiling: a plain libmosquitto publish loop (loop_start thread, QoS 0, retained, one topic per device).
    static func plainLoop(broker: MosquittoBroker, devices: Int, rounds: Int, payloadBytes: Int) async throws -> ThroughputResult {
        let total = devices * rounds
        let counter = try await ExternalCounter.start(port: broker.port, filter: "plain/#", count: total)
        mosquitto_lib_init()
        guard let mosq = mosquitto_new("bench-plain", true, nil) else { throw TestSupportError("mosquitto_new failed") }
        mosquitto_int_option(mosq, MOSQ_OPT_PROTOCOL_VERSION, Int32(MQTT_PROTOCOL_V5))
        guard mosquitto_connect(mosq, "127.0.0.1", Int32(broker.port), 30) == MOSQ_ERR_SUCCESS.rawValue else { throw TestSupportError("connect failed") }
        mosquitto_loop_start(mosq)
        let payload = Array(String(repeating: "x", count: payloadBytes).utf8)
        let topics = (0..<devices).map { "plain/device/sim_\($0)" }
        let start = ContinuousClock.now
        for round in 0..<rounds {
            for index in 0..<devices {
                _ = payload.withUnsafeBytes { raw in
                    mosquitto_publish(mosq, nil, topics[index], Int32(raw.count), raw.baseAddress, 0, true)
                }
            }
            _ = round
        }
        let end = await counter.finished(timeout: .seconds(60))
        mosquitto_disconnect(mosq)
        mosquitto_loop_stop(mosq, false)
        mosquitto_destroy(mosq)
        return ThroughputResult(messages: total, delivered: end == nil ? counter.receivedAndRemove() : { counter.remove(); return total }(), seconds: ((end ?? .now) - start).inSeconds)
    }

    /// The same loop through our `MQTTClient` (own network thread): separates the wrapper's cost
    /// from the gateway's.
    static func wrapperLoop(broker: MosquittoBroker, devices: Int, rounds: Int, payloadBytes: Int) async throws -> ThroughputResult {
        let total = devices * rounds
        let counter = try await ExternalCounter.start(port: broker.port, filter: "wrapped/#", count: total)
        let client = try MQTTClient(configuration: MQTTConfiguration(url: broker.url, clientID: "bench-wrapped"))
        client.start()
        try await waitUntil("wrapper connected", timeout: .seconds(10)) { client.isConnected }
        let payload = Array(String(repeating: "x", count: payloadBytes).utf8)
        let topics = (0..<devices).map { "wrapped/device/sim_\($0)" }
        let start = ContinuousClock.now
        for _ in 0..<rounds {
            for index in 0..<devices { client.publish(topics[index], payload, qos: .atMostOnce, retain: true) }
        }
        let end = await counter.finished(timeout: .seconds(60))
        await client.shutdown()
        return ThroughputResult(messages: total, delivered: end == nil ? counter.receivedAndRemove() : { counter.remove(); return total }(), seconds: ((end ?? .now) - start).inSeconds)
    }

    /// A gateway wired like `lbs-gateway run`, with the demo vendor's handle so the bench can drive it.
    struct InProcessGateway {
        let client: MQTTClient
        let controller: GatewayController
        let vendor: DemoVendor
        let sink: VendorEventSink
        let tasks: [Task<Void, Never>]

        static func start(broker: MosquittoBroker, extraDevices: Int) async throws -> InProcessGateway {
            // The raw publish rate is measured: states are not held back for a slow broker here (see `lbs-bench overload`).
            let yaml = "mqtt: {url: \(broker.url), client_id: bench-gw, max_backlog: 10000000}\nhomeassistant: {enabled: true}\nvendors: [{type: demo, id: demo, poll_interval: 86400, devices: \(extraDevices)}]"
            let config = try ConfigLoader.parse(yaml: yaml).get()
            var logger = Logger(label: "bench")
            logger.logLevel = .error
            let client = try MQTTClient(configuration: MQTTTransport.configuration(for: config))
            let controller = await GatewayController(config: config, transport: MQTTTransport(client: client), logger: logger)
            let events = EventInbox<VendorEvent>(capacity: 10_000_000)
            let sink = events.sink
            let vendor = DemoVendor(instanceID: "demo", options: DemoOptions(pollInterval: .seconds(86_400), extraDevices: extraDevices),
                                    sink: sink)
            await controller.register(vendor)
            let connections = client.connectionEvents
            let inbound = client.messages
            let tasks: [Task<Void, Never>] = [
                Task {
                    for await event in connections {
                        switch event {
                        case .connected: await controller.connected()
                        // A healthy bench never loses its broker: say so when it does, it explains lost round trips.
                        case .disconnected(let error): FileHandle.standardError.write(Data("gateway disconnected: \(error)\n".utf8))
                        default: break
                        }
                    }
                },
                Task {
                    for await message in inbound {
                        await controller.handle(InboundMessage(topic: message.topic, payload: message.payload, retain: message.retain,
                                                               responseTopic: message.responseTopic, correlationData: message.correlationData))
                    }
                },
                Task { await controller.consume(events) },
                Task { try? await vendor.run() },
            ]
            client.start()
            try await waitUntil("gateway connected", timeout: .seconds(10)) { client.isConnected }
            return InProcessGateway(client: client, controller: controller, vendor: vendor, sink: sink, tasks: tasks)
        }

        func stop() async {
            for task in tasks { task.cancel() }
            await client.shutdown()
        }
    }

    static func gatewayPublishing(broker: MosquittoBroker, extraDevices: Int, rounds: Int) async throws -> (ThroughputResult, Int) {
        let gateway = try await InProcessGateway.start(broker: broker, extraDevices: extraDevices)
        let deviceCount = gateway.vendor.devices.count
        // Let the start-up publish (discovery, first states, all QoS 1) drain and be acknowledged before measuring:
        // on a default mosquitto its PUBACKs wait for Nagle, and a burst that meets it still unacknowledged must
        // publish each device's next state at QoS 1 behind it (the order users rely on), which is not the rate asked.
        try await Task.sleep(for: .seconds(2))
        try await waitUntil("the start-up publish acknowledged", timeout: .seconds(60)) {
            let marks = gateway.client.acknowledgementMarks
            return gateway.client.outgoingBacklog == 0 && marks.acknowledged == marks.handedOver
        }
        // The vendor's simulation runs first, so only the gateway's path is timed:
        // vendor event → normalized state → JSON snapshot → libmosquitto.
        let updates = gateway.vendor.simulate(rounds: rounds)
        // The gateway publishes a state only when a value changed (the demo's slow readings, a thermostat at its
        // target, may not move within a simulated millisecond): expect exactly the updates that change something.
        var current: [DeviceID: DeviceState] = [:]
        for id in await gateway.controller.deviceIDs { current[id] = await gateway.controller.state(of: id) }
        var total = 0
        for case .state(let id, let values, let observedAt) in updates
        where current[id, default: DeviceState()].mergeReportingChange(values, observedAt: observedAt) {
            total += 1
        }
        let counter = try await ExternalCounter.start(port: broker.port, filter: "lbs/device/+", count: total)
        let start = ContinuousClock.now
        for event in updates { gateway.sink.send(event) }
        let end = await counter.finished(timeout: .seconds(60))
        await gateway.stop()
        return (ThroughputResult(messages: total, delivered: end == nil ? counter.receivedAndRemove() : { counter.remove(); return total }(), seconds: ((end ?? .now) - start).inSeconds), deviceCount)
    }

    /// `/set` → new state on the device topic, measured by a separate MQTT client that publishes the `/set` and
    /// subscribes to the state with `qos` (QoS 1: the broker, the gateway and the client each PUBACK on the way).
    static func setLatency(broker: MosquittoBroker, extraDevices: Int, iterations: Int,
                           qos: MQTTQoS = .atMostOnce) async throws -> [Double] {
        let gateway = try await InProcessGateway.start(broker: broker, extraDevices: extraDevices)
        try await Task.sleep(for: .seconds(2))
        var configuration = try MQTTConfiguration(url: broker.url, clientID: "bench-rtt-qos\(qos.rawValue)")
        configuration.inboundBufferSize = 100_000
        let client = try MQTTClient(configuration: configuration)
        let (seen, continuation) = AsyncStream.makeStream(of: [UInt8].self, bufferingPolicy: .unbounded)
        let messages = client.messages
        // The gateway's events, to say why a round trip was lost.
        let events = Mutex<[String]>([])
        let forward = Task {
            for await message in messages {
                if message.topic == "lbs/device/demo_light" { continuation.yield(message.payload) }
                else { events.withLock { $0 = Array($0.suffix(4)) + ["\(message.topic) \(String(decoding: message.payload, as: UTF8.self))"] } }
            }
        }
        client.start()
        try await waitUntil("latency client connected", timeout: .seconds(10)) { client.isConnected }
        // Not `lbs/device/demo_light/+`: that matches the client's own `/set`, and a default mosquitto (Nagle on) then
        // holds the state behind that echo until the client's delayed ACK, 40 ms on every round trip.
        try await client.subscribeAndWait(["lbs/device/demo_light", "lbs/bridge/event", "lbs/device/demo_light/command_error",
                                           "lbs/device/demo_light/event", "lbs/device/demo_light/availability"], qos: qos, timeout: .seconds(5))
        var iterator = seen.makeAsyncIterator()
        // Skip the retained snapshot.
        _ = await iterator.next()
        var samples: [Double] = []
        samples.reserveCapacity(iterations)
        // A round trip that never completes must not hang the bench: after 5 s a watchdog wakes the wait with an
        // empty payload and the round trip is reported as lost.
        let started = Mutex<ContinuousClock.Instant?>(nil)
        let watchdog = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(500))
                if let since = started.withLock({ $0 }), ContinuousClock.now - since > .seconds(5) { continuation.yield([]) }
            }
        }
        var lost = 0
        for index in 0..<iterations {
            let brightness = index % 2 == 0 ? 10 + index % 80 : 90 - index % 80
            let needle = Array("\"brightness\":\(brightness),".utf8)
            let start = ContinuousClock.now
            started.withLock { $0 = start }
            client.publish("lbs/device/demo_light/set", Array("{\"brightness\":\(brightness)}".utf8), qos: qos)
            var last: [UInt8] = []
            while let payload = await iterator.next() {
                if payload.isEmpty {
                    lost += 1
                    FileHandle.standardError.write(Data("round trip \(index) (brightness \(brightness)) lost; last state: \(String(decoding: last, as: UTF8.self)); last events: \(events.withLock { $0 })\n".utf8))
                    break
                }
                last = payload
                if payload.firstRange(of: needle) != nil {
                    samples.append((ContinuousClock.now - start).inSeconds * 1000)
                    break
                }
            }
            started.withLock { $0 = nil }
        }
        watchdog.cancel()
        if lost > 0 { FileHandle.standardError.write(Data("\(lost) of \(iterations) round trips lost\n".utf8)) }
        forward.cancel()
        await client.shutdown()
        await gateway.stop()
        return samples.sorted()
    }

    static func percentile(_ sorted: [Double], _ p: Double) -> Double {
        guard !sorted.isEmpty else { return .nan }
        return sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)]
    }

    /// Resident memory of the real `lbs-gateway` process with `devices: N`, after it settled.
    /// `httpVendor`: also an Awair Element polled over its Local API every second (lbs-sim replaying a recorded monitor;
    /// run from the repository root), so libcurl, its libraries and a vendor's HTTP path are in, as in any gateway with
    /// an HTTP vendor.
    static func residentMemory(broker: MosquittoBroker, extraDevices: Int, settle: Duration, storage: Bool = false,
                               httpVendor: Bool = false) async throws -> (rssKB: Int, peakKB: Int) {
        let directory = try TemporaryDirectory(prefix: "lbs-bench")
        // LBS_BENCH_GATEWAY measures another build (e.g. the static one the README recommends for edge boxes).
        let binary = ProcessInfo.processInfo.environment["LBS_BENCH_GATEWAY"]
            ?? URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("lbs-gateway").path
        let config = directory.file("config.yaml")
        let cache = storage ? "storage: {path: \(directory.file("cache.sqlite"))}\n" : ""
        var http = ""
        var simulator: ProcessRunner?
        if httpVendor {
            let port = try freeLoopbackPort()
            let sim = try ProcessRunner(executable: PeerBench.binary("lbs-sim", variable: "LBS_BENCH_SIM"),
                                        arguments: ["awair", "--local", "awair-elem-1419e1.local", "--port", "\(port)",
                                                    "--fixtures", "Tests/Fixtures/awair"],
                                        outputDirectory: directory.path, name: "sim")
            simulator = sim
            try await waitUntil("lbs-sim listening", timeout: .seconds(10)) { loopbackPortAcceptsConnections(port) }
            http = ", {type: awair_local, id: air, url: \"http://127.0.0.1:\(port)\", poll_interval: 1}"
        }
        defer { if let simulator { Task { _ = await simulator.stop() } } }
        try "mqtt: {url: \(broker.url), client_id: bench-rss}\nlog_level: error\n\(cache)vendors: [{type: demo, id: demo, poll_interval: 1, devices: \(extraDevices)}\(http)]\n"
            .write(toFile: config, atomically: true, encoding: .utf8)
        evictFromPageCache(binary)
        let process = try ProcessRunner(executable: binary, arguments: ["run", "--config", config], outputDirectory: directory.path, name: "gateway")
        try await Task.sleep(for: settle)
        let status = (try? String(contentsOfFile: "/proc/\(process.pid)/status", encoding: .utf8)) ?? ""
        func field(_ name: String) -> Int {
            status.split(separator: "\n").first { $0.hasPrefix(name) }.flatMap { Int($0.split(separator: " ").dropFirst().first { !$0.isEmpty } ?? "") } ?? -1
        }
        let result = (field("VmRSS:"), field("VmHWM:"))
        _ = await process.stop()
        directory.remove()
        return result
    }
}

/// Drops a file's cached pages (those no process maps), so the gateway starts from disk as an installed one does. A
/// binary the linker just wrote (and `llvm-objcopy` read) sits in the page cache in large folios, and mapping its code
/// then maps whole folios: ~1 MB more resident memory than the same file read from disk.
func evictFromPageCache(_ path: String) {
    let descriptor = open(path, O_RDONLY)
    guard descriptor >= 0 else { return }
    _ = posix_fadvise(descriptor, 0, 0, Int32(POSIX_FADV_DONTNEED))
    close(descriptor)
}

/// A transport that only counts what it is handed, so `logicOnly` measures the gateway's own work per state.
final class CountingTransport: MessageTransport {
    let published = Atomic<Int>(0)
    func publish(_ topic: String, _ payload: String, qos: Int, retain: Bool, correlationData: [UInt8]?) {
        published.add(1, ordering: .relaxed)
    }
    func publish(_ topic: String, utf8 payload: [UInt8], qos: Int, retain: Bool) {
        published.add(1, ordering: .relaxed)
    }
    func publishAndWait(_ topic: String, _ payload: String, retain: Bool, timeout: Duration) async -> Bool {
        publish(topic, payload, qos: 1, retain: retain, correlationData: nil)
        return true
    }
    func subscribe(_ filters: [String]) {}
}

extension GatewayBench {
    /// The publish path without the network: vendor event → normalized state → extensions → JSON snapshot, handed to
    /// a transport that only counts. Nanoseconds per state update, and how many messages it produced.
    static func logicOnly(extraDevices: Int, rounds: Int) async throws -> (nanosecondsPerUpdate: Double, updates: Int, published: Int) {
        let yaml = "mqtt: {url: \"mqtt://127.0.0.1:1\", client_id: bench-logic, max_backlog: 10000000}\nhomeassistant: {enabled: true}\nvendors: [{type: demo, id: demo, poll_interval: 86400, devices: \(extraDevices)}]"
        let config = try ConfigLoader.parse(yaml: yaml).get()
        var logger = Logger(label: "bench")
        logger.logLevel = .error
        let transport = CountingTransport()
        let controller = await GatewayController(config: config, transport: transport, logger: logger)
        let startup = EventInbox<VendorEvent>(capacity: 10_000_000)
        let vendor = DemoVendor(instanceID: "demo", options: DemoOptions(pollInterval: .seconds(86_400), extraDevices: extraDevices),
                                sink: startup.sink)
        await controller.register(vendor)
        let running = Task { try? await vendor.run() }
        let consumer = Task { await controller.consume(startup) }
        await controller.connected()
        try await waitUntil("the demo's devices known", timeout: .seconds(30)) { await controller.deviceIDs.count >= vendor.devices.count }
        let updates = vendor.simulate(rounds: rounds)
        running.cancel()
        startup.finish()
        await consumer.value
        let inbox = EventInbox<VendorEvent>(capacity: 10_000_000)
        for event in updates { inbox.send(event) }
        inbox.finish()
        let before = transport.published.load(ordering: .relaxed)
        let start = ContinuousClock.now
        await controller.consume(inbox)
        let elapsed = ContinuousClock.now - start
        let published = transport.published.load(ordering: .relaxed) - before
        return (elapsed.inSeconds * 1e9 / Double(max(1, updates.count)), updates.count, published)
    }
}

