import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayModel
import Testing

/// End to end: the payloads that unlocked `demo_lock` go through the controller and the
/// demo vendor, each ends in `command_failed` with its code, and the lock stays LOCKED.
@Suite struct StrictCommandTests {
    @Test func malformedPayloadsNeverUnlockTheDemoLock() async throws {
        let h = await ControllerTests.Harness()
        let lockID = DeviceID(vendorInstance: "demo", vendorDeviceID: "lock")
        #expect(await h.controller.state(of: lockID)?["lock"] == .string("LOCKED"))
        h.transport.clear()

        let set = "lbs/device/demo_lock/set", setLock = "lbs/device/demo_lock/set/lock"
        var cases: [(topic: String, payload: String, code: String, reason: String)] = []
        for space in ["\u{200B}", "\u{00A0}", "\u{3000}", "\u{2028}"] {
            let name = "U+" + String(format: "%04X", space.unicodeScalars.first!.value)
            for topic in [set, setLock] {
                cases.append((topic, space + "UNLOCK", "invalid_payload", name))
                cases.append((topic, "UNLOCK" + space, "invalid_payload", name))
            }
        }
        cases += [
            (set, "UNLOC\u{212A}", "invalid_payload", "U+212A"),
            (setLock, "UNLOC\u{212A}", "invalid_payload", "U+212A"),
            (set, #"{"lock":"UNLOC\u212A"}"#, "invalid_payload", "U+212A"),
            (set, "{\"lock\":\"UNLOC\u{212A}\"}", "invalid_payload", "U+212A"),
            (set, #"{"lock":"UNLOCK",}"#, "invalid_json", "trailing comma at byte 17"),
            (set, #"{"lock":"UNLOCK","lock":"LOCK"}"#, "invalid_json", #"duplicate key \"lock\""#),
            (set, String(repeating: "[", count: 500) + String(repeating: "]", count: 500), "invalid_json", "nesting deeper than 32"),
            (set, String(repeating: #"{"lock":"#, count: 500) + #""UNLOCK""# + String(repeating: "}", count: 500), "invalid_json", "nesting deeper than 32"),
        ]
        for (index, item) in cases.enumerated() {
            let replyTopic = "replies/lock/\(index)"
            await h.send(item.topic, item.payload, responseTopic: replyTopic)
            let reply = try #require(await h.transport.wait(for: replyTopic), "no reply for \(item.payload.debugDescription)")
            #expect(reply.payload.contains(#""status":"error""#) && reply.payload.contains(item.code),
                    "\(item.payload.debugDescription) on \(item.topic): \(reply.payload)")
            #expect(reply.payload.contains(item.reason), "\(item.payload.debugDescription): \(reply.payload)")
            let event = h.transport.messages.last { $0.topic == "lbs/bridge/event" && $0.payload.contains(item.code) }
            #expect(event?.payload.contains("command_failed") == true)
        }

        // A valid LOCK runs after anything queued before it for this device (one lane per device), so once
        // it is answered every earlier command has finished: none of them may have unlocked.
        await h.send(set, "LOCK", responseTopic: "replies/lock/barrier")
        let barrier = try #require(await h.transport.wait(for: "replies/lock/barrier"))
        #expect(barrier.payload.contains(#""status":"ok""#))
        let unlocked = h.transport.messages.filter { $0.topic == "lbs/device/demo_lock" && $0.payload.contains("UNLOCK") }
        #expect(unlocked.isEmpty, "\(unlocked.map(\.payload))")
        #expect(await h.controller.state(of: lockID)?["lock"] == .string("LOCKED"))
    }

    /// `{"brightness":"0x1p3"}` set brightness 8 (strtod reads hex floats).
    @Test func hexBrightnessIsRejected() async throws {
        let h = await ControllerTests.Harness()
        let lightID = DeviceID(vendorInstance: "demo", vendorDeviceID: "light")
        let before = await h.controller.state(of: lightID)?["brightness"]
        h.transport.clear()
        await h.send("lbs/device/demo_light/set", #"{"brightness":"0x1p3"}"#, responseTopic: "replies/hex")
        await h.send("lbs/device/demo_light/set/brightness", "0x1p3", responseTopic: "replies/hex-bare")
        for topic in ["replies/hex", "replies/hex-bare"] {
            let reply = try #require(await h.transport.wait(for: topic))
            #expect(reply.payload.contains(#""status":"error""#) && reply.payload.contains("invalid_payload") && reply.payload.contains("0x1p3"),
                    "\(reply.payload)")
        }
        await h.send("lbs/device/demo_light/set", #"{"brightness":"40"}"#, responseTopic: "replies/decimal")
        let ok = try #require(await h.transport.wait(for: "replies/decimal"))
        #expect(ok.payload.contains(#""status":"ok""#))
        let eights = h.transport.messages.filter { $0.topic == "lbs/device/demo_light" && $0.payload.contains(#""brightness":8,"#) }
        #expect(eights.isEmpty)
        #expect(before != .number(8))
        #expect(await h.controller.state(of: lightID)?["brightness"] == .number(40))
    }
}
