import ConsciousnessSimulator
import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayModel
import GatewayTesting
import Logging
import MQTT
import Synchronization
import TestTraits
import Testing
import VendorKit

/// On a fresh start the consciousness lock's and garage's states reached a subscriber before their
/// discovery and availability, and every state before `bridge/devices`. The documented first-message order
/// ("Order of messages" in mqtt-topics.md) must hold for devices that arrive after the first connect: a vendor
/// that answers late, and a device that appears mid-run.
@Suite(.integration, .serialized, .timeLimit(.minutes(2))) struct LateDeviceOrderTests {
    /// Per device: its discovery and availability, and a `bridge/devices` that lists it, before its first state.
    static func orderProblems(_ messages: [MQTTMessage], devices: [String]) -> [String] {
        var problems: [String] = []
        for device in devices {
            let stateTopic = "lbs/device/\(device)"
            guard let state = messages.firstIndex(where: { $0.topic == stateTopic && !$0.payload.isEmpty }) else {
                problems.append("\(device): no state")
                continue
            }
            let discovery = messages.firstIndex { $0.topic.hasPrefix("homeassistant/") && $0.topic.contains("/lbs_\(device)/") && !$0.payload.isEmpty }
            let availability = messages.firstIndex { $0.topic == stateTopic + "/availability" && !$0.payload.isEmpty }
            let listed = messages.firstIndex { $0.topic == "lbs/bridge/devices" && $0.text.contains("\"\(device)\"") }
            for (name, index) in [("discovery", discovery), ("availability", availability), ("bridge/devices", listed)] {
                if let index, index < state { continue }
                problems.append("\(device): \(name) at \(index.map(String.init) ?? "never"), first state at \(state)")
            }
        }
        return problems
    }

    /// True once every device's state, availability, discovery and a `bridge/devices` listing it arrived.
    static func allArrived(_ watcher: TestMQTTClient, devices: [String]) -> Bool {
        let received = watcher.received
        let listing = received.last { $0.topic == "lbs/bridge/devices" }?.text ?? ""
        return devices.allSatisfy { device in
            listing.contains("\"\(device)\"")
                && received.contains { $0.topic == "lbs/device/\(device)" }
                && received.contains { $0.topic == "lbs/device/\(device)/availability" }
                && received.contains { $0.topic.hasPrefix("homeassistant/") && $0.topic.contains("/lbs_\(device)/") }
        }
    }

    static let seeded = ["thermostat-main", "lights-kitchen", "camera-front-door", "sensor-hallway-motion", "speaker-living-room",
                         "lock-front-door", "garage-door-main"].map { "house_\($0)" }

    /// Home Assistant's way (v3.1.1, QoS 1) and a plain `mosquitto_sub -t '#'` (QoS 0).
    @Test(arguments: zip([MQTTProtocolVersion.v311, .v5], [MQTTQoS.atLeastOnce, .atMostOnce]))
    func lateVendorAndMidRunDevicesKeepTheDocumentedOrder(version: MQTTProtocolVersion, subscription: MQTTQoS) async throws {
        let broker = try await MosquittoBroker.started()
        let simulator = ConsciousnessSimulator(configuration: .init(password: "backend-secret"))
        // A house of many devices: their first messages are a burst of well over the 64 QoS 1 messages in flight.
        for number in 1...150 { simulator.addDevice(id: "light-\(number)") }
        _ = try await simulator.start()
        // The first device list answers only after the gateway's first connect: the vendor's devices arrive late.
        simulator.inject(.slow(delay: .milliseconds(1500)), times: 1, matching: FaultMatch(pathPrefix: "/api/v1/devices", method: "GET"))
        let directory = try TemporaryDirectory()
        try "backend-secret\n".write(toFile: directory.file("backend-password"), atomically: true, encoding: .utf8)
        // Subscribed before the gateway starts: it sees every message in the order the broker passes them on.
        let watcher = try await TestMQTTClient.connect(to: broker.url, protocolVersion: version)
        try await watcher.subscribe("#", qos: subscription)
        let vendors = """
              - {type: consciousness, id: house, url: "\(await simulator.baseURL)", username: admin, password_file: backend-password, poll_interval: 0.3, timeout: 3}
            """
        let gateway = try await GatewayHarness.start(broker: broker, directory: directory, vendors: vendors)
        defer { Task { await gateway.stop(); await simulator.stop(); await watcher.shutdown(); await broker.stop() } }
        try await waitUntil("the seeded devices' first messages", timeout: .seconds(15)) { Self.allArrived(watcher, devices: Self.seeded) }
        // Two devices appear while the gateway runs, a lock and a garage door among them.
        simulator.addDevice(id: "lock-back-door", type: "smart_lock", properties: [("locked", .bool(false))])
        simulator.addDevice(id: "garage-door-side", type: "garage_door", properties: [("open", .bool(true))])
        let added = ["house_lock-back-door", "house_garage-door-side"]
        try await waitUntil("the new devices' first messages", timeout: .seconds(15)) { Self.allArrived(watcher, devices: added) }
        let problems = Self.orderProblems(watcher.received, devices: Self.seeded + added)
        #expect(problems.isEmpty, "\(problems)")
    }

    @Test func devicesThatAnsweredBeforeTheFirstConnectKeepTheDocumentedOrder() async throws {
        let broker = try await MosquittoBroker.started()
        // The gateway reaches the broker only through this proxy, shut at first: the vendor answers before CONNACK.
        let proxy = try TCPProxy(upstreamPort: broker.port)
        proxy.setAccepting(false)
        let simulator = ConsciousnessSimulator(configuration: .init(password: "backend-secret"))
        for number in 1...150 { simulator.addDevice(id: "light-\(number)") }
        _ = try await simulator.start()
        let directory = try TemporaryDirectory()
        try "backend-secret\n".write(toFile: directory.file("backend-password"), atomically: true, encoding: .utf8)
        let watcher = try await TestMQTTClient.connect(to: broker.url)
        try await watcher.subscribe("#")
        let vendors = """
              - {type: consciousness, id: house, url: "\(await simulator.baseURL)", username: admin, password_file: backend-password, poll_interval: 0.3, timeout: 3}
            """
        let gateway = try await GatewayHarness.start(broker: broker, directory: directory, vendors: vendors, brokerURL: proxy.url)
        defer { Task { await gateway.stop(); await simulator.stop(); await watcher.shutdown(); proxy.close(); await broker.stop() } }
        try await waitUntil("a few polls before the broker is reachable", timeout: .seconds(10)) {
            simulator.counters.requestsByRoute["GET /api/v1/devices", default: 0] >= 3
        }
        proxy.setAccepting(true)
        try await waitUntil("the devices' first messages", timeout: .seconds(15)) { Self.allArrived(watcher, devices: Self.seeded) }
        let problems = Self.orderProblems(watcher.received, devices: Self.seeded)
        #expect(problems.isEmpty, "\(problems)")
    }
}

/// libmosquitto's outgoing order, without a broker: QoS 1 publishes beyond the in-flight window wait for PUBACKs,
/// QoS 0 goes to the socket at once (so it overtakes them). `wire` is the order the broker receives.
final class WindowedTransport: MessageTransport {
    struct Sent: Sendable {
        var topic: String
        var payload: String
        var qos: Int
    }

    private struct Pipe {
        var wire: [Sent] = []
        var inFlight = 0
        var queued: [Sent] = []
        var connected = true
        var handedOver: UInt64 = 0
        var acknowledged: UInt64 = 0
    }

    private let pipe = Mutex(Pipe())
    let window: Int

    init(window: Int) {
        self.window = window
    }

    var wire: [Sent] { pipe.withLock { $0.wire } }
    var outgoingBacklog: Int { pipe.withLock { $0.inFlight + $0.queued.count } }
    var acknowledgementMarks: (handedOver: UInt64, acknowledged: UInt64) { pipe.withLock { ($0.handedOver, $0.acknowledged) } }
    var isConnected: Bool { pipe.withLock { $0.connected } }
    func setConnected(_ connected: Bool) { pipe.withLock { $0.connected = connected } }

    func publish(_ topic: String, _ payload: String, qos: Int, retain: Bool, correlationData: [UInt8]?) {
        let sent = Sent(topic: topic, payload: payload, qos: qos)
        pipe.withLock { pipe in
            if qos != 0 { pipe.handedOver += 1 }
            if qos == 0 {
                pipe.wire.append(sent)
            } else if pipe.inFlight < window {
                pipe.wire.append(sent)
                pipe.inFlight += 1
            } else {
                pipe.queued.append(sent)
            }
        }
    }

    func publishAndWait(_ topic: String, _ payload: String, retain: Bool, timeout: Duration) async -> Bool {
        publish(topic, payload, qos: 1, retain: retain, correlationData: nil)
        return true
    }

    func subscribe(_ filters: [String]) {}

    /// The broker acknowledges everything in flight, window by window, until nothing waits.
    func acknowledgeAll() {
        pipe.withLock { pipe in
            pipe.inFlight = 0
            while !pipe.queued.isEmpty {
                let next = pipe.queued.prefix(window)
                pipe.queued.removeFirst(next.count)
                pipe.wire.append(contentsOf: next)
            }
            pipe.acknowledged = pipe.handedOver
        }
    }
}

@Suite(.integration) struct BusyConnectionOrderTests {
    static let meter = Device(vendorID: "sv", vendorDeviceID: "meter", name: "Meter", type: .energyMeter, room: "Garage",
                              keys: ["solar_power", "temperature"])
    static let plug = Device(vendorID: "sv", vendorDeviceID: "plug", name: "Plug", type: .plug, keys: ["state", "power"])

    @GatewayActor static func controller(_ transport: WindowedTransport) -> GatewayController {
        var config = GatewayConfig(mqtt: MQTTSettings(url: "mqtt://127.0.0.1"), vendors: [VendorSettings(type: "scripted", id: "sv")])
        config.homeAssistant.enabled = true
        return GatewayController(config: config, transport: transport, logger: Logger(label: "test"))
    }

    /// Per device: discovery, availability and a `bridge/devices` listing it reach the broker before its first state,
    /// and its states arrive in the order they were reported.
    static func problems(_ wire: [WindowedTransport.Sent], devices: [Device]) -> [String] {
        var problems: [String] = []
        for device in devices {
            let topic = "lbs/device/\(device.id.rawValue)"
            guard let state = wire.firstIndex(where: { $0.topic == topic }) else {
                problems.append("\(device.id): no state")
                continue
            }
            let checks: [(String, Int?)] = [
                ("discovery", wire.firstIndex { $0.topic.hasPrefix("homeassistant/") && $0.topic.contains("lbs_\(device.id.rawValue)") }),
                ("availability", wire.firstIndex { $0.topic == topic + "/availability" }),
                ("bridge/devices", wire.firstIndex { $0.topic == "lbs/bridge/devices" && $0.payload.contains("\"\(device.id.rawValue)\"") }),
            ]
            for (name, index) in checks where index.map({ $0 > state }) ?? true {
                problems.append("\(device.id): \(name) at \(index.map(String.init) ?? "never"), first state at \(state)")
            }
        }
        return problems
    }

    @Test func statesNeverOvertakeTheQoS1MessagesBeforeThemOnABusyConnection() async throws {
        let transport = WindowedTransport(window: 4)
        let controller = await Self.controller(transport)
        await controller.connected()
        // The connection is busy (the connect burst is not acknowledged yet) when the vendor answers late.
        await controller.handle(.inventory(vendorID: "sv", devices: [Self.meter, Self.plug]))
        await controller.handle(.state(Self.meter.id, ["solar_power": .number(10), "temperature": .number(21)], observedAt: Date()))
        await controller.handle(.state(Self.plug.id, ["state": .string("ON"), "power": .number(5)], observedAt: Date()))
        await controller.handle(.state(Self.plug.id, ["state": .string("OFF"), "power": .number(0)], observedAt: Date().addingTimeInterval(1)))
        transport.acknowledgeAll()
        let wire = transport.wire
        #expect(Self.problems(wire, devices: [Self.meter, Self.plug]).isEmpty, "\(Self.problems(wire, devices: [Self.meter, Self.plug]))")
        let plugStates = wire.filter { $0.topic == "lbs/device/sv_plug" }.map(\.payload)
        #expect(plugStates.last?.contains("\"OFF\"") == true, "the newer state reaches the broker last: \(plugStates)")
    }

    /// The old rule (QoS 1 while anything at all waited in the connection) sent a whole burst of states at QoS 1,
    /// which paced it by PUBACKs: a third of the throughput of QoS 0.
    @Test func onceADevicesAnnouncementsAreAcknowledgedItsStatesGoAtQoS0OnABusyConnection() async throws {
        let transport = WindowedTransport(window: 4)
        let controller = await Self.controller(transport)
        await controller.connected()
        await controller.handle(.inventory(vendorID: "sv", devices: [Self.meter, Self.plug]))
        await controller.handle(.state(Self.plug.id, ["state": .string("ON"), "power": .number(5)], observedAt: Date()))
        await controller.handle(.state(Self.plug.id, ["state": .string("OFF"), "power": .number(0)], observedAt: Date().addingTimeInterval(1)))
        transport.acknowledgeAll()
        // Another device's announcements keep the connection busy: they concern the plug's states not at all.
        await controller.handle(.state(Self.meter.id, ["solar_power": .number(10), "temperature": .number(21)], observedAt: Date()))
        #expect(transport.outgoingBacklog > 0)
        await controller.handle(.state(Self.plug.id, ["state": .string("ON"), "power": .number(7)], observedAt: Date().addingTimeInterval(2)))
        let plugStates = transport.wire.filter { $0.topic == "lbs/device/sv_plug" }
        #expect(plugStates.map(\.qos) == [1, 1, 0], "\(plugStates.map { ($0.payload, $0.qos) })")
        // The meter's first state follows its announcements at QoS 1, and so does its next until that one is acknowledged.
        await controller.handle(.state(Self.meter.id, ["solar_power": .number(12), "temperature": .number(21)], observedAt: Date().addingTimeInterval(3)))
        transport.acknowledgeAll()
        await controller.handle(.state(Self.meter.id, ["solar_power": .number(14), "temperature": .number(21)], observedAt: Date().addingTimeInterval(4)))
        let meterStates = transport.wire.filter { $0.topic == "lbs/device/sv_meter" }
        #expect(meterStates.map(\.qos) == [1, 1, 0], "\(meterStates.map { ($0.payload, $0.qos) })")
        #expect(Self.problems(transport.wire, devices: [Self.meter, Self.plug]).isEmpty)
    }

    @Test func statesArePublishedOnlyWhenConnectedAndThenBehindTheirDiscovery() async throws {
        let transport = WindowedTransport(window: 4)
        transport.setConnected(false)
        let controller = await Self.controller(transport)
        // The vendor answers before the first CONNACK: its states are not queued ahead of the connect's republish.
        await controller.handle(.inventory(vendorID: "sv", devices: [Self.meter]))
        await controller.handle(.state(Self.meter.id, ["solar_power": .number(10), "temperature": .number(21)], observedAt: Date()))
        #expect(!transport.wire.contains { $0.topic == "lbs/device/sv_meter" })
        transport.setConnected(true)
        await controller.connected()
        transport.acknowledgeAll()
        #expect(Self.problems(transport.wire, devices: [Self.meter]).isEmpty, "\(Self.problems(transport.wire, devices: [Self.meter]))")
    }
}
