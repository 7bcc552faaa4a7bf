#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel

/// Turns backend devices and the house's status into gateway devices and normalized state.
///
/// Decisions (the backend only knows `turn_on` / `turn_off`, which switch a device's power and `status`):
/// - Every device gets `state` (ON/OFF) from `status`: `active`/`online` → ON, `inactive` → OFF; for other
///   words (`offline`, `error`) the `power` property decides, and the device is reported unavailable.
/// - `smart_lock` reports `lock` from its `locked` property and `garage_door` reports `cover` from `open`,
///   because that is what the backend really says. They are NOT driven by turn_on/turn_off: those change only
///   power, so mapping LOCK → turn_on would confirm a lock that never happened. Commands for them are refused.
/// - Temperatures are taken as °C (the backend gives no unit; a `temperature_unit` starting with "f" converts).
/// - `last_seen` is a local time without a zone; it is read as UTC (the gateway and backend are expected to run
///   in UTC), and a time in the future is replaced by now.
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

    static func map(_ wire: WireDevice, vendorID: String, now: Date) -> Mapped {
        let backendType = wire.type ?? "unknown"
        let properties = wire.properties ?? [:]
        var keys = ["state"]
        var values: [String: StateValue] = [:]

        let status = wire.status?.lowercased()
        let online = !["offline", "error", "unavailable", "unreachable", "disconnected"].contains(status ?? "")
        if let on = isOn(status: status, power: properties["power"]?.bool) {
            values["state"] = .string(on ? "ON" : "OFF")
        }

        func add(_ key: String, _ value: StateValue?) {
            guard let value else { return }
            if !keys.contains(key) { keys.append(key) }
            values[key] = value
        }
        func number(_ name: String) -> Double? { properties[name]?.number }
        let fahrenheit = (properties["temperature_unit"]?.string ?? properties["unit"]?.string)?.lowercased().hasPrefix("f") ?? false
        func celsius(_ value: Double?) -> StateValue? {
            value.map { .number(fahrenheit ? ($0 - 32) * 5 / 9 : $0) }
        }

        let type: DeviceType
        switch backendType {
        case "smart_light":
            type = .light
            add("brightness", number("brightness").map { .number(min(max($0, 0), 100)) })
        case "thermostat":
            type = .thermostat
            add("temperature", celsius(number("temperature") ?? number("current_temperature")))
            add("target_temperature", celsius(number("target_temperature")))
        case "smart_lock":
            type = .lock
            add("lock", properties["locked"]?.bool.map { .string($0 ? "LOCKED" : "UNLOCKED") })
        case "garage_door":
            type = .garageDoor
            add("cover", properties["open"]?.bool.map { .string($0 ? "OPEN" : "CLOSED") })
        case "security_camera":
            type = .camera
        case "motion_sensor":
            type = .motionSensor
            add("motion", (properties["motion_detected"] ?? properties["motion"])?.bool.map(StateValue.bool))
        case "smart_speaker":
            type = .speaker
        default:
            type = .switch
        }
        // Readings any device type may carry, in registry units.
        add("humidity", number("humidity").map { .number(min(max($0, 0), 100)) })
        add("power", number("energy_usage").map(StateValue.number))
        add("battery", (number("battery_level") ?? number("battery")).map { .number(min(max($0, 0), 100)) })

        let device = Device(
            vendorID: vendorID, vendorDeviceID: wire.id, name: wire.name ?? wire.id, type: type,
            manufacturer: manufacturer, model: backendType, room: room(wire.location), keys: keys
        )
        return Mapped(device: device, values: values, observedAt: observedAt(wire.lastSeen, now: now), online: online)
    }

    /// ON/OFF from the backend's status word, falling back to the `power` property.
    static func isOn(status: String?, power: Bool?) -> Bool? {
        switch status {
        case "active", "online", "on": true
        case "inactive", "off", "standby": false
        default: power
        }
    }

    /// `living_room` → `Living Room`.
    static func room(_ location: String?) -> String? {
        guard let location else { return nil }
        let words = location.split(whereSeparator: { $0 == "_" || $0 == "-" || $0 == " " })
        guard !words.isEmpty else { return nil }
        return words.map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined(separator: " ")
    }

    static func observedAt(_ lastSeen: String?, now: Date) -> Date {
        guard let lastSeen, let parsed = ISOTime.parse(lastSeen) else { return now }
        return min(parsed, now)
    }

    // MARK: The house

    static func house(vendorID: String) -> Device {
        Device(
            vendorID: vendorID, vendorDeviceID: houseDeviceID, name: "House Consciousness", type: .hub,
            manufacturer: manufacturer, model: "Consciousness system", room: nil,
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
