#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Small, allocation-light JSON text helpers for the hot publish path
/// (state snapshots are written for every update; JSONEncoder is measurably slower).
public enum JSONText {
    /// At most three decimals (below every sensor's resolution), trailing zeros dropped.
    public static func number(_ value: Double) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(24)
        appendNumber(value, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// `number(_:)` appended as ASCII bytes, formatted with integer arithmetic and no intermediate string
    /// (`Double.description` and per-part `String`s were measurably slower on the publish path).
    public static func appendNumber(_ value: Double, to out: inout [UInt8]) {
        guard value.isFinite else {
            out.append(contentsOf: "null".utf8)
            return
        }
        let scaled = (value * 1000).rounded()
        guard abs(scaled) < 9e15 else {
            out.append(contentsOf: "\(value)".utf8)
            return
        }
        var millis = Int64(scaled)
        if millis == 0 {
            out.append(UInt8(ascii: "0"))
            return
        }
        if millis < 0 {
            out.append(UInt8(ascii: "-"))
            millis = -millis
        }
        appendDigits(UInt64(millis / 1000), to: &out)
        var fraction = Int(millis % 1000)
        guard fraction != 0 else { return }
        var digits = 3
        while fraction % 10 == 0 {
            fraction /= 10
            digits -= 1
        }
        out.append(UInt8(ascii: "."))
        // `digits` digits with their leading zeros: 0.05 is millis 50, fraction 5 in 2 digits, ".05".
        var divisor = digits == 3 ? 100 : digits == 2 ? 10 : 1
        while divisor > 0 {
            out.append(UInt8(ascii: "0") + UInt8(fraction / divisor % 10))
            divisor /= 10
        }
    }

    /// The decimal digits of `value`.
    private static func appendDigits(_ value: UInt64, to out: inout [UInt8]) {
        if value < 10 {
            out.append(UInt8(ascii: "0") + UInt8(value))
            return
        }
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { buffer in
            var start = buffer.count
            var rest = value
            repeat {
                start -= 1
                buffer[start] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
            } while rest > 0
            out.append(contentsOf: UnsafeMutableBufferPointer(rebasing: buffer[start...]))
        }
    }

    /// Appends `[a,b,…]`, each item written by `write`.
    public static func appendArray<Items: Sequence>(_ items: Items, to out: inout String, _ write: (Items.Element, inout String) -> Void) {
        out += "["
        var first = true
        for item in items {
            if !first { out += "," }
            first = false
            write(item, &out)
        }
        out += "]"
    }

    /// Appends `{"k":v,…}` with the keys sorted (equal documents are equal bytes), each value written by `write`.
    public static func appendObject<Value>(_ members: [String: Value], to out: inout String, _ write: (Value, inout String) -> Void) {
        out += "{"
        var first = true
        // Sorted as pairs: looking each sorted key up again would hash every key a second time.
        for (key, value) in members.sorted(by: { $0.key < $1.key }) {
            if !first { out += "," }
            first = false
            appendQuoted(key, to: &out)
            out += ":"
            write(value, &out)
        }
        out += "}"
    }

    public static func quoted(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count + 2)
        appendQuoted(text, to: &out)
        return out
    }

    /// Appends `text` as a JSON string literal. Most values need no escaping: they are copied whole
    /// (this runs for every string in every state message).
    public static func appendQuoted(_ text: String, to out: inout String) {
        out += "\""
        if !needsEscaping(text) {
            out += text
            out += "\""
            return
        }
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case let c where c.value < 0x20:
                let hex = String(c.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }

    /// `appendQuoted` for a byte buffer (`JSONValue.render`): text without anything to escape is copied whole.
    public static func appendQuoted(_ text: String, toBytes out: inout [UInt8]) {
        guard needsEscaping(text) else {
            out.append(UInt8(ascii: "\""))
            out.append(contentsOf: text.utf8)
            out.append(UInt8(ascii: "\""))
            return
        }
        var escaped = ""
        appendQuoted(text, to: &escaped)
        out.append(contentsOf: escaped.utf8)
    }

    /// True when `text` holds a control character, a quote or a backslash. A plain loop over the contiguous
    /// UTF-8 of a native string (a closure-taking `contains(where:)` showed up in profiles of discovery).
    @inline(__always)
    static func needsEscaping(_ text: String) -> Bool {
        let fast = text.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
            for byte in bytes where byte < 0x20 || byte == 0x22 || byte == 0x5C { return true }
            return false
        }
        return fast ?? text.utf8.contains { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C }
    }

    /// Appends `value` as JSON, with no intermediate string for numbers, strings and booleans.
    public static func append(_ value: StateValue, toBytes out: inout [UInt8]) {
        switch value {
        case .number(let number): appendNumber(number, to: &out)
        case .string(let text): appendQuoted(text, toBytes: &out)
        case .bool(let flag): out.append(contentsOf: (flag ? "true" : "false").utf8)
        case .object(let members): out.append(contentsOf: object(members).utf8)
        }
    }

    public static func value(_ value: StateValue) -> String {
        switch value {
        case .number(let number): JSONText.number(number)
        case .string(let text): quoted(text)
        case .bool(let flag): flag ? "true" : "false"
        case .object(let members): object(members)
        }
    }

    /// `{"a":1,"b":"x"}` with keys sorted, so equal states give equal bytes.
    public static func object(_ values: [String: StateValue]) -> String {
        var out = "{"
        var first = true
        for key in values.keys.sorted() {
            guard let value = values[key] else { continue }
            if !first { out += "," }
            first = false
            out += quoted(key)
            out += ":"
            out += JSONText.value(value)
        }
        out += "}"
        return out
    }
}
