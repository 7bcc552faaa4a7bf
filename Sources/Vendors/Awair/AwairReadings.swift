#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel

/// Awair readings → the gateway's keys (units as Awair sends them: °C, %RH, ppm, ppb, µg/m³, lux, dBA).
/// `voc` is in ppb (`voc_ppb`); `spl_a` is `noise`; the first-generation Awair's `dust` (a PM2.5/PM10 mix)
/// fills both `pm25` and `pm10` where the device has no separate sensors, as Home Assistant's Awair
/// integration shows it; the Local API's `pm10_est` is `pm10`.
enum AwairReadings {
    static let cloudKeys: [String: String] = [
        "temp": "temperature", "humid": "humidity", "co2": "co2", "voc": "voc_ppb", "pm25": "pm25", "pm10": "pm10",
        "lux": "illuminance", "spl_a": "noise",
    ]

    /// The key order of an Awair device.
    static let order = ["temperature", "humidity", "co2", "voc_ppb", "pm25", "pm10", "illuminance", "noise", "dew_point", "score"]

    static func cloud(_ reading: WireCloudLatest.Reading) -> [String: StateValue] {
        var values: [String: StateValue] = [:]
        for sensor in reading.sensors ?? [] {
            guard let value = sensor.value, value.isFinite else { continue }
            if let key = cloudKeys[sensor.comp] { values[key] = .number(rounded(value)) }
        }
        if let dust = reading.sensors?.first(where: { $0.comp == "dust" })?.value, dust.isFinite {
            if values["pm25"] == nil { values["pm25"] = .number(rounded(dust)) }
            if values["pm10"] == nil { values["pm10"] = .number(rounded(dust)) }
        }
        if let score = reading.score, score.isFinite { values["score"] = .number(rounded(score)) }
        return values
    }

    static func local(_ latest: WireLocalLatest) -> [String: StateValue] {
        let pairs: [(String, Double?)] = [
            ("temperature", latest.temp), ("humidity", latest.humid), ("co2", latest.co2), ("voc_ppb", latest.voc),
            ("pm25", latest.pm25), ("pm10", latest.pm10_est), ("illuminance", latest.lux), ("noise", latest.spl_a),
            ("dew_point", latest.dew_point), ("score", latest.score),
        ]
        var values: [String: StateValue] = [:]
        for (key, value) in pairs {
            if let value, value.isFinite { values[key] = .number(rounded(value)) }
        }
        return values
    }

    /// Awair sends float32 noise (21.770000457763672): two decimals say all the sensor knows.
    static func rounded(_ value: Double) -> Double { value.rounded(places: 2) }

    static func ordered(_ keys: some Sequence<String>) -> [String] {
        let present = Set(keys)
        return order.filter(present.contains)
    }

    /// `LIVING_ROOM` → `Living Room`.
    static func roomName(_ roomType: String?) -> String? {
        guard let roomType, !roomType.isEmpty, roomType != "OTHER" else { return nil }
        return roomType.split(separator: "_").map { $0.prefix(1).uppercased() + $0.dropFirst().lowercased() }.joined(separator: " ")
    }
}
