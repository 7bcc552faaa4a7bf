#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel

/// The retained `<base>/device/<id>` payload: every known reading with its fixed unit,
/// `last_seen` (when the vendor observed it, ISO 8601 UTC) and `stale` while it comes from the cache.
package enum StateSnapshot {
    /// Written straight into `out` (emptied first; the state publisher reuses one buffer, and the connection copies
    /// it into its packet): no intermediate dictionary or strings, as this runs for every update.
    /// `keyOrder` is the state's keys, sorted, from the device's last render: reused while it still names exactly
    /// the state's keys (the same count, each found), so a render sorts only when a key came or went.
    package static func render(type: DeviceType, state: DeviceState, lastSeenText: String?, keyOrder: inout [String],
                               into out: inout [UInt8]) {
        // What the snapshot adds, in key order (they merge into the sorted keys below, and replace a value of the
        // same key). Home Assistant's JSON light reads `color_temp` (Kelvin with `color_temp_kelvin: true`) and
        // `color_mode`; they mirror `color_temp_kelvin` and are documented as such. A colour light's own
        // `color_mode` (hs, xy, color_temp) wins.
        var extras = Extras()
        if type == .light, let kelvin = state.values["color_temp_kelvin"] {
            if state.values["color_mode"] == nil { extras.colorMode = .string("color_temp") }
            extras.colorTemp = kelvin
        }
        extras.lastSeen = lastSeenText.map(StateValue.string)
        if state.stale { extras.stale = .bool(true) }

        out.removeAll(keepingCapacity: true)
        out.reserveCapacity(32 + (state.values.count + 4) * 24)
        out.append(UInt8(ascii: "{"))
        if keyOrder.count != state.values.count || !write(keyOrder, of: state, extras: extras, to: &out) {
            keyOrder = state.values.keys.sorted()
            out.removeSubrange(1...)
            _ = write(keyOrder, of: state, extras: extras, to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    /// The fields a snapshot adds, in key order: four slots instead of an array made for every render.
    private struct Extras {
        static let keys = ["color_mode", "color_temp", "last_seen", "stale"]
        var colorMode: StateValue?
        var colorTemp: StateValue?
        var lastSeen: StateValue?
        var stale: StateValue?

        func value(_ slot: Int) -> StateValue? {
            switch slot {
            case 0: colorMode
            case 1: colorTemp
            case 2: lastSeen
            default: stale
            }
        }
    }

    /// Writes the values in `keys` order with `extras` merged in; false (stopping) at a key the state lacks.
    private static func write(_ keys: [String], of state: DeviceState, extras: Extras, to out: inout [UInt8]) -> Bool {
        var slot = 0
        var first = true
        func field(_ key: String, _ value: StateValue) {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            out.append(UInt8(ascii: "\""))
            out.append(contentsOf: key.utf8)
            out.append(UInt8(ascii: "\""))
            out.append(UInt8(ascii: ":"))
            JSONText.append(value, toBytes: &out)
        }
        for key in keys {
            guard var value = state.values[key] else { return false }
            // The added fields that sort before this key go first; one of the same key replaces its value.
            while slot < Extras.keys.count {
                guard let extra = extras.value(slot) else {
                    slot += 1
                    continue
                }
                let extraKey = Extras.keys[slot]
                guard extraKey <= key else { break }
                slot += 1
                if extraKey == key { value = extra } else { field(extraKey, extra) }
            }
            field(key, value)
        }
        while slot < Extras.keys.count {
            if let extra = extras.value(slot) { field(Extras.keys[slot], extra) }
            slot += 1
        }
        return true
    }
}
