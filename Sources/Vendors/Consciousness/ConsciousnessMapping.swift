#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import VendorKit

/// Turns backend devices and the house's status into gateway devices and normalized state.
///
/// Decisions (the backend only knows `turn_on` / `turn_off`, which set a device's `status` to `active` / `inactive`
/// and leave its properties as they are):
/// - Every device gets `state` (ON/OFF): `active` → ON and `inactive` → OFF (what the backend's own commands set,
///   its newest word); for other words the device's own on/off property (`power`, or `on`/`is_on`) decides; without
///   one it is OFF: only `active` is running (what the backend's dashboard counts). `online`/`offline`/`error` say
///   whether the device is reachable: they drive availability, never `state`. The status words come before
///   `power` because the real server never changes `power` on `turn_off`: a light seeded `power: true` that was
///   switched off reads `inactive`, and must be OFF.
/// - Read-only extras the backend serves: a camera's `recording`, `motion_detection`, `night_vision` (true/false as
///   `on`/`off`, or the word `auto`), a speaker's `volume` (%), `playing`, `track` (`current_track`; Python's
///   `"None"` is no track), a lock's `auto_lock`, and any device's `wifi_signal` (dBm, as the backend serves it;
///   a value above 0 is no dBm and is left out).
/// - `smart_lock` reports `lock` from its `locked` property and `garage_door` reports `cover` from `open`,
///   because that is what the backend really says. They are NOT driven by turn_on/turn_off: those change only
///   `status`, so mapping LOCK → turn_on would confirm a lock that never happened. Commands for them are refused.
/// - Every device's `writableKeys` is exactly `["state"]`: the control endpoint accepts only `turn_on`/`turn_off`
///   (other actions answer `success` but change nothing), so brightness, lock, cover, target temperature and
///   HVAC mode are read-only here.
/// - Thermostats: the running server sends `current_temp`, `target_temp` (whole °F, e.g. 72) and `mode`; other
///   implementations send `temperature`/`current_temperature`, `target_temperature` (°C) and `mode`. They map to
///   `temperature`, `target_temperature` (°C, one decimal) and `hvac_mode` (see `hvacMode`). The unit is the
///   vendor's `temperature_unit` option; `auto` takes the device's `temperature_unit`/`unit` property, else
///   treats readings above 45 as °F (see `ConsciousnessOptions.TemperatureUnit`).
/// - The backend's `last_seen` is a local time without a zone; it is read as UTC (the gateway and backend are
///   expected to run in UTC), a time in the future is replaced by now, and it is published as `reported_at`.
///   The gateway's own `last_seen` is the poll's time.
enum ConsciousnessMapping {
    static let manufacturer = "House Consciousness"
    static let houseDeviceID = "house"

    struct Mapped: Sendable {
        var device: Device
        var values: [String: StateValue]
        var observedAt: Date
        var online: Bool
    }

    // MARK: Devices

    static func map(
        _ wire: WireDevice, vendorID: String, now: Date, temperatureUnit: ConsciousnessOptions.TemperatureUnit = .auto
    ) -> Mapped {
        let backendType = wire.type ?? "unknown"
        let properties = wire.properties ?? [:]
        var keys = ["state"]
        var values: [String: StateValue] = [:]

        let status = wire.status?.lowercased()
        let online = !["offline", "error", "unavailable", "unreachable", "disconnected"].contains(status ?? "")
        let power = (properties["power"] ?? properties["on"] ?? properties["is_on"])?.bool
        values["state"] = .string(isOn(status: status, power: power) ? "ON" : "OFF")

        func add(_ key: String, _ value: StateValue?) {
            guard let value else { return }
            if !keys.contains(key) { keys.append(key) }
            values[key] = value
        }
        func number(_ name: String) -> Double? { properties[name]?.number.flatMap { $0.isFinite ? $0 : nil } }
        func flag(_ name: String) -> StateValue? { properties[name]?.bool.map(StateValue.bool) }

        let type: DeviceType
        switch backendType {
        case "smart_light":
            type = .light
            add("brightness", number("brightness").map { .number(min(max($0, 0), 100)) })
        case "thermostat":
            type = .thermostat
            let current = number("current_temp") ?? number("temperature") ?? number("current_temperature")
            let target = number("target_temp") ?? number("target_temperature")
            let declared = properties["temperature_unit"]?.string ?? properties["unit"]?.string
            let fahrenheit = isFahrenheit(option: temperatureUnit, declared: declared, readings: [current, target].compactMap { $0 })
            func celsius(_ value: Double?) -> StateValue? {
                // (-1e308 - 32) * 5 overflows: such a reading is left out.
                value.flatMap { .finite((fahrenheit ? ($0 - 32) * 5 / 9 : $0).rounded(places: 1)) }
            }
            add("temperature", celsius(current))
            add("target_temperature", celsius(target))
            if !keys.contains("hvac_mode") { keys.append("hvac_mode") }
            if let mode = properties["mode"]?.string ?? properties["hvac_mode"]?.string, let word = hvacMode(mode) {
                values["hvac_mode"] = .string(word)
            }
        case "smart_lock":
            type = .lock
            add("lock", properties["locked"]?.bool.map { .string($0 ? "LOCKED" : "UNLOCKED") })
            add("auto_lock", flag("auto_lock"))
        case "garage_door":
            type = .garageDoor
            add("cover", properties["open"]?.bool.map { .string($0 ? "OPEN" : "CLOSED") })
        case "security_camera":
            type = .camera
            add("recording", flag("recording"))
            add("motion_detection", flag("motion_detection"))
            add("night_vision", nightVision(properties["night_vision"]))
        case "motion_sensor":
            type = .motionSensor
            add("motion", (properties["motion_detected"] ?? properties["motion"])?.bool.map(StateValue.bool))
        case "smart_speaker":
            type = .speaker
            add("volume", number("volume").map { .number(min(max($0, 0), 100)) })
            add("playing", flag("playing"))
            add("track", track(properties["current_track"] ?? properties["track"]))
        default:
            type = .switch
        }
        // Readings any device type may carry, in registry units.
        add("humidity", number("humidity").map { .number(min(max($0, 0), 100)) })
        add("power", number("energy_usage").map(StateValue.number))
        add("battery", (number("battery_level") ?? number("battery")).map { .number(min(max($0, 0), 100)) })
        add("wifi_signal", number("wifi_signal").flatMap { (-150...0).contains($0) ? .number($0) : nil })

        let device = Device(
            vendorID: vendorID, vendorDeviceID: wire.id, name: wire.name ?? wire.id, type: type,
            manufacturer: manufacturer, model: backendType, room: room(wire.location), writableKeys: writableKeys, keys: keys
        )
        // The backend's own time of the reading, as `reported_at`; the reading itself counts as observed now (the
        // poll), so `last_seen` and the heartbeat say the gateway still reads the device when nothing changes.
        if let reported = reportedAt(wire.lastSeen, now: now) { add("reported_at", .string(ISOTime.format(reported))) }
        return Mapped(device: device, values: values, observedAt: now, online: online)
    }

    /// What `PUT /devices/{id}/control` can change: only power (`turn_on`/`turn_off`).
    static let writableKeys: Set<String> = ["state"]

    /// True when thermostat readings are °F: the configured unit, else the device's declared unit, else the
    /// heuristic (a reading above 45 is °F: 45 °C is no room temperature, 45 °F is 7 °C).
    static func isFahrenheit(option: ConsciousnessOptions.TemperatureUnit, declared: String?, readings: [Double]) -> Bool {
        switch option {
        case .celsius: return false
        case .fahrenheit: return true
        case .auto:
            if let declared = declared?.lowercased(), let first = declared.first(where: { $0 != "°" }) {
                if first == "f" { return true }
                if first == "c" { return false }
            }
            return readings.contains { $0 > 45 }
        }
    }

    /// The backend's thermostat mode as an `hvac_mode` word: off, heat, cool, auto. `heating`/`cooling` and
    /// `heat_cool`/`heatcool`/`auto_changeover` are folded in; other words (fan, eco, dry…) have no `hvac_mode`
    /// equivalent and are left out rather than guessed.
    static func hvacMode(_ word: String) -> String? {
        switch word.lowercased().replacing("-", with: "_") {
        case "off": "off"
        case "heat", "heating": "heat"
        case "cool", "cooling": "cool"
        case "auto", "heat_cool", "heatcool", "auto_changeover": "auto"
        default: nil
        }
    }

    /// ON/OFF from the backend's status word (`active`/`inactive`, what `turn_on`/`turn_off` set), else from the
    /// device's on/off property, else OFF: `online` says the device is reachable, not that it is on (a light
    /// `online` with `power: false`, or a camera `online` without any, is OFF).
    static func isOn(status: String?, power: Bool?) -> Bool {
        switch status {
        case "active", "on": true
        case "inactive", "off", "standby": false
        default: power ?? false
        }
    }

    /// A camera's night vision: the demo server's `true`/`false` as `on`/`off`, the device simulators' words as they are.
    static func nightVision(_ value: JSONValue?) -> StateValue? {
        if let flag = value?.bool { return .string(flag ? "on" : "off") }
        guard let word = value?.string?.lowercased(), ["on", "off", "auto"].contains(word) else { return nil }
        return .string(word)
    }

    /// What a speaker plays; Python's `str(None)` and an empty title are no track.
    static func track(_ value: JSONValue?) -> StateValue? {
        guard let title = value?.string, !title.allSatisfy(\.isWhitespace), title != "None" else { return nil }
        return .string(String(title.prefix(256)))
    }

    /// `living_room` → `Living Room`.
    static func room(_ location: String?) -> String? {
        guard let location else { return nil }
        let words = location.split(whereSeparator: { $0 == "_" || $0 == "-" || $0 == " " })
        guard !words.isEmpty else { return nil }
        return words.map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined(separator: " ")
    }

    /// The backend's `last_seen` (local time read as UTC), never later than now; nil when it has none.
    static func reportedAt(_ lastSeen: String?, now: Date) -> Date? {
        guard let lastSeen, let parsed = ISOTime.parse(lastSeen), ISOTime.representable.contains(parsed.timeIntervalSince1970) else { return nil }
        return min(parsed, now)
    }

    // MARK: Ids

    /// Gives every backend device its own topic id. Ids are slugs (`a/b`, `a+b` and `A/B` all become `a_b`),
    /// so distinct backend ids can collide, with each other or with the built-in hub `<vendor>_house`. In a
    /// collision every device whose backend id is not already in topic form (and the backend's own `house`)
    /// gets `_<6 hex of FNV-1a of its raw id>`: stable across polls and restarts, and the one already in topic
    /// form keeps its plain id. An empty id is skipped; an exact duplicate keeps the first. `problems` describes
    /// each collision, skip and duplicate for the log (it does not change from poll to poll).
    static func assignIDs(_ devices: [Mapped], vendorID: String) -> (devices: [Mapped], problems: [String]) {
        var problems: [String] = []
        var seenRaw: Set<String> = []
        var unique: [Mapped] = []
        for mapped in devices {
            let raw = mapped.device.vendorDeviceID
            if raw.isEmpty {
                problems.append("skipped a device with an empty id (name '\(GatewayError.clip(mapped.device.name))')")
                continue
            }
            guard seenRaw.insert(raw).inserted else {
                problems.append("the backend lists id '\(GatewayError.clip(raw))' twice; only the first is used")
                continue
            }
            unique.append(mapped)
        }
        let hub = house(vendorID: vendorID).id
        var groups: [DeviceID: [Int]] = [:]
        for (index, mapped) in unique.enumerated() { groups[mapped.device.id, default: []].append(index) }
        for (id, members) in groups.sorted(by: { $0.key < $1.key }) where members.count > 1 || id == hub {
            var renamed: [String] = []
            for index in members {
                let raw = unique[index].device.vendorDeviceID
                // The hub's id is reserved; otherwise an id already in topic form keeps it.
                if id != hub, Slug.make(raw) == raw { continue }
                let suffixed = suffixedID(id, raw: raw)
                unique[index].device.id = suffixed
                renamed.append("'\(GatewayError.clip(raw))' → \(suffixed.rawValue)")
            }
            let clash = id == hub ? "the built-in hub id \(id.rawValue)" : "the same topic id \(id.rawValue)"
            problems.append("backend ids \(members.map { "'\(GatewayError.clip(unique[$0].device.vendorDeviceID))'" }.joined(separator: ", ")) "
                + "collide on \(clash); kept apart as \(renamed.joined(separator: ", "))")
        }
        return (unique, problems)
    }

    /// `id` with `_` and six hex digits of the raw id's FNV-1a hash, cut so the whole stays a valid slug.
    static func suffixedID(_ id: DeviceID, raw: String) -> DeviceID {
        var hash: UInt32 = 0x811C_9DC5
        for byte in raw.utf8 {
            hash ^= UInt32(byte)
            hash = hash &* 0x0100_0193
        }
        let hex = String(hash, radix: 16)
        let tag = String((String(repeating: "0", count: 8 - hex.count) + hex).prefix(6))
        let text = String(id.rawValue.prefix(Slug.maxLength - tag.count - 1)) + "_" + tag
        return DeviceID(validating: text) ?? id
    }

    // MARK: The house

    static func house(vendorID: String) -> Device {
        Device(
            vendorID: vendorID, vendorDeviceID: houseDeviceID, name: "House Consciousness", type: .hub,
            manufacturer: manufacturer, model: "Consciousness system", room: nil, writableKeys: [],
            keys: ["consciousness_status", "awareness_level", "emotion", "arousal", "valence"]
        )
    }

    static func houseValues(_ status: WireStatus, emotions: WireEmotion?) -> [String: StateValue] {
        var values: [String: StateValue] = [:]
        if let word = status.status { values["consciousness_status"] = .string(word) }
        if let level = status.awarenessLevel, level.isFinite {
            // The backend gives 0…1; a value above 1 is taken as already in percent.
            values["awareness_level"] = .number(min(max(level <= 1 ? level * 100 : level, 0), 100))
        }
        let emotion = status.emotionalState ?? emotions
        if let primary = emotion?.primary { values["emotion"] = .string(primary) }
        if let arousal = emotion?.arousal, arousal.isFinite { values["arousal"] = .number(min(max(arousal, 0), 1)) }
        if let valence = emotion?.valence, valence.isFinite { values["valence"] = .number(min(max(valence, -1), 1)) }
        return values
    }
}
