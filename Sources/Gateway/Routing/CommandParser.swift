import Foundation
import GatewayModel

/// Turns an inbound `/set` payload into validated, normalized changes for one device.
/// Every rejection is a `GatewayError` naming the problem; nothing here can crash on input.
public enum CommandParser {
    /// Bare words accepted on `/set` without a key, and the key each one sets.
    static let bareWords: [String: String] = [
        "ON": "state", "OFF": "state", "TOGGLE": "state",
        "LOCK": "lock", "UNLOCK": "lock",
        "OPEN": "cover", "CLOSE": "cover", "STOP": "cover",
    ]

    /// Other names Home Assistant's JSON light and common tools send for our keys.
    static let aliases: [String: String] = ["color_temp": "color_temp_kelvin"]

    public static func parse(
        payload: [UInt8], key topicKey: String?, device: Device, current: DeviceState
    ) -> Result<[String: StateValue], GatewayError> {
        guard let text = String(validating: payload, as: UTF8.self) else { return .failure(.invalidUTF8()) }
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.isEmpty { return .failure(.invalidPayload("the payload is empty")) }

        var requested: [(String, JSONValue)] = []
        if let topicKey {
            // `/set/<key>` takes a bare value: a number, a word, or any JSON value.
            let value: JSONValue
            if case .success(let parsed) = JSONValue.parse(Array(trimmed.utf8)) {
                value = parsed
            } else {
                value = .string(trimmed)
            }
            requested = [(topicKey, value)]
        } else if trimmed.hasPrefix("{") {
            switch JSONValue.parse(Array(trimmed.utf8)) {
            case .failure(let error): return .failure(error)
            case .success(.object(let object)):
                if object.isEmpty { return .failure(.invalidPayload("the object has no keys to set")) }
                requested = object.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
            case .success(let other): return .failure(.invalidPayload("expected a JSON object, got \(other.brief)"))
            }
        } else {
            var word = trimmed.uppercased()
            if word.count >= 2, word.hasPrefix("\""), word.hasSuffix("\"") { word = String(word.dropFirst().dropLast()) }
            guard let key = bareWords[word] else {
                // Something that looks like JSON but is not an object gets the parser's reason.
                if let first = trimmed.first, "[\"{".contains(first), case .failure(let error) = JSONValue.parse(Array(trimmed.utf8)) {
                    return .failure(error)
                }
                return .failure(.invalidPayload(
                    "send a JSON object like {\"state\":\"ON\"}, a bare ON/OFF/TOGGLE/LOCK/UNLOCK/OPEN/CLOSE/STOP, or a value on /set/<key>"))
            }
            requested = [(key, .string(word))]
        }

        var changes: [String: StateValue] = [:]
        for (rawKey, value) in requested {
            let key = aliases[rawKey] ?? rawKey
            guard device.keys.contains(key), let spec = StateKeys.spec(key) else {
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

    static func validate(_ value: JSONValue, rawKey: String, spec: KeySpec, current: DeviceState) -> Result<StateValue, GatewayError> {
        switch spec.kind {
        case .number(let low, let high):
            var number: Double
            switch value {
            case .number(let n): number = n
            case .string(let text):
                guard let parsed = Double(text.trimmingCharacters(in: .whitespaces)) else {
                    return .failure(.invalidValue(key: spec.name, value: value.brief, expected: "a number"))
                }
                number = parsed
            default:
                return .failure(.invalidValue(key: spec.name, value: value.brief, expected: "a number"))
            }
            // Home Assistant may send color temperature in mireds (`color_temp` < 1000).
            if rawKey == "color_temp", number > 0, number < 1000 { number = (1_000_000 / number).rounded() }
            guard number.isFinite else { return .failure(.outOfRange(key: spec.name, value: number, min: low, max: high)) }
            if let low, number < low { return .failure(.outOfRange(key: spec.name, value: number, min: low, max: high)) }
            if let high, number > high { return .failure(.outOfRange(key: spec.name, value: number, min: low, max: high)) }
            return .success(.number(number))
        case .enumeration(let reported):
            guard case .string(let text) = value else {
                return .failure(.invalidValue(key: spec.name, value: value.brief, expected: "one of \(accepted(spec, reported).joined(separator: ", "))"))
            }
            let words = accepted(spec, reported)
            // Upper-case words (ON, LOCK) are case-insensitive; lower-case modes (heat) too.
            guard let word = words.first(where: { $0.caseInsensitiveCompare(text) == .orderedSame }) else {
                return .failure(.invalidValue(key: spec.name, value: value.brief, expected: "one of \(words.joined(separator: ", "))"))
            }
            if word == "TOGGLE" {
                return .success(.string(current[spec.name]?.string == "ON" ? "OFF" : "ON"))
            }
            return .success(.string(word))
        case .bool:
            switch value {
            case .bool(let flag): return .success(.bool(flag))
            case .string(let text) where ["true", "false"].contains(text.lowercased()): return .success(.bool(text.lowercased() == "true"))
            default: return .failure(.invalidValue(key: spec.name, value: value.brief, expected: "true or false"))
            }
        case .text, .timestamp:
            guard case .string(let text) = value else {
                return .failure(.invalidValue(key: spec.name, value: value.brief, expected: "text"))
            }
            return .success(.string(text))
        }
    }

    /// Command words when the key has them (LOCK/UNLOCK), else the reported words (heat/cool).
    static func accepted(_ spec: KeySpec, _ reported: [String]) -> [String] {
        spec.commands.isEmpty ? reported : spec.commands
    }
}
