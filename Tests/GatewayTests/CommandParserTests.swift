import Foundation
@testable import Gateway
import GatewayModel
import Testing

@Suite struct CommandParserTests {
    let light = Device(vendorID: "demo", vendorDeviceID: "light", name: "L", type: .light, keys: ["state", "brightness", "color_temp_kelvin"])
    let lock = Device(vendorID: "demo", vendorDeviceID: "lock", name: "Lk", type: .lock, keys: ["lock", "battery"])

    func parse(_ text: String, key: String? = nil, device: Device? = nil, state: DeviceState = DeviceState()) -> Result<[String: StateValue], GatewayError> {
        CommandParser.parse(payload: Array(text.utf8), key: key, device: device ?? light, current: state)
    }

    func code(_ result: Result<[String: StateValue], GatewayError>) -> GatewayError.Code? {
        if case .failure(let error) = result { return error.code }
        return nil
    }

    @Test func jsonObjectBareWordsAndKeyTopics() throws {
        #expect(try parse(#"{"state":"ON","brightness":40}"#).get() == ["state": .string("ON"), "brightness": .number(40)])
        #expect(try parse("on").get() == ["state": .string("ON")])
        #expect(try parse("40", key: "brightness").get() == ["brightness": .number(40)])
        #expect(try parse("OFF", key: "state").get() == ["state": .string("OFF")])
        #expect(try parse("UNLOCK", device: lock).get() == ["lock": .string("UNLOCK")])
        #expect(try parse("TOGGLE", state: DeviceState(values: ["state": .string("ON")])).get() == ["state": .string("OFF")])
        // Home Assistant's JSON light sends color_temp in Kelvin (or mireds from old clients).
        #expect(try parse(#"{"color_temp":4000}"#).get() == ["color_temp_kelvin": .number(4000)])
        #expect(try parse(#"{"color_temp":250}"#).get() == ["color_temp_kelvin": .number(4000)])
    }

    @Test(arguments: [
        ("{\"state\":", nil, GatewayError.Code.invalidJSON),
        ("[1,2]", nil, .invalidPayload),
        ("MAYBE", nil, .invalidPayload),
        ("", nil, .invalidPayload),
        ("{}", nil, .invalidPayload),
        ("{\"colour\":1}", nil, .unknownKey),
        ("{\"brightness\":\"bright\"}", nil, .invalidPayload),
        ("{\"brightness\":140}", nil, .outOfRange),
        ("{\"brightness\":-1}", nil, .outOfRange),
        ("{\"state\":true}", nil, .invalidPayload),
        ("{\"state\":\"DIM\"}", nil, .invalidPayload),
        ("abc", "brightness", .invalidPayload),
        ("1e400", "brightness", .outOfRange),
        ("5", "hue", .unknownKey),
    ] as [(String, String?, GatewayError.Code)])
    func badPayloadsAreRejectedWithTheirCode(payload: String, key: String?, expected: GatewayError.Code) {
        #expect(code(parse(payload, key: key)) == expected)
    }

    @Test func invalidUTF8AndReadOnlyKeys() {
        let bytes: [UInt8] = [0x7B, 0xFF, 0xFE, 0x7D]
        #expect(code(CommandParser.parse(payload: bytes, key: nil, device: light, current: DeviceState())) == .invalidUTF8)
        #expect(code(parse(#"{"battery":50}"#, device: lock)) == .readOnlyKey)
        #expect(code(parse(#"{"lock":"OPEN"}"#, device: lock)) == .invalidPayload)
    }
}
