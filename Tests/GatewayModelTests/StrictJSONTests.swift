import Foundation
import GatewayModel
import Testing

/// The strict RFC 8259 parser every inbound JSON goes through.
@Suite struct StrictJSONTests {
    func parse(_ text: String) -> Result<JSONValue, JSONSyntaxError> { StrictJSON.parse(Array(text.utf8)) }

    func reason(_ text: String) -> String? {
        if case .failure(let error) = parse(text) { return error.description }
        return nil
    }

    @Test func acceptsRFC8259Documents() throws {
        let text = #" {"a":[1,-0.5,2e3,1E-2,0,-0],"b":{"c":null,"d":true,"e":false},"s":"x\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00é","":""} "#
        let value = try parse(text).get()
        #expect(value["a"] == .array([.number(1), .number(-0.5), .number(2000), .number(0.01), .number(0), .number(0)]))
        #expect(value["b"] == .object(["c": .null, "d": .bool(true), "e": .bool(false)]))
        #expect(value["s"] == .string("x\"\\/\u{08}\u{0C}\n\r\té😀é"))
        #expect(value[""] == .string(""))
        #expect(try parse("\"top\"").get() == .string("top"))
        #expect(try parse("\t\r\n 42 \n").get() == .number(42))
        #expect(try parse("[]").get() == .array([]))
        #expect(try parse("{}").get() == .object([:]))
        // JSON allows escaped NUL and any non-surrogate scalar.
        #expect(try parse(#""\u0000\uFFFF""#).get() == .string("\u{0}\u{FFFF}"))
        // Overflowing numbers are JSON numbers; range checks happen later (`out_of_range`).
        #expect(try parse("1e400").get() == .number(.infinity))
    }

    @Test(arguments: [
        // The payloads that once got through.
        (#"{"lock":"UNLOCK",}"#, "trailing comma at byte 17"),
        (#"{"lock":"UNLOCK","lock":"LOCK"}"#, #"duplicate key "lock" at byte 18"#),
        ("[1,2,]", "trailing comma at byte 5"),
        // Numbers: JSON grammar only.
        (#"{"brightness":0x1p3}"#, "invalid number (only decimal digits"),
        ("+1", "a number cannot start with '+'"),
        ("01", "leading zeros are not allowed"),
        ("-", "a digit must follow '-'"),
        ("1.", "a digit must follow the decimal point"),
        (".5", "unexpected '.' where a value was expected"),
        ("1e", "the exponent needs digits"),
        ("NaN", "NaN and Infinity are not JSON numbers"),
        ("Infinity", "NaN and Infinity are not JSON numbers"),
        ("-Infinity", "NaN and Infinity are not JSON numbers at byte 1"),
        ("[1.5.2]", "invalid number"),
        (String(repeating: "1", count: 300), "number longer than 256 characters at byte 1"),
        // Strings and escapes.
        ("'UNLOCK'", "strings must use double quotes"),
        (#"{'a':1}"#, "keys must use double quotes"),
        ("{a:1}", "expected a quoted key, found 'a' at byte 2"),
        (#""\x""#, #"invalid escape '\x' at byte 2"#),
        (#""\u12""#, #"\u needs four hex digits"#),
        (#""\ud83d""#, #"unpaired surrogate \uD83D at byte 2"#),
        (#""\ud83d\u0041""#, #"unpaired surrogate \uD83D"#),
        (#""\ude00""#, #"unpaired surrogate \uDE00"#),
        ("\"a\tb\"", "control character U+0009 in a string must be escaped at byte 3"),
        ("\"abc", "the string opened at byte 1 is not closed"),
        // Structure.
        ("{\"a\":1 // c\n}", "expected ',' or '}'"),
        ("/* c */ 1", "comments are not allowed"),
        ("{\"a\" 1}", #"expected ':' after the key "a""#),
        ("[1 2]", "expected ',' or ']'"),
        ("[1,,2]", "unexpected ','"),
        ("{\"a\":1", "the object opened at byte 1 is not closed"),
        ("[", "the text ends where a value was expected"),
        ("", "no JSON value"),
        ("   ", "no JSON value"),
        ("truex", "unexpected 'x' after 'true'"),
        ("nul", "unexpected 'n' where a value was expected"),
        (#"{"a":1}}"#, "unexpected '}' after the JSON value at byte 8"),
        // Only ASCII whitespace separates tokens: U+00A0, U+200B, U+2028, U+3000 and a BOM do not.
        ("{\"a\":1}\u{200B}", "unexpected character U+200B after the JSON value at byte 8"),
        ("\u{00A0}1", "unexpected character U+00A0 where a value was expected at byte 1"),
        ("[1,\u{2028}2]", "unexpected character U+2028"),
        ("\u{3000}{}", "unexpected character U+3000"),
        ("\u{FEFF}{}", "unexpected character U+FEFF"),
    ] as [(String, String)])
    func rejectsWithAReadableReason(text: String, expected: String) throws {
        let got = try #require(reason(text), "accepted: \(text)")
        #expect(got.contains(expected), "\(text): \(got)")
    }

    @Test func nestingIsLimitedTo32() throws {
        let ok = String(repeating: "[", count: 32) + String(repeating: "]", count: 32)
        #expect(throws: Never.self) { try parse(ok).get() }
        let deepArray = String(repeating: "[", count: 500) + String(repeating: "]", count: 500)
        let deepObject = String(repeating: #"{"a":"#, count: 500) + "1" + String(repeating: "}", count: 500)
        for text in [deepArray, deepObject, String(repeating: "[", count: 33)] {
            guard case .failure(let error) = parse(text) else {
                Issue.record("accepted \(text.prefix(20))…")
                continue
            }
            #expect(error.kind == .tooDeep)
            #expect(error.description.hasPrefix("nesting deeper than 32 at byte"))
        }
    }

    @Test func invalidUTF8InsideAStringIsItsOwnKind() throws {
        for bytes: [UInt8] in [[0x22, 0xFF, 0x22], [0x22, 0xC0, 0xAF, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22], [0x22, 0xE2, 0x82, 0x22]] {
            guard case .failure(let error) = StrictJSON.parse(bytes) else {
                Issue.record("accepted \(bytes)")
                continue
            }
            #expect(error.kind == .invalidUTF8)
        }
        // JSONValue.parse keeps the invalid_utf8 code for bytes outside strings too.
        guard case .failure(let error) = JSONValue.parse([0x7B, 0xFF, 0x7D]) else { Issue.record("accepted"); return }
        #expect(error.code == .invalidUTF8)
    }

    /// Through the old entry point (JSONDecoder underneath) these passed; now they are invalid_json with the reason.
    @Test func jsonValueParseIsStrict() throws {
        for (text, reason) in [
            (#"{"lock":"UNLOCK",}"#, "trailing comma at byte 17"),
            (#"{"lock":"UNLOCK","lock":"LOCK"}"#, #"duplicate key "lock""#),
            (String(repeating: "[", count: 500) + String(repeating: "]", count: 500), "nesting deeper than 32"),
        ] {
            guard case .failure(let error) = JSONValue.parse(Array(text.utf8)) else {
                Issue.record("accepted \(text.prefix(40))")
                continue
            }
            #expect(error.code == .invalidJSON)
            #expect(error.message.contains(reason), "\(error.message)")
        }
        #expect(try JSONValue.parse(Array(#"{"state":"ON","brightness":40}"#.utf8)).get()
            == .object(["state": .string("ON"), "brightness": .number(40)]))
    }

    @Test func decimalStringsFollowTheJSONNumberGrammar() {
        #expect(StrictJSON.decimal("40") == 40)
        #expect(StrictJSON.decimal("21.5") == 21.5)
        #expect(StrictJSON.decimal("-3") == -3)
        #expect(StrictJSON.decimal("1e3") == 1000)
        #expect(StrictJSON.decimal(" 40\t\r\n") == 40)
        for text in ["0x1p3", "0x10", "inf", "-inf", "nan", "NaN", "Infinity", "+1", "007", "1.", ".5", "1_000", "1,5",
                     "", " ", "40 40", "\u{00A0}40", "40\u{200B}", "\u{3000}40", "40\u{2028}", "٤٠", "４０"] {
            #expect(StrictJSON.decimal(text) == nil, "accepted \(text.debugDescription)")
        }
    }

    @Test func asciiRulesNeverFoldUnicode() {
        #expect(ASCIIText.equalsIgnoringCase("unlock", "UNLOCK"))
        #expect(ASCIIText.equalsIgnoringCase("UnLoCk", "UNLOCK"))
        #expect(!ASCIIText.equalsIgnoringCase("UNLOC\u{212A}", "UNLOCK"))  // Kelvin sign folds to k in Unicode
        #expect(!ASCIIText.equalsIgnoringCase("@", "`"))
        #expect(ASCIIText.uppercased("unloc\u{212A}") == nil)
        #expect(ASCIIText.uppercased("toggle") == "TOGGLE")
        #expect(ASCIIText.trimmed(" \t\r\nON\n ") == "ON")
        #expect(ASCIIText.trimmed("\u{00A0}ON\u{200B}") == "\u{00A0}ON\u{200B}")
        #expect(ASCIIText.trimmed(" \t ") == "")
    }

    /// `JSONValue`'s Decodable init (vendor bodies through JSONDecoder) is bounded in depth: the old
    /// try-cascade decoded 500 levels at a cost of seconds.
    @Test func decodableIsBoundedInDepthAndKeepsKinds() throws {
        let deep = Data((String(repeating: "[", count: 500) + String(repeating: "]", count: 500)).utf8)
        #expect {
            _ = try JSONDecoder().decode(JSONValue.self, from: deep)
        } throws: { error in
            guard case DecodingError.dataCorrupted(let context) = error else { return false }
            return context.debugDescription.contains("nesting deeper than 32")
        }
        // The same limit as StrictJSON: 32 nested containers decode, 33 do not.
        let limit = String(repeating: "[", count: 32) + "1" + String(repeating: "]", count: 32)
        #expect(throws: Never.self) { try JSONDecoder().decode(JSONValue.self, from: Data(limit.utf8)) }
        let over = String(repeating: "[", count: 33) + String(repeating: "]", count: 33)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(JSONValue.self, from: Data(over.utf8)) }
        // Wide and deep within the limit: the same value as the strict parser gives.
        let forest = "[" + Array(repeating: String(repeating: #"{"a":["#, count: 15) + #"1,"x",true,null"# + String(repeating: "]}", count: 15), count: 200)
            .joined(separator: ",") + "]"
        #expect(try JSONDecoder().decode(JSONValue.self, from: Data(forest.utf8)) == (try StrictJSON.parse(Array(forest.utf8)).get()))
        let text = #"{"a":[1,true,"x",null,{"b":false}],"n":2.5,"s":"1"}"#
        let decoded = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
        #expect(decoded == (try StrictJSON.parse(Array(text.utf8)).get()))
        #expect(decoded["a"] == .array([.number(1), .bool(true), .string("x"), .null, .object(["b": .bool(false)])]))
    }

    // MARK: Linear work (counted, never timed)

    /// Worst-case 64 KiB inputs of every shape: the parser's steps stay within a small constant
    /// times the input size, and doubling the input at most doubles the work.
    @Test(arguments: WorstCase.allCases)
    func workIsLinearInTheInputSize(shape: WorstCase) {
        let small = shape.payload(bytes: 32 * 1024)
        let large = shape.payload(bytes: 64 * 1024)
        let smallSteps = StrictJSON.parseCountingSteps(small).steps
        let largeSteps = StrictJSON.parseCountingSteps(large).steps
        #expect(largeSteps <= 3 * large.count + 16, "\(shape): \(largeSteps) steps for \(large.count) bytes")
        #expect(Double(largeSteps) <= 2.1 * Double(max(smallSteps, 1)) + 64, "\(shape): \(smallSteps) → \(largeSteps)")
    }

    /// A 500-deep payload stops at the limit: the work does not depend on what follows.
    @Test func deepPayloadsStopAtTheLimit() {
        let deep = Array((String(repeating: "[", count: 60_000)).utf8)
        let (result, steps) = StrictJSON.parseCountingSteps(deep)
        #expect(steps <= 2 * StrictJSON.maxDepth + 2)
        guard case .failure(let error) = result else { Issue.record("accepted"); return }
        #expect(error.description == "nesting deeper than 32 at byte 33")
    }

    enum WorstCase: String, CaseIterable, CustomTestStringConvertible {
        case nestedAtTheLimit, manyKeys, escapes, surrogatePairs, longNumbers, whitespace, multibyte, emptyContainers

        var testDescription: String { rawValue }

        func payload(bytes: Int) -> [UInt8] {
            var out = ""
            switch self {
            case .nestedAtTheLimit:
                let unit = String(repeating: "[", count: 31) + "1" + String(repeating: "]", count: 31)
                out = "[" + Array(repeating: unit, count: bytes / (unit.count + 1)).joined(separator: ",") + "]"
            case .manyKeys:
                out = "{" + (0..<(bytes / 12)).map { "\"k\($0)\":\($0)" }.joined(separator: ",") + "}"
            case .escapes:
                out = "\"" + String(repeating: #"\u0041\n\\"#, count: bytes / 10) + "\""
            case .surrogatePairs:
                out = "\"" + String(repeating: #"\ud83d\ude00"#, count: bytes / 12) + "\""
            case .longNumbers:
                let number = "-" + String(repeating: "9", count: 200) + "." + String(repeating: "1", count: 40) + "e-300"
                out = "[" + Array(repeating: number, count: bytes / (number.count + 1)).joined(separator: ",") + "]"
            case .whitespace:
                out = "[" + String(repeating: " \t\r\n", count: bytes / 4) + "1]"
            case .multibyte:
                out = "\"" + String(repeating: "é😀\u{200B}", count: bytes / 9) + "\""
            case .emptyContainers:
                out = "[" + Array(repeating: "{},[]", count: bytes / 6).joined(separator: ",") + "]"
            }
            return Array(out.utf8)
        }
    }
}
