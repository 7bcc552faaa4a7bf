import GatewayModel

/// `alerts:`: the rules the alerts extension evaluates on every device's readings, whatever the vendor.
public struct AlertSettings: Sendable, Equatable {
    /// A reading's limits: an alert while it is above `above` or below `below`.
    public struct Threshold: Sendable, Equatable {
        public var above: Double?
        public var below: Double?

        public init(above: Double? = nil, below: Double? = nil) {
            self.above = above
            self.below = below
        }
    }

    public var enabled = true
    /// Water running without a break above this (L/min) for `leakFlowDuration` is a leak.
    public var leakFlowAbove: Double = 0.2
    /// Seconds of continuous flow before it is a leak (60 min).
    public var leakFlowDuration: Double = 3600
    /// Limits per key for every room; `rooms` overrides them per room (by the room's slug).
    public var environment: [String: Threshold] = AlertSettings.defaultEnvironment
    public var rooms: [String: [String: Threshold]] = [:]
    /// `unusual_consumption`: an hour's use above `consumptionFactor` × the same hour's mean over the last
    /// `consumptionDays` days (at least `consumptionMinDays` of them in the cache).
    public var consumptionFactor: Double = 2
    public var consumptionDays = 14
    public var consumptionMinDays = 3

    /// The counters whose hourly use is compared, in order of preference (one per device), with the least use
    /// an hour must have before it can be unusual (a few litres against a few more is no news).
    public static let consumptionKeys: [(key: String, minimum: Double)] = [
        ("home_energy", 0.3), ("water_volume", 20), ("gas_volume", 0.2), ("grid_import_energy", 0.3), ("energy", 0.3),
    ]

    public init() {}

    /// Common indoor guidance: CO2 above 1,000 ppm (ASHRAE 62.1's ventilation target is ~700 ppm above outdoors);
    /// relative humidity kept between 30 and 60 % (ASHRAE 55, EPA: mould above 60 %); 16–28 °C; PM2.5 above
    /// 35 µg/m³ (the US EPA 24-hour standard); TVOC above 1,000 µg/m³ (Germany's UBA level 3) or 2,200 ppb.
    public static let defaultEnvironment: [String: Threshold] = [
        "co2": Threshold(above: 1000),
        "humidity": Threshold(above: 60, below: 30),
        "temperature": Threshold(above: 28, below: 16),
        "pm25": Threshold(above: 35),
        "voc": Threshold(above: 1000),
        "voc_ppb": Threshold(above: 2200),
    ]

    /// The limits for `key` in `room` (a slug), if any.
    public func threshold(_ key: String, room: String?) -> Threshold? {
        if let room, let specific = rooms[room]?[key] { return specific }
        return environment[key]
    }

    /// A rule that can hold for a device: its name (`water_leak`, `co2_high`), label, and Home Assistant
    /// binary_sensor `device_class`.
    public struct Rule: Sendable, Equatable {
        public var name: String
        public var label: String
        public var deviceClass: String
    }

    /// The room's limits (`<key>_high`/`_low`) hold for devices that measure their surroundings (sensors, air
    /// monitors, motion sensors, thermostats, hubs, buttons: `DeviceType.measuresSurroundings`), never for an
    /// appliance's own readings (a water heater's tank, an EV charger, a fridge, a plug, a meter), and never for a
    /// settable key (a thermostat's set-point is not a reading of the room).
    public static func limitsApply(to device: Device, key: String) -> Bool {
        device.type.measuresSurroundings && StateKeys.spec(key)?.writable != true
    }

    /// The rules that apply to a device (its keys, the limits for its room): one Home Assistant binary sensor
    /// each, and one retained `<base>/alert/<rule>_<device id>` topic.
    public func rules(for device: Device) -> [Rule] {
        guard enabled else { return [] }
        var rules: [Rule] = []
        if device.keys.contains("leak") || device.keys.contains("water_flow") {
            rules.append(Rule(name: "water_leak", label: "Water leak", deviceClass: "moisture"))
        }
        if consumptionFactor > 0, Self.consumptionKeys.contains(where: { device.keys.contains($0.key) }) {
            rules.append(Rule(name: "unusual_consumption", label: "Unusual consumption", deviceClass: "problem"))
        }
        for key in device.keys.sorted() {
            guard Self.limitsApply(to: device, key: key), let limit = threshold(key, room: device.roomSlug), let spec = StateKeys.spec(key) else { continue }
            if limit.above != nil { rules.append(Rule(name: "\(key)_high", label: "\(spec.label) high", deviceClass: key == "temperature" ? "heat" : "problem")) }
            if limit.below != nil { rules.append(Rule(name: "\(key)_low", label: "\(spec.label) low", deviceClass: key == "temperature" ? "cold" : "problem")) }
        }
        return rules
    }
}
