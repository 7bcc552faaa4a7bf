import Foundation
import GatewayModel
import Testing

/// The outbox row's JSON is written directly (`DeviceCommand.outboxJSON`); `JSONDecoder` reads it back after a
/// restart, so it must read back the very command, as `JSONEncoder`'s text did.
@Suite struct OutboxJSONTests {
    static let commands: [DeviceCommand] = [
        DeviceCommand(id: "0f424337-35b7-47a6-87e6-3acd93fe57b7", device: DeviceID(vendorInstance: "house", vendorDeviceID: "lights-kitchen"), vendorID: "house",
                      vendorDeviceID: "lights-kitchen", changes: ["state": .string("ON")],
                      issuedAt: Date(timeIntervalSinceReferenceDate: 786_000_000.123_456_7), expiresAt: Date(timeIntervalSinceReferenceDate: 786_000_030.000_001)),
        DeviceCommand(id: "c-\"quoted\"\\ \u{1}", device: DeviceID(vendorInstance: "demo", vendorDeviceID: "light"), vendorID: "démo ✓", vendorDeviceID: "light/1?x=ü",
                      changes: ["brightness": .number(0.000_012_5), "color_temp": .number(-1e21), "on": .bool(false),
                                "color": .object(["x": .number(0.3127), "y": .number(1 / 3), "name": .string("😀\n")])],
                      issuedAt: Date(timeIntervalSince1970: 0), expiresAt: Date(timeIntervalSince1970: 1_800_000_000.5)),
        DeviceCommand(id: "", device: DeviceID(vendorInstance: "v", vendorDeviceID: "d"), vendorID: "v", vendorDeviceID: "", changes: [:],
                      issuedAt: Date(timeIntervalSinceReferenceDate: -1), expiresAt: Date(timeIntervalSinceReferenceDate: 123_456_789_012.5)),
    ]

    @Test func readsBackAsTheSameCommand() throws {
        for command in Self.commands {
            let json = try #require(command.outboxJSON)
            let decoded = try JSONDecoder().decode(DeviceCommand.self, from: Data(json.utf8))
            #expect(decoded == command, "\(json)")
            // What JSONEncoder wrote reads back to the same command too (rows stored by earlier versions).
            let encoded = try JSONDecoder().decode(DeviceCommand.self, from: JSONEncoder().encode(command))
            #expect(encoded == decoded)
        }
    }

    @Test func aNumberJSONCannotHoldIsRefusedAsJSONEncoderRefusesIt() {
        var command = Self.commands[0]
        command.changes = ["brightness": .number(.nan)]
        #expect(command.outboxJSON == nil)
        #expect((try? JSONEncoder().encode(command)) == nil)
        command.changes = ["nested": .object(["x": .number(.infinity)])]
        #expect(command.outboxJSON == nil)
    }
}
