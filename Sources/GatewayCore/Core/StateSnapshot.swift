#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel

/// The retained `<base>/device/<id>` payload: every known reading with its fixed unit,
/// `last_seen` (when the vendor observed it, ISO 8601 UTC) and `stale` while it comes from the cache.
package enum StateSnapshot {
    /// Written straight into one string (no intermediate dictionary): this runs for every update.
    package static func render(type: DeviceType, state: DeviceState, lastSeenText: String?) -> String {
        var extra: [(String, StateValue)] = []
        if let lastSeenText { extra.append(("last_seen", .string(lastSeenText))) }
        if state.stale { extra.append(("stale", .bool(true))) }
        // Home Assistant's JSON light reads `color_temp` (Kelvin with `color_temp_kelvin: true`)
        // and `color_mode`; they mirror `color_temp_kelvin` and are documented as such. A colour light's own
        // `color_mode` (hs, xy, color_temp) wins.
        if type == .light, let kelvin = state.values["color_temp_kelvin"] {
            extra.append(("color_temp", kelvin))
            if state.values["color_mode"] == nil { extra.append(("color_mode", .string("color_temp"))) }
        }
        var keys = Array(state.values.keys)
        for (key, _) in extra where state.values[key] == nil { keys.append(key) }
        keys.sort()
        var out = "{"
        out.reserveCapacity(32 + keys.count * 24)
        for (index, key) in keys.enumerated() {
            guard let value = extra.first(where: { $0.0 == key })?.1 ?? state.values[key] else { continue }
            if index > 0 { out += "," }
            out += "\""
            out += key
            out += "\":"
            JSONText.append(value, to: &out)
        }
        out += "}"
        return out
    }
}
