import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayModel
import GatewayTesting
import Logging
import Synchronization
import Testing
import VendorKit

/// Commands that arrive before their vendor has listed its devices (right after a start, or delivered by the
/// resumed session at an active/standby takeover) wait for that list instead of failing as `unknown_device`;
/// their TTL still counts from their arrival, and a vendor that never lists its devices fails them after one
/// poll interval.
@Suite struct EarlyCommandTests {
    /// The gateway's wall clock, moved by the test.
    final class WallClock: Sendable {
        let date = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
        func advance(_ seconds: TimeInterval) { date.withLock { $0 += seconds } }
    }

    struct Rig {
        let transport = RecordingTransport()
        let clock = ManualClock()
        let now = WallClock()
        let controller: GatewayController
        let vendor = ScriptedVendor()

        init() async {
            let config = GatewayConfig(mqtt: MQTTSettings(url: "mqtt://127.0.0.1"), vendors: [VendorSettings(type: "scripted", id: "sv")])
            let now = self.now
            controller = await GatewayController(config: config, transport: transport, logger: Logger(label: "test"),
                                                 clock: clock, now: { now.date.withLock { $0 } })
            await controller.register(vendor)
            await controller.connected()
        }

        func set(_ device: String, _ payload: String, reply: String) async {
            await controller.handle(InboundMessage(topic: "lbs/device/\(device)/set", payload: Array(payload.utf8), responseTopic: reply))
        }

        func listDevices() async {
            await controller.handle(.inventory(vendorID: "sv", devices: vendor.devices))
            for device in vendor.devices {
                await controller.handle(.state(device.id, vendor.values(device.vendorDeviceID), observedAt: Date()))
            }
        }

        func code(_ topic: String) async -> String? {
            guard await transport.wait(for: topic, timeout: .seconds(10)) != nil else { return nil }
            return (transport.json(topic)?["error"] as? [String: Any])?["code"] as? String
        }
    }

    @Test func aCommandBeforeTheInventoryRunsOnceTheDevicesAreListed() async throws {
        let rig = await Rig()
        await rig.set("sv_plug", #"{"brightness":40}"#, reply: "replies/early")
        await rig.set("sv_plug", #"{"brightness":60}"#, reply: "replies/later")
        #expect(rig.transport.json("replies/early") == nil, "held, not refused as unknown_device")
        await rig.listDevices()
        _ = await rig.transport.wait(for: "replies/later", timeout: .seconds(10))
        #expect(rig.transport.json("replies/later")?["status"] as? String == "ok")
        // In arrival order: the first is carried out or superseded by the second, never run after it.
        let executed = rig.vendor.executed.map { $0.changes["brightness"]?.number }
        #expect(executed.last == 60 && !executed.contains(nil), "\(executed)")
        let early = await rig.transport.wait(for: "replies/early", timeout: .seconds(10)).flatMap { _ in rig.transport.json("replies/early") }
        #expect(early?["status"] as? String == "ok" || (early?["error"] as? [String: Any])?["code"] as? String == "superseded", "\(early ?? [:])")
    }

    @Test func aLockCommandThatWaitedPastItsTTLIsExpiredNotRun() async throws {
        let rig = await Rig()
        await rig.set("sv_lock", #"{"lock":"UNLOCK"}"#, reply: "replies/unlock")
        rig.now.advance(11)  // locks have a 10 s TTL
        await rig.listDevices()
        #expect(await rig.code("replies/unlock") == "expired")
        #expect(rig.vendor.executed.isEmpty, "a stale unlock must never reach the lock")
    }

    @Test func aVendorThatNeverListsItsDevicesFailsThemAfterOnePollInterval() async throws {
        let rig = await Rig()
        await rig.set("sv_plug", #"{"state":"OFF"}"#, reply: "replies/waiting")
        #expect(rig.transport.json("replies/waiting") == nil)
        rig.clock.advance(by: await GatewayHub.availabilityGrace(nil))
        #expect(await rig.code("replies/waiting") == "unknown_device")
        // From then on, at once.
        await rig.set("sv_plug", #"{"state":"OFF"}"#, reply: "replies/after")
        #expect(rig.transport.json("replies/after").flatMap { ($0["error"] as? [String: Any])?["code"] as? String } == "unknown_device")
    }

    @Test func aDeviceOfNoConfiguredVendorFailsAtOnce() async throws {
        let rig = await Rig()
        await rig.set("other_plug", #"{"state":"OFF"}"#, reply: "replies/other")
        #expect(rig.transport.json("replies/other").flatMap { ($0["error"] as? [String: Any])?["code"] as? String } == "unknown_device")
    }
}
