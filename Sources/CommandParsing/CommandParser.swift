#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel

/// Turns an inbound `/set` payload into validated, normalized changes for one device.
/// Every rejection is a `GatewayError` naming the problem; nothing here can crash on input.
public enum CommandParser {
    /// Bare words accepted on `/set` without a key, and the key each one sets.
    package static let bareWords: [String: String] = [
        "ON": "state", "OFF": "state", "TOGGLE": "state",
        "LOCK": "lock", "UNLOCK": "lock",
        "OPEN": "cover", "CLOSE": "cover", "STOP": "cover",
    ]

    /// Other names Home Assistant's JSON light and common tools send for our keys.
    package static let aliases: [String: String] = ["color_temp": "color_temp_kelvin"]

    /// Parsing rules (documented in mqtt-topics.md, "Command payloads"):
    /// - JSON is RFC 8259 only (`StrictJSON`): no trailing commas, comments, NaN/Infinity, duplicate keys;
    ///   nesting at most `StrictJSON.maxDepth`. Its failures are `invalid_json` with the reason and byte.
    /// - Only ASCII whitespace (space, tab, CR, LF) is trimmed; words match ASCII-case-insensitively,
    ///   never by Unicode folding, so `UNLOCK` plus U+200B or `UNLOC` plus the Kelvin sign never unlocks.
    /// - Numbers are JSON numbers, or strings written exactly as one (`"40"`, `"-3"`, `"21.5"`).
    public static func parse(
        payload: [UInt8], key topicKey: String?, device: Device, current: DeviceState
    ) -> Result<[String: StateValue], GatewayError> {
        guard let text = String(validating: payload, as: UTF8.self) else { return .failure(.invalidUTF8()) }
        let trimmed = ASCIIText.trimmed(text)
        if trimmed.isEmpty { return .failure(.invalidPayload("the payload is empty")) }
        // Text that starts like a JSON object, array or string must be valid JSON; the rest may be a bare word.
        let looksLikeJSON = trimmed.utf8.first.map { $0 == UInt8(ascii: "{") || $0 == UInt8(ascii: "[") || $0 == UInt8(ascii: "\"") } ?? false

        var requested: [(String, JSONValue)] = []
        if let topicKey {
            // `/set/<key>` takes a bare value: a JSON value (40, "UNLOCK", true), or a bare word or number.
            switch StrictJSON.parse(payload) {
            case .success(let parsed): requested = [(topicKey, parsed)]
            case .failure(let error):
                if looksLikeJSON { return .failure(jsonError(error)) }
                requested = [(topicKey, .string(String(trimmed)))]
            }
        } else if looksLikeJSON {
            switch StrictJSON.parse(payload) {
            case .failure(let error): return .failure(jsonError(error))
            case .success(.object(let object)):
                if object.isEmpty { return .failure(.invalidPayload("the object has no keys to set")) }
                requested = object.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
            case .success(.string(let quoted)):
                // A quoted bare word ("UNLOCK"): the same rule as without quotes.
                guard let (key, word) = bareWord(quoted) else { return .failure(unknownWord(quoted)) }
                requested = [(key, .string(word))]
            case .success(let other): return .failure(.invalidPayload("expected a JSON object, got \(other.brief)"))
            }
        } else {
            guard let (key, word) = bareWord(trimmed) else { return .failure(unknownWord(trimmed)) }
            requested = [(key, .string(word))]
        }

        var changes: [String: StateValue] = [:]
        for (rawKey, value) in requested {
            let key = aliases[rawKey] ?? rawKey
            // The device's own spec: its range, not only the registry's (an EV charger's 6 … 40 A).
            guard device.keys.contains(key), let spec = device.spec(key) else {
                let writable = device.specs.filter { device.isWritable($0.name) }.map(\.name)
                return .failure(.unknownKey(rawKey, device: device.id.rawValue, accepted: writable))
            }
            guard spec.writable, device.isWritable(key) else { return .failure(.readOnlyKey(key, device: device.id.rawValue)) }
            switch validate(value, rawKey: rawKey, spec: spec, current: current) {
            case .success(let normalized): changes[key] = normalized
            case .failure(let error): return .failure(error)
            }
        }
        return .success(changes)
    }

    package static func validate(_ value: JSONValue, rawKey: String, spec: KeySpec, current: DeviceState) -> Result<StateValue, GatewayError> {
        switch spec.kind {
        case .number(let low, let high):
            var number: Double
            switch value {
            case .number(let n): number = n
            case .string(let text):
                // Exactly the JSON number grammar: no hex (0x1p3), inf, nan, '+' or Unicode whitespace.
                guard let parsed = StrictJSON.decimal(text) else {
                    return .failure(.invalidValue(key: spec.name, value: visible(text), expected: numberExpectation))
                }
                number = parsed
            default:
                return .failure(.invalidValue(key: spec.name, value: value.brief, expected: numberExpectation))
            }
            // Home Assistant may send color temperature in mireds (`color_temp` < 1000).
            if rawKey == "color_temp", number > 0, number < 1000 { number = (1_000_000 / number).rounded() }
            guard number.isFinite else { return .failure(.outOfRange(key: spec.name, value: number, min: low, max: high)) }
            if let low, number < low { return .failure(.outOfRange(key: spec.name, value: number, min: low, max: high)) }
            if let high, number > high { return .failure(.outOfRange(key: spec.name, value: number, min: low, max: high)) }
            return .success(.number(number))
        case .enumeration(let reported):
            let words = accepted(spec, reported)
            guard case .string(let text) = value else {
                return .failure(.invalidValue(key: spec.name, value: value.brief, expected: "one of \(words.joined(separator: ", "))"))
            }
            // Upper-case words (ON, LOCK) and lower-case modes (heat) match ASCII-case-insensitively only.
            guard let word = ASCIIText.match(ASCIIText.trimmed(text), in: words) else {
                return .failure(.invalidValue(key: spec.name, value: visible(text), expected: "one of \(words.joined(separator: ", "))"))
            }
            if word == "TOGGLE" {
                return .success(.string(current[spec.name]?.string == "ON" ? "OFF" : "ON"))
            }
            return .success(.string(word))
        case .bool:
            switch value {
            case .bool(let flag): return .success(.bool(flag))
            case .string(let text):
                guard let word = ASCIIText.match(ASCIIText.trimmed(text), in: ["true", "false"]) else {
                    return .failure(.invalidValue(key: spec.name, value: visible(text), expected: "true or false"))
                }
                return .success(.bool(word == "true"))
            default: return .failure(.invalidValue(key: spec.name, value: value.brief, expected: "true or false"))
            }
        case .color:
            return color(value, key: spec.name)
        case .text, .timestamp:
            guard case .string(let text) = value else {
                return .failure(.invalidValue(key: spec.name, value: value.brief, expected: "text"))
            }
            return .success(.string(text))
        }
    }

    package static let colorExpectation = "{\"hue\": 0…360, \"saturation\": 0…100} (or h/s) or {\"x\": 0…1, \"y\": 0…1}"

    /// `{"hue","saturation"}` (Home Assistant's `{"h","s"}` too) or `{"x","y"}`, each part a number in range.
    package static func color(_ value: JSONValue, key: String) -> Result<StateValue, GatewayError> {
        guard case .object(let members) = value else {
            return .failure(.invalidValue(key: key, value: value.brief, expected: colorExpectation))
        }
        func part(_ names: [String], _ range: ClosedRange<Double>) -> Double?? {
            guard let found = names.lazy.compactMap({ members[$0] }).first else { return .some(nil) }
            guard case .number(let number) = found, number.isFinite, range.contains(number) else { return nil }
            return .some(number)
        }
        // The parts as sent, for the error (this file stands alone in the fuzz harness: no JSON renderer here).
        let shown = "{" + members.keys.sorted().prefix(6).map { "\($0): \(members[$0]?.brief ?? "")" }.joined(separator: ", ") + "}"
        guard let hue = part(["hue", "h"], 0...360), let saturation = part(["saturation", "s"], 0...100),
              let x = part(["x"], 0...1), let y = part(["y"], 0...1) else {
            return .failure(.invalidValue(key: key, value: shown, expected: colorExpectation))
        }
        if let hue, let saturation { return .success(.object(["hue": .number(hue), "saturation": .number(saturation)])) }
        if let x, let y { return .success(.object(["x": .number(x), "y": .number(y)])) }
        return .failure(.invalidValue(key: key, value: shown, expected: colorExpectation))
    }

    package static let numberExpectation = "a number: a JSON number, or a string written as one (\"40\", \"-3\", \"21.5\"; no hex, inf or nan)"

    /// The key and canonical word of a bare command word, matched ASCII-case-insensitively after ASCII trimming.
    package static func bareWord(_ text: some StringProtocol) -> (key: String, word: String)? {
        guard let word = ASCIIText.uppercased(ASCIIText.trimmed(text)), let key = bareWords[word] else { return nil }
        return (key, word)
    }

    package static func unknownWord(_ text: some StringProtocol) -> GatewayError {
        GatewayError(
            .invalidPayload, message: "\(visible(text)) is not a command word.",
            suggestion: "Send a JSON object like {\"state\":\"ON\"}, a bare ON/OFF/TOGGLE/LOCK/UNLOCK/OPEN/CLOSE/STOP, or a value on /set/<key>."
        )
    }

    package static func jsonError(_ error: JSONSyntaxError) -> GatewayError {
        error.kind == .invalidUTF8 ? .invalidUTF8() : .invalidJSON(error.description)
    }

    /// `text` quoted for a message with every character outside printable ASCII shown as `\uXXXX`,
    /// so an invisible U+200B or a Kelvin sign is named instead of looking like a valid word.
    package static func visible(_ text: some StringProtocol) -> String {
        var out = "\""
        var hidden: [String] = []
        for scalar in text.unicodeScalars {
            if out.utf8.count > 60 { out += "…"; break }
            if scalar.value >= 0x20, scalar.value < 0x7F, scalar != "\"", scalar != "\\" {
                out.unicodeScalars.append(scalar)
            } else {
                let hex = String(scalar.value, radix: 16, uppercase: true)
                let code = String(repeating: "0", count: max(0, 4 - hex.count)) + hex
                out += scalar == "\"" ? "\\\"" : scalar == "\\" ? "\\\\" : "\\u" + code
                if scalar.value >= 0x7F, hidden.count < 3 { hidden.append("U+" + code) }
            }
        }
        out += "\""
        return hidden.isEmpty ? out : out + " (contains \(hidden.joined(separator: ", ")); commands are ASCII only)"
    }

    /// Command words when the key has them (LOCK/UNLOCK), else the reported words (heat/cool).
    package static func accepted(_ spec: KeySpec, _ reported: [String]) -> [String] {
        spec.commands.isEmpty ? reported : spec.commands
    }
}
