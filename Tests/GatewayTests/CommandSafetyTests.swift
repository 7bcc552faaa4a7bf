import Cache
import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayModel
import GatewayTesting
import Logging
import Synchronization
import TestTraits
import Testing
import VendorKit

/// The command path's safety rules with a scripted vendor: a command whose outcome is unknown is
/// settled by reading the state back (never sent again blindly, never overtaken by an older copy),
/// newer commands supersede older waiting ones, lanes are bounded per device, and a command the
/// outbox cannot store is refused. The same paths run against the simulators in integration tests.
@Suite(.integration) struct CommandSafetyTests {
    struct Harness {
        let transport = RecordingTransport()
        let controller: GatewayController
        let vendor: ScriptedVendor
        let store: CacheStore?

        let journal: OutboxJournal?
        let persistence: CacheLink?

        init(configure: (inout GatewayConfig) -> Void = { _ in }, storage: TemporaryDirectory? = nil, journal useJournal: Bool = false) async throws {
            var config = GatewayConfig(mqtt: MQTTSettings(url: "mqtt://127.0.0.1"), vendors: [VendorSettings(type: "scripted", id: "sv")])
            config.commands.settleWindow = 3
            configure(&config)
            var persistence: CacheLink?
            if let storage {
                let store = try CacheStore(path: storage.file("gateway.sqlite"))
                self.store = store
                journal = useJournal ? try store.openOutboxJournal() : nil
                persistence = CacheLink(store: store, logger: Logger(label: "test"), journal: journal)
            } else {
                store = nil
                journal = nil
            }
            self.persistence = persistence
            controller = await GatewayController(config: config, transport: transport, logger: Logger(label: "test"), persistence: persistence)
            vendor = ScriptedVendor()
            await controller.register(vendor)
            await controller.handle(.inventory(vendorID: "sv", devices: vendor.devices))
            for device in vendor.devices {
                await controller.handle(.state(device.id, vendor.values(device.vendorDeviceID), observedAt: Date()))
            }
            await controller.connected()
        }

        func set(_ device: String, _ payload: String, reply: String) async {
            await controller.handle(InboundMessage(topic: "lbs/device/sv_\(device)/set", payload: Array(payload.utf8), responseTopic: reply))
        }

        func reply(_ topic: String) async -> [String: Any]? {
            guard await transport.wait(for: topic, timeout: .seconds(10)) != nil else { return nil }
            return transport.json(topic)
        }

        func code(_ topic: String) async -> String? {
            ((await reply(topic))?["error"] as? [String: Any])?["code"] as? String
        }
    }

    @Test func aTimedOutCommandIsSentOnceAndSettledByReadingTheStateBack() async throws {
        let h = try await Harness()
        h.vendor.setMode(.late(timeout: .milliseconds(200), applyAfter: .milliseconds(700)))
        await h.set("plug", #"{"state":"OFF"}"#, reply: "replies/1")
        let answer = try #require(await h.reply("replies/1"))
        #expect(answer["status"] as? String == "ok", "\(answer)")
        #expect(h.vendor.executed.count == 1, "sent \(h.vendor.executed.count) times")
        #expect(h.vendor.reads >= 1)
        #expect(h.transport.json("lbs/device/sv_plug")?["state"] as? String == "OFF")
    }

    @Test func anOlderCommandNeverOvertakesANewerOne() async throws {
        let h = try await Harness()
        // Slow backend: OFF times out but is applied later; then the backend is fast again and ON follows.
        h.vendor.setMode(.late(timeout: .milliseconds(200), applyAfter: .milliseconds(900)))
        await h.set("plug", #"{"state":"OFF"}"#, reply: "replies/off")
        try await waitUntil("OFF reached the vendor") { h.vendor.executed.count == 1 }
        h.vendor.setMode(.immediate)
        await h.set("plug", #"{"state":"ON"}"#, reply: "replies/on")
        #expect(await h.reply("replies/on")?["status"] as? String == "ok")
        // Whatever the late OFF does, it happened before ON was sent: the device ends ON.
        try await quietPeriod( .milliseconds(1200))
        #expect(h.vendor.values("plug")["state"] == .string("ON"))
        #expect(h.vendor.executed.map { $0.changes["state"] } == [.string("OFF"), .string("ON")])
    }

    @Test func aLockWhoseOutcomeStaysUnknownIsNeverSentAgain() async throws {
        let h = try await Harness { $0.commands.settleWindow = 0.5 }
        // Times out and is never applied (lost): the lock reads LOCKED all along.
        h.vendor.setMode(.late(timeout: .milliseconds(100), applyAfter: .seconds(3600)))
        await h.set("lock", "UNLOCK", reply: "replies/lock")
        #expect(await h.code("replies/lock") == "vendor_timeout")
        #expect(h.vendor.executed.count == 1)
        let message = (await h.reply("replies/lock")?["error"] as? [String: Any])?["message"] as? String
        #expect(message?.contains("unknown") == true, "\(message ?? "")")
    }

    @Test func newerCommandsSupersedeOlderWaitingOnes() async throws {
        let h = try await Harness()
        h.vendor.setMode(.gated)
        await h.set("plug", #"{"state":"OFF"}"#, reply: "replies/1")
        try await waitUntil("the first command is in flight") { h.vendor.executed.count == 1 }
        await h.set("plug", #"{"state":"ON"}"#, reply: "replies/2")
        await h.set("plug", #"{"state":"OFF","brightness":5}"#, reply: "replies/3")
        await h.set("plug", #"{"state":"ON"}"#, reply: "replies/4")
        h.vendor.release()
        #expect(await h.reply("replies/1")?["status"] as? String == "ok")
        #expect(await h.code("replies/2") == "superseded")
        // r/3 also sets `brightness`, which nothing newer sets: it runs, in order, before r/4.
        #expect(await h.reply("replies/3")?["status"] as? String == "ok")
        #expect(await h.reply("replies/4")?["status"] as? String == "ok")
        #expect(h.vendor.executed.map { $0.changes["state"] } == [.string("OFF"), .string("OFF"), .string("ON")])
        #expect(h.vendor.values("plug")["state"] == .string("ON"))
    }

    @Test func aFloodedDeviceIsRefusedAtOnceWithoutOutboxRowsAndOthersPass() async throws {
        let directory = try TemporaryDirectory()
        let h = try await Harness(configure: { $0.commands.maxQueuedPerDevice = 5 }, storage: directory)
        h.vendor.setMode(.gated)
        await h.set("plug", "OFF", reply: "replies/0")
        try await waitUntil("the first command is in flight") { h.vendor.executed.count == 1 }
        for index in 1..<8 { await h.set("plug", index % 2 == 0 ? "OFF" : "ON", reply: "replies/\(index)") }
        for index in 5..<8 { #expect(await h.code("replies/\(index)") == "queue_full") }
        // Another device's command is not stuck behind the flood (the lock is gated too: release it only).
        h.vendor.setMode(.immediate)
        await h.set("lock", "UNLOCK", reply: "replies/lock")
        #expect(await h.reply("replies/lock")?["status"] as? String == "ok")
        let health = try await requestHealth(h)
        let queues = try #require(health["queues"] as? [String: Any])
        #expect((queues["deepest"] as? [String: Any])?["sv_plug"] as? Double == 5)
        h.vendor.release()
        for index in 0..<5 { #expect(await h.reply("replies/\(index)")?["status"] != nil) }
        let store = try #require(h.store)
        try await waitUntil("the outbox settles") { try store.outboxCounts()[.pending, default: 0] == 0 }
        let counts = try store.outboxCounts()
        #expect(counts.values.reduce(0, +) == 6, "refused commands must not be stored: \(counts)")
    }

    @Test func aCommandTheOutboxCannotStoreIsRefusedAndNeverSent() async throws {
        let directory = try TemporaryDirectory()
        let h = try await Harness(storage: directory)
        try h.store?.close()
        await h.set("lock", "UNLOCK", reply: "replies/1")
        #expect(await h.code("replies/1") == "storage_unavailable")
        #expect(h.vendor.executed.isEmpty)
        #expect(h.transport.messages.contains { $0.topic == "lbs/bridge/event" && $0.payload.contains("storage_state_changed") })
        let health = try await requestHealth(h)
        #expect((health["storage"] as? [String: Any])?["state"] as? String == "error")
    }

    @Test func whenStorageFailsSendCarriesTheCommandOutUnstored() async throws {
        let directory = try TemporaryDirectory()
        let h = try await Harness(configure: { $0.commands.whenStorageFails = .send }, storage: directory)
        try h.store?.close()
        await h.set("plug", #"{"state":"OFF"}"#, reply: "replies/1")
        #expect(await h.reply("replies/1")?["status"] as? String == "ok")
        #expect(h.vendor.executed.count == 1)
    }

    @Test func concurrentGetsForOneDeviceAreCoalesced() async throws {
        let h = try await Harness()
        for index in 0..<200 {
            await h.controller.handle(InboundMessage(topic: "lbs/device/sv_plug/get", payload: [], responseTopic: "replies/g/\(index)"))
        }
        try await waitUntil("every /get answered", timeout: .seconds(10)) {
            (0..<200).allSatisfy { index in h.transport.messages.contains { $0.topic == "replies/g/\(index)" } }
        }
        #expect(h.vendor.refreshes <= 2, "\(h.vendor.refreshes) vendor calls for 200 /get")
    }

    @Test func refreshesOfAVendorThatReadsEverythingAtOnceShareOneCall() async throws {
        let h = try await Harness()
        h.vendor.script.withLock { $0.listRefresh = true }
        for index in 0..<100 {
            for device in ["plug", "lock"] {
                await h.controller.handle(InboundMessage(topic: "lbs/device/sv_\(device)/get", payload: [], responseTopic: "replies/g/\(device)/\(index)"))
            }
        }
        try await waitUntil("every /get answered", timeout: .seconds(10)) {
            (0..<100).allSatisfy { index in h.transport.messages.contains { $0.topic == "replies/g/lock/\(index)" } }
        }
        #expect(h.vendor.refreshes <= 2, "\(h.vendor.refreshes) vendor calls for 200 /get across two devices")
    }

    func requestHealth(_ h: Harness) async throws -> [String: Any] {
        h.transport.clear()
        await h.controller.handle(InboundMessage(topic: "lbs/bridge/request/health", payload: Array("{}".utf8)))
        let response = try #require(await h.transport.wait(for: "lbs/bridge/response/health"))
        let json = try #require(try JSONSerialization.jsonObject(with: Data(response.payload.utf8)) as? [String: Any])
        return try #require(json["data"] as? [String: Any])
    }
}
