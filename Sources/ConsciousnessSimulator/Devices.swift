#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The seven devices the FastAPI server seeds, one per device type, with the properties it serves
/// (`consciousness/demo_devices.py`): only the light has `power`; cameras, speakers and the garage report
/// `wifi_signal` in dBm. Ids and locations are the simulator's own.
enum SeedDevices {
    static func make(lastSeen: String) -> [SimJSON] {
        [
            device("thermostat-main", "Main Thermostat", "thermostat", "living_room", "upnp", [
                // The running FastAPI server's thermostat: whole degrees Fahrenheit, `current_temp`/`target_temp`.
                ("current_temp", .int(72)), ("target_temp", .int(72)), ("mode", .string("auto")), ("humidity", .int(45)),
                ("battery", .int(100)),
            ], lastSeen),
            device("lights-kitchen", "Kitchen Smart Lights", "smart_light", "kitchen", "mdns", [
                ("brightness", .int(80)), ("color", .string("warm_white")), ("power", .bool(true)),
                ("energy_usage", .double(12.5)),
            ], lastSeen),
            device("camera-front-door", "Front Door Camera", "security_camera", "front_door", "upnp", [
                ("recording", .bool(true)), ("motion_detection", .bool(true)), ("night_vision", .bool(true)),
                ("wifi_signal", .int(-45)),
            ], lastSeen),
            device("sensor-hallway-motion", "Hallway Motion Sensor", "motion_sensor", "hallway", "bluetooth", [
                ("motion_detected", .bool(false)), ("battery", .int(85)), ("sensitivity", .string("medium")),
                ("last_motion", .string("2025-06-24T22:30:00")),
            ], lastSeen),
            device("speaker-living-room", "Living Room Speaker", "smart_speaker", "living_room", "mdns", [
                ("volume", .int(30)), ("playing", .bool(false)), ("current_track", .string("None")), ("wifi_signal", .int(-38)),
            ], lastSeen),
            device("lock-front-door", "Front Door Lock", "smart_lock", "front_door", "bluetooth", [
                ("locked", .bool(true)), ("battery", .int(78)), ("auto_lock", .bool(true)),
                ("unlock_methods", .array([.string("key"), .string("code"), .string("app")])),
            ], lastSeen),
            device("garage-door-main", "Garage Door", "garage_door", "garage", "upnp", [
                ("open", .bool(false)), ("wifi_signal", .int(-52)), ("last_operation", .string("2025-06-24T18:45:00")),
                ("remote_access", .bool(true)),
            ], lastSeen),
        ]
    }

    private static func device(
        _ id: String, _ name: String, _ type: String, _ location: String, _ discovery: String,
        _ properties: [(String, SimJSON)], _ lastSeen: String
    ) -> SimJSON {
        .object([
            ("id", .string(id)),
            ("name", .string(name)),
            ("type", .string(type)),
            ("status", .string("online")),
            ("location", .string(location)),
            ("properties", .object(properties)),
            ("last_seen", .string(lastSeen)),
            ("discovery_method", .string(discovery)),
        ])
    }
}

/// Python's `datetime.now().isoformat()`: local time, microseconds, no zone.
func localISOTimestamp(secondsSince1970: Double) -> String {
    let whole = secondsSince1970.rounded(.down)
    var seconds = time_t(whole)
    let micros = min(999_999, max(0, Int(((secondsSince1970 - whole) * 1_000_000).rounded(.down))))
    var parts = tm()
    localtime_r(&seconds, &parts)
    func pad(_ value: Int32, _ width: Int) -> String {
        let text = String(value)
        return String(repeating: "0", count: max(0, width - text.count)) + text
    }
    let date = "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))"
    let time = "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2))"
    return "\(date)T\(time).\(pad(Int32(micros), 6))"
}
