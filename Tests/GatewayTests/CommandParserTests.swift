import Foundation
import CommandParsing
@testable import GatewayCore
@testable import LBSGatewayApp
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
        // Found by deploy/fuzz.sh against the old parser: Double("03") read a bare 03 as brightness 3.
        ("03", "brightness", .invalidPayload),
        ("03", "state", .invalidPayload),
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

    // MARK: Malformed payloads must never unlock

    /// Invisible or non-ASCII whitespace around UNLOCK: bare on /set, on /set/lock, quoted, and as a JSON value.
    @Test(arguments: ["\u{200B}", "\u{00A0}", "\u{3000}", "\u{2028}"])
    func unicodeWhitespaceAroundUnlockIsRejected(space: String) throws {
        let hex = String(space.unicodeScalars.first!.value, radix: 16, uppercase: true)
        for payload in [space + "UNLOCK", "UNLOCK" + space, " \(space)UNLOCK\(space)\n"] {
            for key in [nil, "lock"] as [String?] {
                let result = parse(payload, key: key, device: lock)
                #expect(code(result) == .invalidPayload, "\(payload.debugDescription) on \(key ?? "/set"): \(result)")
                // The reason names the invisible character.
                #expect(message(result)?.contains("U+" + String(repeating: "0", count: 4 - hex.count) + hex) == true, "\(message(result) ?? "")")
            }
            // As a JSON value or a quoted word: refused (invalid_json where the raw newline makes the string invalid).
            #expect([.invalidPayload, .invalidJSON].contains(code(parse(#"{"lock":"\#(payload)"}"#, device: lock))))
            #expect([.invalidPayload, .invalidJSON].contains(code(parse("\"\(payload)\"", device: lock))))
        }
    }

    /// `UNLOC\u{212A}`: the Kelvin sign case-folds to k, so Unicode-aware matching unlocked.
    @Test func kelvinSignIsNotK() {
        for payload in ["UNLOC\u{212A}", "unloc\u{212A}"] {
            #expect(code(parse(payload, device: lock)) == .invalidPayload)
            #expect(code(parse(payload, key: "lock", device: lock)) == .invalidPayload)
            #expect(code(parse(#"{"lock":"\#(payload)"}"#, device: lock)) == .invalidPayload)
        }
        #expect(code(parse(#"{"lock":"UNLOC\u212A"}"#, device: lock)) == .invalidPayload)
        #expect(code(parse(#""UNLOC\u212A""#, device: lock)) == .invalidPayload)
        #expect(message(parse("UNLOC\u{212A}", device: lock))?.contains("U+212A") == true)
        // The same rule for every word: the ligature ﬀ (U+FB00) upper-cases to FF in Unicode, "Oﬀ" is not OFF.
        #expect("O\u{FB00}".uppercased() == "OFF")
        #expect(code(parse("{\"state\":\"O\u{FB00}\"}")) == .invalidPayload)
        #expect(code(parse("O\u{FB00}", key: "state")) == .invalidPayload)
        #expect(code(parse("O\u{FB00}")) == .invalidPayload)
    }

    @Test func trailingCommaIsInvalidJSON() {
        let result = parse(#"{"lock":"UNLOCK",}"#, device: lock)
        #expect(code(result) == .invalidJSON)
        #expect(message(result)?.contains("trailing comma at byte 17") == true, "\(result)")
        // The 129 invalid ONs that ran the same way.
        for payload in [#"{"state":"ON",}"#, #"{"state":"ON",,}"#, #"{"state":"ON"} x"#, #"{"state":"ON" /* c */}"#, "{'state':'ON'}"] {
            #expect(code(parse(payload)) == .invalidJSON, "\(payload)")
        }
        #expect(code(parse(#"["ON",]"#, key: "state")) == .invalidJSON)
    }

    /// Python and Node read the last `lock` (LOCK), so an upstream filter saw something else than what ran.
    @Test func duplicateKeysAreRejected() {
        for payload in [#"{"lock":"UNLOCK","lock":"LOCK"}"#, #"{"lock":"LOCK","lock":"UNLOCK"}"#, #"{"lock":"UNLOCK","l\u006fck":"LOCK"}"#] {
            let result = parse(payload, device: lock)
            #expect(code(result) == .invalidJSON, "\(payload)")
            #expect(message(result)?.contains(#"duplicate key "lock""#) == true, "\(result)")
        }
    }

    /// `"0x1p3"` was read by strtod as 8.
    @Test func hexAndSpecialNumbersAreRejected() throws {
        for text in ["0x1p3", "0x10", "inf", "nan", "Infinity", "+40", "040", "4e", " 40\u{00A0}", "1_0"] {
            #expect(code(parse(#"{"brightness":"\#(text)"}"#)) == .invalidPayload, "string \(text)")
            #expect(code(parse(text, key: "brightness")) != nil, "bare \(text)")
        }
        let result = parse(#"{"brightness":"0x1p3"}"#)
        #expect(message(result)?.contains("0x1p3") == true)
        #expect(code(parse(#"{"brightness":0x1p3}"#)) == .invalidJSON)
        #expect(code(parse(#"{"brightness":NaN}"#)) == .invalidJSON)
        #expect(code(parse(#"{"brightness":+40}"#)) == .invalidJSON)
        // Plain decimals (documented) still work, as JSON numbers or strings.
        #expect(try parse(#"{"brightness":"40"}"#).get() == ["brightness": .number(40)])
        #expect(try parse(#"{"brightness":" 12.5 "}"#).get() == ["brightness": .number(12.5)])
        #expect(try parse("4e1", key: "brightness").get() == ["brightness": .number(40)])
        #expect(code(parse(#"{"brightness":"-3"}"#)) == .outOfRange)
    }

    @Test func deepNestingIsRejectedWithTheReason() {
        let array = String(repeating: "[", count: 500) + String(repeating: "]", count: 500)
        let object = String(repeating: #"{"lock":"#, count: 500) + #""UNLOCK""# + String(repeating: "}", count: 500)
        for (payload, key) in [(array, nil), (object, nil), (array, "lock"), (object, "lock")] as [(String, String?)] {
            let result = parse(payload, key: key, device: lock)
            #expect(code(result) == .invalidJSON)
            #expect(message(result)?.contains("nesting deeper than 32") == true, "\(result)")
        }
    }

    /// What stays accepted: ASCII case-insensitivity, ASCII whitespace, quoted words, JSON escapes.
    @Test func strictRulesKeepTheValidForms() throws {
        for payload in ["UNLOCK", "unlock", " \tUnLock\r\n", #""UNLOCK""#, #"{"lock":"unlock"}"#, #"{"lock":"\u0055NLOCK"}"#, "{\n\t\"lock\" : \"UNLOCK\"\r\n}"] {
            #expect(try parse(payload, device: lock).get() == ["lock": .string("UNLOCK")], "\(payload.debugDescription)")
        }
        #expect(try parse("unlock", key: "lock", device: lock).get() == ["lock": .string("UNLOCK")])
        #expect(try parse(#""LOCK""#, key: "lock", device: lock).get() == ["lock": .string("LOCK")])
        #expect(try parse(#"{"state":"on","brightness":"40"}"#).get() == ["state": .string("ON"), "brightness": .number(40)])
    }

    func message(_ result: Result<[String: StateValue], GatewayError>) -> String? {
        if case .failure(let error) = result { return error.message }
        return nil
    }

    // MARK: The fuzz corpus as regression tests

    /// Every input of the committed fuzz corpus (`Fuzz/corpus/command-parser`, run by deploy/fuzz.sh)
    /// also runs here: `valid-*` inputs are commands, everything else is refused for the lock, and an
    /// accepted lock command is exactly LOCK or UNLOCK from an ASCII-only payload.
    @Test func fuzzCorpusHoldsTheInvariants() throws {
        let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../Fuzz/corpus/command-parser").standardizedFileURL
        let names = try FileManager.default.contentsOfDirectory(atPath: corpus.path).sorted()
        #expect(names.count >= 40)
        let thermostat = Device(vendorID: "demo", vendorDeviceID: "t", name: "T", type: .thermostat, keys: ["target_temperature", "hvac_mode"])
        for name in names {
            let bytes = try [UInt8](Data(contentsOf: corpus.appendingPathComponent(name)))
            var accepted = false
            for (device, key) in [(lock, nil), (lock, "lock"), (light, nil), (light, "brightness"), (thermostat, nil)] as [(Device, String?)] {
                switch CommandParser.parse(payload: bytes, key: key, device: device, current: DeviceState()) {
                case .success(let changes):
                    accepted = true
                    #expect(!bytes.contains { $0 >= 0x80 }, "\(name) accepted with non-ASCII bytes")
                    if device == lock {
                        #expect(changes == ["lock": .string("LOCK")] || changes == ["lock": .string("UNLOCK")], "\(name): \(changes)")
                        #expect(name.hasPrefix("valid-"), "\(name) unlocked or locked the lock")
                    }
                case .failure(let error):
                    #expect(!error.message.isEmpty && !error.suggestion.isEmpty)
                }
            }
            #expect(accepted == name.hasPrefix("valid-"), "\(name): accepted \(accepted)")
        }
    }
}
