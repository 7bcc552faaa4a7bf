/// Why a JSON text was refused: a readable reason and the 1-based byte where the problem starts.
public struct JSONSyntaxError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// Not RFC 8259 JSON (or a duplicate key, or a number longer than `StrictJSON.maxNumberLength`).
        case syntax
        /// Arrays and objects nested deeper than the limit.
        case tooDeep
        /// A string holds bytes that are not UTF-8.
        case invalidUTF8
    }

    public var kind: Kind
    /// What is wrong, e.g. `duplicate key "lock"` or `trailing comma`.
    public var reason: String
    /// 1-based position in the input (input length + 1 for "ended too early").
    public var byte: Int

    public init(_ kind: Kind, _ reason: String, byte: Int) {
        self.kind = kind
        self.reason = reason
        self.byte = byte
    }

    public var description: String { "\(reason) at byte \(byte)" }
}

/// A strict RFC 8259 JSON parser for everything that arrives from outside (commands, requests,
/// vendor bodies): no trailing commas, comments, single quotes, NaN/Infinity, leading `+` or zeros;
/// escapes and surrogate pairs checked; **duplicate keys rejected** (other parsers keep the first or
/// the last, so a filter upstream could read another value than the one we act on); a nesting limit.
///
/// One pass over the bytes, recursion bounded by the nesting limit: the work is linear in the input
/// (`parseCountingSteps` lets tests guard that without timing anything).
public enum StrictJSON {
    /// Deepest nesting of arrays and objects accepted (a command needs 1, a batch request 4).
    public static let maxDepth = 32
    /// Longest number accepted, in characters (RFC 8259 §9 allows limits; keeps `Double` conversion cheap).
    public static let maxNumberLength = 256

    public static func parse(_ bytes: some Collection<UInt8>, maxDepth: Int = maxDepth) -> Result<JSONValue, JSONSyntaxError> {
        parseCountingSteps(bytes, maxDepth: maxDepth).result
    }

    /// `parse`, also returning how many steps (bytes looked at, values built) the parser took.
    public static func parseCountingSteps(
        _ bytes: some Collection<UInt8>, maxDepth: Int = maxDepth
    ) -> (result: Result<JSONValue, JSONSyntaxError>, steps: Int) {
        if let done = bytes.withContiguousStorageIfAvailable({ run($0, maxDepth: maxDepth) }) { return done }
        return Array(bytes).withUnsafeBufferPointer { run($0, maxDepth: maxDepth) }
    }

    /// A number written exactly as a JSON number (`40`, `-3`, `21.5`, `1e3`), after trimming ASCII
    /// whitespace: no hex, `inf`, `nan`, `+`, leading zeros or other whitespace. nil otherwise.
    public static func decimal(_ text: some StringProtocol) -> Double? {
        let trimmed = ASCIIText.trimmed(text)
        guard !trimmed.isEmpty else { return nil }
        var copy = String(trimmed)
        return copy.withUTF8 { buffer -> Double? in
            var parser = Parser(buffer, maxDepth: 0)
            guard case .number(let value)? = try? parser.number(), parser.index == buffer.count else { return nil }
            return value
        }
    }

    private static func run(_ buffer: UnsafeBufferPointer<UInt8>, maxDepth: Int) -> (result: Result<JSONValue, JSONSyntaxError>, steps: Int) {
        var parser = Parser(buffer, maxDepth: maxDepth)
        do {
            let value = try parser.document()
            return (.success(value), parser.steps)
        } catch {
            return (.failure(error), parser.steps)
        }
    }
}

/// The recursive-descent parser over one contiguous buffer.
private struct Parser {
    let bytes: UnsafeBufferPointer<UInt8>
    let maxDepth: Int
    var index = 0
    var depth = 0
    /// Work counter: one per byte looked at and per value built.
    var steps = 0

    init(_ bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    // MARK: Document and values

    mutating func document() throws(JSONSyntaxError) -> JSONValue {
        skipWhitespace()
        guard index < bytes.count else { throw fail("no JSON value (the text is empty)") }
        let value = try value()
        skipWhitespace()
        if index < bytes.count { throw fail("unexpected \(describe(index)) after the JSON value") }
        return value
    }

    mutating func value() throws(JSONSyntaxError) -> JSONValue {
        steps &+= 1
        guard index < bytes.count else { throw fail("the text ends where a value was expected") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try object()
        case UInt8(ascii: "["): return try array()
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "N"), UInt8(ascii: "I"): throw fail("NaN and Infinity are not JSON numbers")
        case UInt8(ascii: "+"): throw fail("a number cannot start with '+'")
        case UInt8(ascii: "'"): throw fail("strings must use double quotes")
        case UInt8(ascii: "/"): throw fail("comments are not allowed")
        case UInt8(ascii: ","): throw fail("unexpected ','")
        default: throw fail("unexpected \(describe(index)) where a value was expected")
        }
    }

    mutating func object() throws(JSONSyntaxError) -> JSONValue {
        let open = index
        try enter()
        index += 1
        var members: [String: JSONValue] = [:]
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard index < bytes.count else { throw fail("the object opened at byte \(open + 1) is not closed") }
            guard bytes[index] == UInt8(ascii: "\"") else {
                let byte = bytes[index]
                if byte == UInt8(ascii: "'") { throw fail("keys must use double quotes") }
                if byte == UInt8(ascii: "/") { throw fail("comments are not allowed") }
                throw fail("expected a quoted key, found \(describe(index))")
            }
            let keyStart = index
            let key = try string()
            if members[key] != nil {
                throw JSONSyntaxError(.syntax, "duplicate key \(quotedForMessage(key))", byte: keyStart + 1)
            }
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else {
                throw fail(index < bytes.count
                    ? "expected ':' after the key \(quotedForMessage(key)), found \(describe(index))"
                    : "the object opened at byte \(open + 1) is not closed")
            }
            index += 1
            skipWhitespace()
            members[key] = try value()
            if try closesAfterElement(UInt8(ascii: "}"), openedAt: open, afterValueOf: key) {
                return .object(members)
            }
        }
    }

    mutating func array() throws(JSONSyntaxError) -> JSONValue {
        let open = index
        try enter()
        index += 1
        var items: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return .array(items)
        }
        while true {
            skipWhitespace()
            items.append(try value())
            if try closesAfterElement(UInt8(ascii: "]"), openedAt: open, afterValueOf: nil) {
                return .array(items)
            }
        }
    }

    /// After an object member or array item: consumes `,` (false: another element follows; a trailing comma
    /// is refused) or the closing bracket (true: the container ends and its level is left).
    /// `key` names the object member just read (nil in an array), for the error message.
    mutating func closesAfterElement(_ closing: UInt8, openedAt open: Int, afterValueOf key: String?) throws(JSONSyntaxError) -> Bool {
        skipWhitespace()
        let container = closing == UInt8(ascii: "}") ? "object" : "array"
        guard index < bytes.count else { throw fail("the \(container) opened at byte \(open + 1) is not closed") }
        switch bytes[index] {
        case UInt8(ascii: ","):
            let comma = index
            index += 1
            skipWhitespace()
            if index < bytes.count, bytes[index] == closing {
                throw JSONSyntaxError(.syntax, "trailing comma", byte: comma + 1)
            }
            return false
        case closing:
            index += 1
            depth -= 1
            return true
        default:
            let expected = key.map { "expected ',' or '}' after the value of \(quotedForMessage($0))" } ?? "expected ',' or ']' in the array"
            throw fail("\(expected), found \(describe(index))")
        }
    }

    /// Counts one more level of nesting; refuses it beyond the limit before reading further.
    mutating func enter() throws(JSONSyntaxError) {
        depth += 1
        if depth > maxDepth {
            throw JSONSyntaxError(.tooDeep, "nesting deeper than \(maxDepth)", byte: index + 1)
        }
    }

    mutating func literal(_ word: StaticString) throws(JSONSyntaxError) {
        let length = word.utf8CodeUnitCount
        let matches = index + length <= bytes.count && word.withUTF8Buffer { expected in
            (0..<length).allSatisfy { bytes[index + $0] == expected[$0] }
        }
        guard matches else { throw fail("unexpected \(describe(index)) where a value was expected") }
        steps &+= length
        index += length
        if index < bytes.count, isWordByte(bytes[index]) { throw fail("unexpected \(describe(index)) after '\(word)'") }
    }

    // MARK: Numbers

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?` and nothing else.
    mutating func number() throws(JSONSyntaxError) -> JSONValue {
        let start = index
        if bytes[index] == UInt8(ascii: "-") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "I") || bytes[index] == UInt8(ascii: "N") {
                throw JSONSyntaxError(.syntax, "NaN and Infinity are not JSON numbers", byte: start + 1)
            }
        }
        guard index < bytes.count, isDigit(bytes[index]) else { throw invalidNumber(start, "a digit must follow '-'") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if index < bytes.count, isDigit(bytes[index]) { throw invalidNumber(start, "leading zeros are not allowed") }
        } else {
            skipDigits()
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw invalidNumber(start, "a digit must follow the decimal point") }
            skipDigits()
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw invalidNumber(start, "the exponent needs digits") }
            skipDigits()
        }
        // `0x1p3`, `1.5.2`, `12abc`: a number must end at a delimiter.
        if index < bytes.count, isWordByte(bytes[index]) || bytes[index] == UInt8(ascii: ".") {
            throw invalidNumber(start, "only decimal digits, '.', 'e' and '-' are allowed (no hex)")
        }
        let length = index - start
        steps &+= length
        guard length <= StrictJSON.maxNumberLength else {
            throw JSONSyntaxError(.syntax, "number longer than \(StrictJSON.maxNumberLength) characters", byte: start + 1)
        }
        // The grammar above is a subset of what Double(_:) reads, so this only fails on a bug.
        guard let value = Double(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)) else {
            throw invalidNumber(start, "not a number")
        }
        return .number(value)
    }

    mutating func skipDigits() {
        while index < bytes.count, isDigit(bytes[index]) { index += 1 }
    }

    func invalidNumber(_ start: Int, _ detail: String) -> JSONSyntaxError {
        JSONSyntaxError(.syntax, "invalid number (\(detail))", byte: start + 1)
    }

    // MARK: Strings

    /// A string starting at the opening quote. Runs without escapes are copied whole.
    mutating func string() throws(JSONSyntaxError) -> String {
        let open = index
        index += 1
        var runStart = index
        var decoded: [UInt8] = []
        var escaped = false
        while index < bytes.count {
            steps &+= 1
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                let run = UnsafeBufferPointer(rebasing: bytes[runStart..<index])
                index += 1
                guard escaped else { return String(decoding: run, as: UTF8.self) }
                decoded.append(contentsOf: run)
                return String(decoding: decoded, as: UTF8.self)
            case UInt8(ascii: "\\"):
                decoded.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index]))
                try escape(into: &decoded)
                escaped = true
                runStart = index
            case 0..<0x20:
                throw fail("control character \(hex(byte)) in a string must be escaped")
            case 0x80...:
                try utf8Sequence()
            default:
                index += 1
            }
        }
        throw JSONSyntaxError(.syntax, "the string opened at byte \(open + 1) is not closed", byte: bytes.count + 1)
    }

    /// One escape at `index` (the backslash), appended as UTF-8.
    mutating func escape(into out: inout [UInt8]) throws(JSONSyntaxError) {
        let start = index
        index += 1
        guard index < bytes.count else { throw fail("the text ends inside an escape") }
        let letter = bytes[index]
        index += 1
        switch letter {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(letter)
        case UInt8(ascii: "b"): out.append(0x08)
        case UInt8(ascii: "f"): out.append(0x0C)
        case UInt8(ascii: "n"): out.append(0x0A)
        case UInt8(ascii: "r"): out.append(0x0D)
        case UInt8(ascii: "t"): out.append(0x09)
        case UInt8(ascii: "u"):
            let unit = try hexQuad(escapeStart: start)
            var scalarValue = UInt32(unit)
            if (0xD800...0xDBFF).contains(unit) {
                // A high surrogate must be followed by an escaped low one.
                guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                    throw JSONSyntaxError(.syntax, "unpaired surrogate \\u\(hex4(unit))", byte: start + 1)
                }
                let lowStart = index
                index += 2
                let low = try hexQuad(escapeStart: lowStart)
                guard (0xDC00...0xDFFF).contains(low) else {
                    throw JSONSyntaxError(.syntax, "unpaired surrogate \\u\(hex4(unit))", byte: start + 1)
                }
                scalarValue = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
            } else if (0xDC00...0xDFFF).contains(unit) {
                throw JSONSyntaxError(.syntax, "unpaired surrogate \\u\(hex4(unit))", byte: start + 1)
            }
            guard let scalar = Unicode.Scalar(scalarValue) else {
                throw JSONSyntaxError(.syntax, "invalid escape \\u\(hex4(unit))", byte: start + 1)
            }
            if let encoded = UTF8.encode(scalar) { out.append(contentsOf: encoded) }
        default:
            throw JSONSyntaxError(.syntax, "invalid escape '\\\(printable(letter))'", byte: start + 1)
        }
        steps &+= index - start
    }

    /// Four hex digits at `index`.
    mutating func hexQuad(escapeStart: Int) throws(JSONSyntaxError) -> UInt16 {
        guard index + 4 <= bytes.count else { throw JSONSyntaxError(.syntax, "\\u needs four hex digits", byte: escapeStart + 1) }
        var value: UInt16 = 0
        for offset in 0..<4 {
            let byte = bytes[index + offset]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw JSONSyntaxError(.syntax, "\\u needs four hex digits", byte: escapeStart + 1)
            }
            value = value << 4 | UInt16(digit)
        }
        index += 4
        return value
    }

    /// Checks one multi-byte UTF-8 sequence at `index` (Unicode Table 3-7: no overlongs, no surrogates).
    mutating func utf8Sequence() throws(JSONSyntaxError) {
        guard let length = utf8Length(at: index) else {
            throw JSONSyntaxError(.invalidUTF8, "a string holds bytes that are not UTF-8", byte: index + 1)
        }
        steps &+= length - 1
        index += length
    }

    /// The length of the valid UTF-8 sequence starting at `position`, or nil.
    func utf8Length(at position: Int) -> Int? {
        let lead = bytes[position]
        let length: Int
        var low: UInt8 = 0x80, high: UInt8 = 0xBF
        switch lead {
        case 0x00...0x7F: return 1
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; high = 0x9F
        case 0xF0: length = 4; low = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; high = 0x8F
        default: return nil
        }
        guard position + length <= bytes.count else { return nil }
        guard (low...high).contains(bytes[position + 1]) else { return nil }
        for offset in 2..<length where !(0x80...0xBF).contains(bytes[position + offset]) { return nil }
        return length
    }

    // MARK: Helpers

    mutating func skipWhitespace() {
        // RFC 8259 whitespace only: space, tab, LF, CR (no U+00A0, U+200B, U+2028, BOM).
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D:
                steps &+= 1
                index += 1
            default:
                return
            }
        }
    }

    func fail(_ reason: String) -> JSONSyntaxError {
        JSONSyntaxError(.syntax, reason, byte: index + 1)
    }

    func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    func isWordByte(_ byte: UInt8) -> Bool {
        isDigit(byte) || (byte | 0x20) >= UInt8(ascii: "a") && (byte | 0x20) <= UInt8(ascii: "z") || byte == UInt8(ascii: "_")
    }

    /// `'x'` for printable ASCII, `U+200B` for other characters, `byte 0xFF` for non-UTF-8.
    func describe(_ position: Int) -> String {
        let byte = bytes[position]
        if byte >= 0x21, byte < 0x7F { return "'\(printable(byte))'" }
        if byte < 0x80 { return "character \(hex(byte))" }
        guard let length = utf8Length(at: position) else { return "byte 0x\(String(byte, radix: 16, uppercase: true))" }
        let scalar = String(decoding: UnsafeBufferPointer(rebasing: bytes[position..<position + length]), as: UTF8.self)
            .unicodeScalars.first.map { "U+" + hex4Padded($0.value) } ?? "?"
        return "character \(scalar)"
    }

    func printable(_ byte: UInt8) -> String {
        byte >= 0x20 && byte < 0x7F ? String(UnicodeScalar(byte)) : hex(byte)
    }

    func hex(_ byte: UInt8) -> String { "U+" + hex4Padded(UInt32(byte)) }
    func hex4(_ unit: UInt16) -> String { hex4Padded(UInt32(unit)) }

    func hex4Padded(_ value: UInt32) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return digits.count >= 4 ? digits : String(repeating: "0", count: 4 - digits.count) + digits
    }

    /// A key quoted for an error message: JSON-escaped and shortened.
    func quotedForMessage(_ key: String) -> String {
        JSONText.quoted(key.count > 40 ? String(key.prefix(40)) + "…" : key)
    }
}

/// ASCII-only text rules for command words: never Unicode case folding or Unicode whitespace, so
/// `UNLOC\u{212A}` (Kelvin sign) or `UNLOCK\u{200B}` can never match `UNLOCK`.
public enum ASCIIText {
    /// Space, tab, CR and LF: the only characters trimmed from command payloads and values.
    public static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    /// `text` without leading and trailing ASCII whitespace (other whitespace is kept, so it never matches).
    public static func trimmed<S: StringProtocol>(_ text: S) -> S.SubSequence {
        let utf8 = text.utf8
        var start = utf8.startIndex
        while start < utf8.endIndex, isWhitespace(utf8[start]) { start = utf8.index(after: start) }
        // One forward pass (a StringProtocol's UTF-8 view need not walk backwards): end after the last kept byte.
        var end = start
        var position = start
        while position < utf8.endIndex {
            let next = utf8.index(after: position)
            if !isWhitespace(utf8[position]) { end = next }
            position = next
        }
        // Both ends are ASCII boundaries, so they are character boundaries.
        return text[start..<end]
    }

    /// True when `text` equals `word` byte for byte, folding only ASCII letters a–z/A–Z.
    public static func equalsIgnoringCase(_ text: some StringProtocol, _ word: some StringProtocol) -> Bool {
        let left = text.utf8, right = word.utf8
        guard left.count == right.count else { return false }
        return zip(left, right).allSatisfy { a, b in
            a == b || (a ^ b) == 0x20 && (a | 0x20) >= UInt8(ascii: "a") && (a | 0x20) <= UInt8(ascii: "z")
        }
    }

    /// The first of `words` that `text` matches ASCII-case-insensitively.
    public static func match(_ text: some StringProtocol, in words: [String]) -> String? {
        words.first { equalsIgnoringCase(text, $0) }
    }
}

extension ASCIIText {
    /// `text` with a–z made upper-case; nil when it holds anything but ASCII (no Unicode case mapping).
    public static func uppercased(_ text: some StringProtocol) -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            guard byte < 0x80 else { return nil }
            bytes.append(byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z") ? byte - 0x20 : byte)
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
