import Foundation
import GatewayModel
import Testing

/// The cache's fast device reader must read exactly what the synthesized `Codable` wrote, and take nothing
/// JSONDecoder would refuse (the cache falls back to JSONDecoder when it returns nil).
@Suite struct DeviceCachedReadTests {
    static let devices: [Device] = {
        var renamed = Device(vendorID: "demo", vendorDeviceID: "x", name: "Renamed", type: .sensor, keys: [])
        renamed.id = DeviceID(validating: "demo_kept_as_stored") ?? renamed.id
        return [
            Device(vendorID: "demo", vendorDeviceID: "light", name: "Kitchen Light", type: .light, keys: ["state", "brightness"]),
            Device(vendorID: "hk", vendorDeviceID: "bridge_7", name: "Eve \"Energy\" ü", type: .plug, manufacturer: "Eve", model: "20EBO8301",
                   room: "Living Room", swVersion: "1.2.3", serialNumber: "SN-1", writableKeys: ["state"], keys: ["state", "power", "energy"],
                   eventTypes: ["press", "double_press"], viaDevice: DeviceID(validating: "hk_bridge"),
                   limits: ["ev_current": KeyLimits(min: 6, max: 40), "fan_mode": KeyLimits(options: ["low", "high"]), "x": KeyLimits()]),
            Device(vendorID: "matter", vendorDeviceID: "4-1", name: "", type: .thermostat, writableKeys: [], keys: [], eventTypes: []),
            renamed,
        ]
    }()

    @Test(arguments: devices) func readsWhatCodableWrote(device: Device) throws {
        let data = try JSONEncoder().encode(device)
        let parsed = try JSONValue.parse(Array(data)).get()
        let fast = try #require(Device(codableJSON: parsed))
        #expect(fast == (try JSONDecoder().decode(Device.self, from: data)))
        #expect(fast == device)
    }

    @Test func nullsAreAbsentAndUnknownKeysIgnoredAsByTheDecoder() throws {
        let text = #"{"id":"demo_a","vendorID":"demo","vendorDeviceID":"a","name":"A","type":"sensor","keys":["temperature"],"#
            + #""room":null,"writableKeys":null,"limits":{"temperature":{"min":null,"max":30}},"future":[1,2]}"#
        let fast = try #require(Device(codableJSON: try JSONValue.parse(Array(text.utf8)).get()))
        #expect(fast == (try JSONDecoder().decode(Device.self, from: Data(text.utf8))))
        #expect(fast.room == nil && fast.writableKeys == nil && fast.limits?["temperature"] == KeyLimits(max: 30))
    }

    /// Each document JSONDecoder refuses: the fast reader returns nil too (never a device the decoder would not give).
    @Test(arguments: [
        #"{"vendorID":"demo","vendorDeviceID":"a","name":"A","type":"sensor","keys":[]}"#,                        // no id
        #"{"id":"Demo A","vendorID":"demo","vendorDeviceID":"a","name":"A","type":"sensor","keys":[]}"#,          // not a slug
        #"{"id":"demo_a","vendorID":"demo","vendorDeviceID":"a","name":"A","type":"toaster","keys":[]}"#,         // unknown type
        #"{"id":"demo_a","vendorID":"demo","vendorDeviceID":"a","name":"A","type":"sensor","keys":[1]}"#,         // key not text
        #"{"id":"demo_a","vendorID":"demo","vendorDeviceID":"a","name":"A","type":"sensor","keys":[],"room":7}"#, // room not text
        #"{"id":"demo_a","vendorID":"demo","vendorDeviceID":"a","name":"A","type":"sensor","keys":[],"limits":{"t":{"min":"1"}}}"#,
        #"{"id":"demo_a","vendorID":"demo","vendorDeviceID":"a","name":"A","type":"sensor","keys":[],"viaDevice":"Not Slug"}"#,
        #"["demo_a"]"#,
    ])
    func refusesWhatTheDecoderRefuses(text: String) throws {
        #expect(throws: (any Error).self) { try JSONDecoder().decode(Device.self, from: Data(text.utf8)) }
        let parsed = try JSONValue.parse(Array(text.utf8)).get()
        #expect(Device(codableJSON: parsed) == nil)
    }
}
