import Foundation
@testable import GatewayCore
import GatewayModel
import Resilience
import Testing

extension StateSnapshot {
    /// The snapshot as text, as a subscriber reads it.
    static func render(type: DeviceType, state: DeviceState, lastSeenText: String?, keyOrder: inout [String]) -> String {
        var out: [UInt8] = []
        render(type: type, state: state, lastSeenText: lastSeenText, keyOrder: &keyOrder, into: &out)
        return String(decoding: out, as: UTF8.self)
    }
}

@Suite("State snapshot rendering")
struct StateSnapshotTests {
    /// The snapshot as it was written before the key order was remembered: every key sorted on each render, an
    /// added field replacing a value of the same key. The remembered order must give the same text.
    private static func reference(type: DeviceType, state: DeviceState, lastSeenText: String?) -> String {
        var extra: [(String, StateValue)] = []
        if let lastSeenText { extra.append(("last_seen", .string(lastSeenText))) }
        if state.stale { extra.append(("stale", .bool(true))) }
        if type == .light, let kelvin = state.values["color_temp_kelvin"] {
            extra.append(("color_temp", kelvin))
            if state.values["color_mode"] == nil { extra.append(("color_mode", .string("color_temp"))) }
        }
        var keys = Array(state.values.keys)
        for (key, _) in extra where state.values[key] == nil { keys.append(key) }
        keys.sort()
        var out = "{"
        for (index, key) in keys.enumerated() {
            guard let value = extra.first(where: { $0.0 == key })?.1 ?? state.values[key] else { continue }
            if index > 0 { out += "," }
            out += "\"" + key + "\":"
            out += JSONText.value(value)
        }
        return out + "}"
    }

    @Test func aLightMirrorsItsKelvinAndKeepsItsOwnColorMode() {
        var state = DeviceState()
        state.values = ["state": .string("ON"), "brightness": .number(40), "color_temp_kelvin": .number(2700), "color_temp": .number(370)]
        state.stale = true
        var order: [String] = []
        let text = StateSnapshot.render(type: .light, state: state, lastSeenText: "2026-11-28T12:00:00.000Z", keyOrder: &order)
        #expect(text == #"{"brightness":40,"color_mode":"color_temp","color_temp":2700,"color_temp_kelvin":2700,"last_seen":"2026-11-28T12:00:00.000Z","stale":true,"state":"ON"}"#)
        state.values["color_mode"] = .string("hs")
        #expect(StateSnapshot.render(type: .light, state: state, lastSeenText: nil, keyOrder: &order)
            == #"{"brightness":40,"color_mode":"hs","color_temp":2700,"color_temp_kelvin":2700,"stale":true,"state":"ON"}"#)
    }

    /// One remembered order per device across renders whose keys come and go (also a key swapped for another at the
    /// same count): always the reference text.
    @Test func aRememberedOrderFollowsKeysThatComeAndGo() {
        var random = SplitMix64(seed: 7)
        let names = ["power", "energy", "state", "temperature", "humidity", "color_temp_kelvin", "color_mode", "color_temp",
                     "last_seen", "stale", "brightness", "co2", "a", "zz"]
        let types: [DeviceType] = [.light, .sensor, .plug]
        for type in types {
            var order: [String] = []
            var state = DeviceState()
            for step in 0..<400 {
                let name = names[Int(random.next() % UInt64(names.count))]
                if random.next() % 4 == 0 {
                    state.values[name] = nil
                } else {
                    state.values[name] = random.next() % 2 == 0 ? .number(Double(step)) : .string("v\(step)")
                }
                state.stale = random.next() % 3 == 0
                let lastSeen = random.next() % 2 == 0 ? "2026-11-28T12:00:\(step % 60 < 10 ? "0" : "")\(step % 60).000Z" : nil
                #expect(StateSnapshot.render(type: type, state: state, lastSeenText: lastSeen, keyOrder: &order)
                    == Self.reference(type: type, state: state, lastSeenText: lastSeen))
            }
        }
    }
}
