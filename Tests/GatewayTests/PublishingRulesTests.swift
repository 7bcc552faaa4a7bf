import Cache
import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayModel
import GatewayTesting
import Logging
import Synchronization
import Testing
import VendorKit

/// What the gateway publishes and when: unchanged state only on the heartbeat, counters never lower,
/// no device online before its vendor answered, replies never inside the gateway's or Home Assistant's
/// namespace, bounded inventories, and every drop reported.
@Suite struct PublishingRulesTests {
    /// Wall-clock time the tests move by hand.
    final class TestTime: Sendable {
        private let current = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
        var now: Date { current.withLock { $0 } }
        func advance(_ seconds: TimeInterval) { current.withLock { $0 = $0.addingTimeInterval(seconds) } }
    }

    @GatewayActor static func controller(
        _ transport: RecordingTransport, time: TestTime = TestTime(), persistence: CacheLink? = nil,
        configure: (inout GatewayConfig) -> Void = { _ in }
    ) -> GatewayController {
        var config = GatewayConfig(mqtt: MQTTSettings(url: "mqtt://127.0.0.1"), vendors: [VendorSettings(type: "scripted", id: "sv")])
        configure(&config)
        return GatewayController(config: config, transport: transport, logger: Logger(label: "test"), persistence: persistence, now: { time.now })
    }

    static let meter = Device(vendorID: "sv", vendorDeviceID: "meter", name: "Meter", type: .energyMeter, keys: ["solar_power", "solar_energy"])

    func states(_ transport: RecordingTransport) -> [String] {
        transport.messages.filter { $0.topic == "lbs/device/sv_meter" }.map(\.payload)
    }

    @Test func unchangedStateIsPublishedOnlyOnTheHeartbeat() async throws {
        let transport = RecordingTransport()
        let time = TestTime()
        let controller = await Self.controller(transport, time: time) { $0.mqtt.stateHeartbeat = 60 }
        await controller.handle(.inventory(vendorID: "sv", devices: [Self.meter]))
        let reading: [String: StateValue] = ["solar_power": .number(1200), "solar_energy": .number(10)]
        for _ in 0..<30 {
            await controller.handle(.state(Self.meter.id, reading, observedAt: time.now))
            time.advance(2)
        }
        #expect(states(transport).count == 1, "30 identical polls gave \(states(transport).count) messages")
        time.advance(2)
        await controller.handle(.state(Self.meter.id, reading, observedAt: time.now))
        #expect(states(transport).count == 2, "the heartbeat refreshes last_seen")
        await controller.handle(.state(Self.meter.id, ["solar_power": .number(1300)], observedAt: time.now))
        #expect(states(transport).count == 3, "a change goes out at once")
    }

    @Test func countersNeverRunBackwardsButRealResetsPass() async throws {
        let transport = RecordingTransport()
        let controller = await Self.controller(transport)
        await controller.handle(.inventory(vendorID: "sv", devices: [Self.meter]))
        await controller.handle(.state(Self.meter.id, ["solar_energy": .number(4821.395)], observedAt: Date()))
        // A restart from a fixed value, slightly lower: held at the last value.
        await controller.handle(.state(Self.meter.id, ["solar_energy": .number(4821.2)], observedAt: Date()))
        #expect(await controller.state(of: Self.meter.id)?.values["solar_energy"] == .number(4821.395))
        #expect(!states(transport).contains { $0.contains("4821.2") })
        // A meter that really reset (≥ 10 % lower): published, Home Assistant starts a new cycle.
        await controller.handle(.state(Self.meter.id, ["solar_energy": .number(3)], observedAt: Date()))
        #expect(await controller.state(of: Self.meter.id)?.values["solar_energy"] == .number(3))
    }

    @Test func devicesStayOfflineUntilTheirVendorAnswered() async throws {
        let directory = try TemporaryDirectory()
        let store = try CacheStore(path: directory.file("gateway.sqlite"))
        defer { try? store.close() }
        guard let stored = CacheLink.storedDevice(Self.meter, now: Date()) else { Issue.record("cannot encode"); return }
        try store.upsertDevices([stored])
        try store.saveStates([StoredState(deviceID: Self.meter.id.rawValue, json: #"{"solar_power":5}"#, sourceTime: 1, updatedAt: 1)])
        let transport = RecordingTransport()
        let controller = await Self.controller(transport, persistence: CacheLink(store: store, logger: Logger(label: "test")))
        await controller.restoreFromCache()
        await controller.connected()
        // A vendor reports `ok` before its first call: neither it nor its devices may look live yet.
        await controller.handle(.health(VendorHealth(vendorID: "sv", state: .ok)))
        let availability = "lbs/device/sv_meter/availability"
        #expect(transport.messages.filter { $0.topic == availability }.allSatisfy { $0.payload.contains("offline") })
        #expect(transport.json("lbs/bridge/vendors/sv")?["state"] as? String == "starting")
        #expect(transport.json("lbs/device/sv_meter")?["stale"] as? Bool == true)
        // Its first call fails: down, still offline, never online in between.
        var down = VendorHealth(vendorID: "sv", state: .down, breaker: "open")
        down.lastError = .vendorUnreachable(vendor: "sv", detail: "connection refused")
        await controller.handle(.health(down))
        #expect(!transport.messages.contains { $0.topic == availability && $0.payload.contains("online") })
        #expect(transport.json("lbs/bridge/vendors/sv")?["state"] as? String == "down")
        // It answers: online.
        await controller.handle(.health(VendorHealth(vendorID: "sv", state: .ok, lastSuccess: Date())))
        #expect(transport.last(availability)?.payload.contains("online") == true)
    }

    @Test func nextAttemptMovingRepublishesVendorHealth() async throws {
        let transport = RecordingTransport()
        let controller = await Self.controller(transport)
        var health = VendorHealth(vendorID: "sv", state: .down, breaker: "open", lastError: .vendorUnreachable(vendor: "sv", detail: "x"),
                                  nextAttempt: Date(timeIntervalSince1970: 1_800_000_030))
        await controller.handle(.health(health))
        health.nextAttempt = Date(timeIntervalSince1970: 1_800_000_090)
        await controller.handle(.health(health))
        let published = transport.messages.filter { $0.topic == "lbs/bridge/vendors/sv" }
        #expect(published.count == 2)
        #expect(published.last?.payload.contains("2027-01-15T08:01:30.000Z") == true, "\(published.last?.payload ?? "")")
    }

    @Test func responseTopicsInsideOwnOrHomeAssistantNamespaceAreRefused() async throws {
        let transport = RecordingTransport()
        let controller = await Self.controller(transport)
        await controller.handle(.inventory(vendorID: "sv", devices: [Self.meter]))
        transport.clear()
        let refused = ["lbs/bridge/state", "lbs/bridge/devices", "lbs/device/sv_meter/availability", "homeassistant/status",
                       "homeassistant/device/lbs_sv_meter/config", "lbs", String(repeating: "r", count: 300)]
        for topic in refused {
            await controller.handle(InboundMessage(topic: "lbs/bridge/request/health", payload: Array("{}".utf8), responseTopic: topic))
        }
        for topic in refused { #expect(transport.last(topic) == nil, "answered on \(topic)") }
        let events = transport.messages.filter { $0.topic == "lbs/bridge/event" && $0.payload.contains("response_refused") }
        #expect(events.count == refused.count)
        #expect(events.first?.payload.contains("response_topic_refused") == true)
        await controller.handle(InboundMessage(topic: "lbs/bridge/request/health", payload: Array("{}".utf8), responseTopic: "replies/my"))
        #expect(transport.last("replies/my") != nil)
        await controller.handle(InboundMessage(topic: "lbs/bridge/request/health", payload: Array("{}".utf8)))
        let health = try #require(transport.json("lbs/bridge/response/health")?["data"] as? [String: Any])
        #expect((health["dropped"] as? [String: Any])?["refused_responses"] as? Double == Double(refused.count))
    }

    @Test func anAllowListLimitsResponseTopics() async throws {
        let transport = RecordingTransport()
        let controller = await Self.controller(transport) { $0.mqtt.responseTopicPrefixes = ["app/"] }
        await controller.handle(InboundMessage(topic: "lbs/bridge/request/info", payload: [], responseTopic: "replies/x"))
        await controller.handle(InboundMessage(topic: "lbs/bridge/request/info", payload: [], responseTopic: "app/x"))
        #expect(transport.last("replies/x") == nil, "the list replaces the default replies/")
        #expect(transport.last("app/x") != nil)
    }

    /// A v5 request must not turn the gateway into a deputy that publishes onto another system's command topic.
    @Test func byDefaultRepliesGoOnlyUnderReplies() async throws {
        let transport = RecordingTransport()
        let controller = await Self.controller(transport)
        transport.clear()
        await controller.handle(InboundMessage(topic: "lbs/bridge/request/info", payload: Array(#"{"transaction":"UNLOCK"}"#.utf8),
                                               responseTopic: "zigbee2mqtt/front_door/set"))
        await controller.handle(InboundMessage(topic: "lbs/bridge/request/info", payload: [], responseTopic: "replies/x"))
        #expect(transport.last("zigbee2mqtt/front_door/set") == nil)
        #expect(transport.messages.contains { $0.topic == "lbs/bridge/event" && $0.payload.contains("response_refused") && $0.payload.contains("zigbee2mqtt/front_door/set") })
        #expect(transport.last("replies/x") != nil)
        // An explicit empty list is the old behaviour: any topic outside the gateway's and Home Assistant's.
        let open = await Self.controller(transport) { $0.mqtt.responseTopicPrefixes = [] }
        await open.handle(InboundMessage(topic: "lbs/bridge/request/info", payload: [], responseTopic: "app/y"))
        #expect(transport.last("app/y") != nil)
    }

    @Test func aLongTransactionIsRefusedNotEchoed() async throws {
        let transport = RecordingTransport()
        let controller = await Self.controller(transport)
        let long = String(repeating: "t", count: 5000)
        await controller.handle(InboundMessage(topic: "lbs/bridge/request/info", payload: Array(#"{"transaction":"\#(long)"}"#.utf8)))
        let response = try #require(transport.last("lbs/bridge/response/info"))
        #expect(!response.payload.contains(long))
        #expect(response.payload.contains("error"))
    }

    @Test func aHugeInventoryIsCappedWithAnError() async throws {
        let transport = RecordingTransport()
        let controller = await Self.controller(transport) { $0.vendors[0].maxDevices = 3 }
        let devices = (0..<10).map { Device(vendorID: "sv", vendorDeviceID: "d\($0)", name: "D\($0)", type: .sensor, keys: ["temperature"]) }
        await controller.handle(.inventory(vendorID: "sv", devices: devices))
        #expect(await controller.deviceIDs.count == 3)
        let events = transport.messages.filter { $0.topic == "lbs/bridge/event" && $0.payload.contains("inventory_truncated") }
        #expect(events.count == 1)
        await controller.handle(.inventory(vendorID: "sv", devices: devices))
        #expect(transport.messages.filter { $0.topic == "lbs/bridge/event" && $0.payload.contains("inventory_truncated") }.count == 1, "reported once")
    }

    @Test func droppedVendorEventsAreCountedAndShown() async throws {
        let transport = RecordingTransport()
        let controller = await Self.controller(transport)
        let inbox = EventInbox<VendorEvent>(capacity: 2)
        await controller.attach(inbox)
        for _ in 0..<5 { inbox.send(.inventory(vendorID: "sv", devices: [])) }
        await controller.handle(InboundMessage(topic: "lbs/bridge/request/health", payload: []))
        let health = try #require(transport.json("lbs/bridge/response/health")?["data"] as? [String: Any])
        #expect((health["dropped"] as? [String: Any])?["vendor_events"] as? Double == 3)
        await controller.housekeeping()
        let info = try #require(transport.json("lbs/bridge/info"))
        #expect((info["dropped"] as? [String: Any])?["vendor_events"] as? Double == 3)
    }

    @Test func droppedInboundAndOfflineMessagesAreShownInHealthAndInfo() async throws {
        let transport = RecordingTransport()
        let controller = await Self.controller(transport)
        await controller.connected()
        transport.setStats(TransportStats(droppedInbound: 11_481, droppedOffline: 7))
        await controller.housekeeping()
        let info = try #require(transport.json("lbs/bridge/info")?["dropped"] as? [String: Any])
        #expect(info["inbound_messages"] as? Double == 11_481)
        #expect(info["offline_publishes"] as? Double == 7)
        await controller.handle(InboundMessage(topic: "lbs/bridge/request/health", payload: []))
        let health = try #require(transport.json("lbs/bridge/response/health")?["data"] as? [String: Any])
        #expect((health["dropped"] as? [String: Any])?["inbound_messages"] as? Double == 11_481)
    }

    @Test func theRetainedSweepEndsWithAnUnsubscribe() async throws {
        let transport = RecordingTransport()
        let controller = await Self.controller(transport)
        await controller.connected()
        #expect(transport.subscriptions.contains("lbs/device/+/availability"))
        await controller.endRetainedSweep()
        #expect(transport.unsubscriptions.contains("lbs/device/+/availability"))
    }
}
