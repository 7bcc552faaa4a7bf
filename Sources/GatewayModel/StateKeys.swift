import Synchronization

/// The registry of normalized state keys. Each key has exactly one unit; vendors convert
/// into it, and the topic contract (`mqtt-topics.md`) documents the same table.
public struct KeySpec: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        /// A number, optionally bounded (inclusive) and with a step for settable keys.
        case number(min: Double?, max: Double?)
        /// One of a fixed set of upper-case or lower-case words.
        case enumeration([String])
        case bool
        case text
        /// ISO 8601 UTC text.
        case timestamp
        /// A colour: `{"hue": 0…360, "saturation": 0…100}` and/or `{"x": 0…1, "y": 0…1}` (CIE 1931).
        case color
    }

    /// How readings of this key behave over time (history roll-ups and Home Assistant's state_class).
    public enum Series: String, Sendable, Hashable {
        /// Not kept in history (settings, words).
        case none
        /// An instantaneous value: roll up as min / max / avg / last.
        case measurement
        /// A cumulative counter that only grows: roll up as last and the sum of increases.
        case counter
    }

    public enum Category: String, Sendable, Hashable {
        case control, energy, environment, status
    }

    public let name: String
    public let unit: String?
    public let kind: Kind
    /// Settable through `<base>/device/<id>/set`.
    public let writable: Bool
    /// Words accepted in commands when they differ from the reported ones (LOCK vs LOCKED).
    public let commands: [String]
    public let series: Series
    public let category: Category
    public let label: String

    public init(
        _ name: String, label: String, unit: String? = nil, kind: Kind, writable: Bool = false,
        commands: [String] = [], series: Series = .none, category: Category = .status
    ) {
        self.name = name
        self.label = label
        self.unit = unit
        self.kind = kind
        self.writable = writable
        self.commands = commands
        self.series = series
        self.category = category
    }
}

public enum StateKeys {
    // Control
    public static let state = KeySpec("state", label: "State", kind: .enumeration(["ON", "OFF"]), writable: true, commands: ["ON", "OFF", "TOGGLE"], category: .control)
    public static let brightness = KeySpec("brightness", label: "Brightness", unit: "%", kind: .number(min: 0, max: 100), writable: true, category: .control)
    public static let colorTempKelvin = KeySpec("color_temp_kelvin", label: "Color temperature", unit: "K", kind: .number(min: 2000, max: 6500), writable: true, category: .control)
    /// A light's colour: hue (°) and saturation (%), and the CIE 1931 x/y where the light reports them. Set with
    /// `{"color":{"hue":36,"saturation":80}}` or `{"color":{"x":0.45,"y":0.41}}` (Home Assistant's `h`/`s` too).
    public static let color = KeySpec("color", label: "Color", kind: .color, writable: true, category: .control)
    /// Which of a light's colour settings is in force: `hs`, `xy` or `color_temp` (Home Assistant's names).
    public static let colorMode = KeySpec("color_mode", label: "Color mode", kind: .enumeration(["hs", "xy", "color_temp"]), category: .control)
    public static let lock = KeySpec("lock", label: "Lock", kind: .enumeration(["LOCKED", "UNLOCKED", "LOCKING", "UNLOCKING", "JAMMED"]), writable: true, commands: ["LOCK", "UNLOCK"], category: .control)
    public static let cover = KeySpec("cover", label: "Cover", kind: .enumeration(["OPEN", "CLOSED", "OPENING", "CLOSING", "STOPPED"]), writable: true, commands: ["OPEN", "CLOSE", "STOP"], category: .control)
    public static let position = KeySpec("position", label: "Position", unit: "%", kind: .number(min: 0, max: 100), writable: true, category: .control)
    public static let targetTemperature = KeySpec("target_temperature", label: "Target temperature", unit: "°C", kind: .number(min: 5, max: 35), writable: true, category: .control)
    public static let hvacMode = KeySpec(
        "hvac_mode", label: "HVAC mode", kind: .enumeration(["off", "heat", "cool", "auto", "fan_only", "dry"]), writable: true, category: .control
    )
    public static let hvacAction = KeySpec("hvac_action", label: "HVAC action", kind: .enumeration(["off", "idle", "heating", "cooling"]), category: .control)

    /// A fan's mode (Matter FanControl's FanMode) and its speed in % (PercentSetting / PercentCurrent).
    public static let fanMode = KeySpec(
        "fan_mode", label: "Fan mode", kind: .enumeration(["off", "low", "medium", "high", "on", "auto", "smart"]), writable: true, category: .control
    )
    public static let fanSpeed = KeySpec("fan_speed", label: "Fan speed", unit: "%", kind: .number(min: 0, max: 100), writable: true, category: .control)

    // Environment
    public static let temperature = KeySpec("temperature", label: "Temperature", unit: "°C", kind: .number(min: nil, max: nil), series: .measurement, category: .environment)
    public static let humidity = KeySpec("humidity", label: "Humidity", unit: "%", kind: .number(min: 0, max: 100), series: .measurement, category: .environment)
    public static let co2 = KeySpec("co2", label: "CO2", unit: "ppm", kind: .number(min: 0, max: nil), series: .measurement, category: .environment)
    public static let voc = KeySpec("voc", label: "VOC", unit: "µg/m³", kind: .number(min: 0, max: nil), series: .measurement, category: .environment)
    public static let vocPpb = KeySpec("voc_ppb", label: "VOC", unit: "ppb", kind: .number(min: 0, max: nil), series: .measurement, category: .environment)
    public static let pm25 = KeySpec("pm25", label: "PM2.5", unit: "µg/m³", kind: .number(min: 0, max: nil), series: .measurement, category: .environment)
    public static let pm10 = KeySpec("pm10", label: "PM10", unit: "µg/m³", kind: .number(min: 0, max: nil), series: .measurement, category: .environment)
    public static let illuminance = KeySpec("illuminance", label: "Illuminance", unit: "lx", kind: .number(min: 0, max: nil), series: .measurement, category: .environment)
    public static let motion = KeySpec("motion", label: "Motion", kind: .bool, category: .environment)
    /// Someone is in the room (an occupancy sensor: presence, not movement).
    public static let occupancy = KeySpec("occupancy", label: "Occupancy", kind: .bool, category: .environment)
    /// Sound level, A-weighted.
    public static let noise = KeySpec("noise", label: "Noise", unit: "dBA", kind: .number(min: 0, max: nil), series: .measurement, category: .environment)
    public static let dewPoint = KeySpec("dew_point", label: "Dew point", unit: "°C", kind: .number(min: nil, max: nil), series: .measurement, category: .environment)
    /// A monitor's own air quality score (Awair: 0 worst … 100 best); no unit.
    public static let score = KeySpec("score", label: "Air quality score", kind: .number(min: 0, max: 100), series: .measurement, category: .environment)
    /// A water leak the vendor detected (Flume's active leak alerts).
    public static let leak = KeySpec("leak", label: "Leak", kind: .bool, category: .environment)
    /// A water leak detector's own state (true = water detected).
    public static let waterLeak = KeySpec("water_leak", label: "Water leak", kind: .bool, category: .environment)
    /// A door or window contact (true = closed, as zigbee2mqtt has it).
    public static let contact = KeySpec("contact", label: "Contact", kind: .bool, category: .environment)
    /// Smoke and carbon monoxide alarms (true = alarm).
    public static let smoke = KeySpec("smoke", label: "Smoke", kind: .bool, category: .environment)
    public static let carbonMonoxide = KeySpec("carbon_monoxide", label: "Carbon monoxide", kind: .bool, category: .environment)
    /// Carbon monoxide concentration.
    public static let co = KeySpec("co", label: "CO", unit: "ppm", kind: .number(min: 0, max: nil), series: .measurement, category: .environment)
    /// A sensor's own air quality class (Matter's AirQuality cluster).
    public static let airQuality = KeySpec(
        "air_quality", label: "Air quality", kind: .enumeration(["unknown", "good", "fair", "moderate", "poor", "very_poor", "extremely_poor"]),
        category: .environment
    )

    // Energy: power in W (grid + import / − export, battery + discharge / − charge), energy in kWh.
    public static let power = KeySpec("power", label: "Power", unit: "W", kind: .number(min: nil, max: nil), series: .measurement, category: .energy)
    public static let energy = KeySpec("energy", label: "Energy", unit: "kWh", kind: .number(min: 0, max: nil), series: .counter, category: .energy)
    public static let solarPower = KeySpec("solar_power", label: "Solar power", unit: "W", kind: .number(min: nil, max: nil), series: .measurement, category: .energy)
    public static let gridPower = KeySpec("grid_power", label: "Grid power", unit: "W", kind: .number(min: nil, max: nil), series: .measurement, category: .energy)
    public static let batteryPower = KeySpec("battery_power", label: "Battery power", unit: "W", kind: .number(min: nil, max: nil), series: .measurement, category: .energy)
    public static let homePower = KeySpec("home_power", label: "Home power", unit: "W", kind: .number(min: nil, max: nil), series: .measurement, category: .energy)
    public static let batteryLevel = KeySpec("battery_level", label: "Battery level", unit: "%", kind: .number(min: 0, max: 100), series: .measurement, category: .energy)
    public static let solarEnergy = KeySpec("solar_energy", label: "Solar energy", unit: "kWh", kind: .number(min: 0, max: nil), series: .counter, category: .energy)
    public static let gridImportEnergy = KeySpec("grid_import_energy", label: "Grid import", unit: "kWh", kind: .number(min: 0, max: nil), series: .counter, category: .energy)
    public static let gridExportEnergy = KeySpec("grid_export_energy", label: "Grid export", unit: "kWh", kind: .number(min: 0, max: nil), series: .counter, category: .energy)
    public static let batteryChargeEnergy = KeySpec("battery_charge_energy", label: "Battery charged", unit: "kWh", kind: .number(min: 0, max: nil), series: .counter, category: .energy)
    public static let batteryDischargeEnergy = KeySpec("battery_discharge_energy", label: "Battery discharged", unit: "kWh", kind: .number(min: 0, max: nil), series: .counter, category: .energy)
    public static let homeEnergy = KeySpec("home_energy", label: "Home energy", unit: "kWh", kind: .number(min: 0, max: nil), series: .counter, category: .energy)
    public static let waterFlow = KeySpec("water_flow", label: "Water flow", unit: "L/min", kind: .number(min: 0, max: nil), series: .measurement, category: .energy)
    public static let waterVolume = KeySpec("water_volume", label: "Water", unit: "L", kind: .number(min: 0, max: nil), series: .counter, category: .energy)
    public static let gasVolume = KeySpec("gas_volume", label: "Gas", unit: "m³", kind: .number(min: 0, max: nil), series: .counter, category: .energy)
    /// The highest power a producer (a microinverter) has reported.
    public static let maxPower = KeySpec("max_power", label: "Peak power", unit: "W", kind: .number(min: nil, max: nil), series: .measurement, category: .energy)
    /// The mains voltage and frequency where a meter measures them (one phase: `voltage`; more: `voltage_l1`…).
    public static let voltage = KeySpec("voltage", label: "Voltage", unit: "V", kind: .number(min: 0, max: nil), series: .measurement, category: .energy)
    /// The current a device draws.
    public static let current = KeySpec("current", label: "Current", unit: "A", kind: .number(min: nil, max: nil), series: .measurement, category: .energy)
    public static let frequency = KeySpec("frequency", label: "Frequency", unit: "Hz", kind: .number(min: 0, max: nil), series: .measurement, category: .energy)
    /// The site's connection to the grid (a battery system that can island).
    public static let gridStatus = KeySpec(
        "grid_status", label: "Grid status", kind: .enumeration(["connected", "islanded", "transitioning", "waiting"]), category: .energy
    )
    /// Battery charge kept for outages.
    public static let backupReserve = KeySpec(
        "backup_reserve", label: "Backup reserve", unit: "%", kind: .number(min: 0, max: 100), writable: true, category: .energy
    )
    /// The current an EV charger offers the car (its pilot signal), where the charger lets it be set.
    public static let chargingCurrent = KeySpec(
        "charging_current", label: "Charging current", unit: "A", kind: .number(min: 0, max: 80), writable: true, category: .energy
    )
    /// An EV charger's session (Matter Energy EVSE's State): whether a car is plugged in, wants energy, charges.
    public static let chargingState = KeySpec(
        "charging_state", label: "Charging state",
        kind: .enumeration(["not_plugged_in", "plugged_in_no_demand", "plugged_in_demand", "charging", "discharging", "session_ending", "fault"]),
        category: .energy
    )
    /// What an EV charger may do (Matter Energy EVSE's SupplyState); `state` ON is charging enabled.
    public static let supplyState = KeySpec(
        "supply_state", label: "Supply state",
        kind: .enumeration(["disabled", "charging_enabled", "discharging_enabled", "disabled_error", "disabled_diagnostics", "enabled"]),
        category: .energy
    )
    /// How a home battery uses its charge.
    public static let operationMode = KeySpec(
        "operation_mode", label: "Operation mode", kind: .enumeration(["self_consumption", "autonomous", "backup"]), writable: true,
        category: .energy
    )

    // Status
    public static let battery = KeySpec("battery", label: "Battery", unit: "%", kind: .number(min: 0, max: 100), series: .measurement)
    /// The device says its battery is low (devices that report no level, or a flag beside it).
    public static let batteryLow = KeySpec("battery_low", label: "Battery low", kind: .bool)
    /// A valve or outlet is in use (water flows; a load draws power).
    public static let inUse = KeySpec("in_use", label: "In use", kind: .bool)
    /// The vendor's own time of the reading (ISO 8601), where it gives one apart from the gateway's `last_seen`.
    public static let reportedAt = KeySpec("reported_at", label: "Reported at", kind: .text)
    public static let awarenessLevel = KeySpec("awareness_level", label: "Awareness", unit: "%", kind: .number(min: 0, max: 100), series: .measurement)
    public static let emotion = KeySpec("emotion", label: "Emotion", kind: .text)
    public static let arousal = KeySpec("arousal", label: "Arousal", kind: .number(min: 0, max: 1), series: .measurement)
    public static let valence = KeySpec("valence", label: "Valence", kind: .number(min: -1, max: 1), series: .measurement)
    /// Read-only extras the consciousness backend serves for its cameras, speakers, locks and radios.
    public static let recording = KeySpec("recording", label: "Recording", kind: .bool)
    public static let motionDetection = KeySpec("motion_detection", label: "Motion detection", kind: .bool)
    public static let nightVision = KeySpec("night_vision", label: "Night vision", kind: .enumeration(["on", "off", "auto"]))
    public static let volume = KeySpec("volume", label: "Volume", unit: "%", kind: .number(min: 0, max: 100))
    public static let playing = KeySpec("playing", label: "Playing", kind: .bool)
    public static let track = KeySpec("track", label: "Track", kind: .text)
    public static let autoLock = KeySpec("auto_lock", label: "Auto lock", kind: .bool)
    public static let wifiSignal = KeySpec("wifi_signal", label: "Wi-Fi signal", unit: "dBm", kind: .number(min: -150, max: 0), series: .measurement)

    public static let all: [KeySpec] = [
        state, brightness, colorTempKelvin, color, colorMode, lock, cover, position, targetTemperature, hvacMode, hvacAction, fanMode, fanSpeed,
        temperature, humidity, co2, voc, vocPpb, pm25, pm10, illuminance, motion, occupancy, noise, dewPoint, score, leak,
        waterLeak, contact, smoke, carbonMonoxide, co, airQuality,
        power, energy, solarPower, gridPower, batteryPower, homePower, batteryLevel,
        solarEnergy, gridImportEnergy, gridExportEnergy, batteryChargeEnergy, batteryDischargeEnergy, homeEnergy,
        waterFlow, waterVolume, gasVolume, maxPower, gridStatus, backupReserve, chargingCurrent, chargingState, supplyState, operationMode,
        voltage, current, frequency, battery, batteryLow, inUse, reportedAt, awarenessLevel, emotion, arousal, valence,
        recording, motionDetection, nightVision, volume, playing, track, autoLock, wifiSignal,
    ] + phases

    /// Keys a meter on a multi-phase supply also reports per phase, as `<key>_l1`, `<key>_l2`, `<key>_l3`.
    public static let phased: [KeySpec] = [solarPower, homePower, gridPower, solarEnergy, homeEnergy, gridImportEnergy, gridExportEnergy, voltage]

    /// `<key>_l1` … `<key>_l3` of every phased key: the same unit, kind and series; labelled "… L1".
    public static let phases: [KeySpec] = phased.flatMap { base in
        (1...3).map { line in
            KeySpec(
                "\(base.name)_l\(line)", label: "\(base.label) L\(line)", unit: base.unit, kind: base.kind, series: base.series,
                category: base.category
            )
        }
    }

    /// `solar_power_l2` → (`solar_power`, 2); nil for a key that is not a phase of a phased key.
    public static func phase(of name: String) -> (base: String, line: Int)? {
        guard name.count > 3, let line = name.last?.wholeNumberValue, (1...3).contains(line), name.dropLast().hasSuffix("_l") else { return nil }
        let base = String(name.dropLast(3))
        return phased.contains { $0.name == base } ? (base, line) : nil
    }

    public static let byName: [String: KeySpec] = Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0) })

    /// The spec of a key; also of `<key>_<n>`, the same key on a device's further endpoint (a Matter plug with two
    /// outlets reports `state` and `state_2`): the same unit and kind, labelled "… 2".
    public static func spec(_ name: String) -> KeySpec? {
        if let spec = byName[name] ?? vendorKeys.withLock({ $0[name] }) { return spec }
        guard let (base, endpoint) = endpointKey(name), let spec = byName[base] ?? vendorKeys.withLock({ $0[base] }) else { return nil }
        return KeySpec(name, label: "\(spec.label) \(endpoint)", unit: spec.unit, kind: spec.kind, writable: spec.writable,
                       commands: spec.commands, series: spec.series, category: spec.category)
    }

    /// `state_2` → (`state`, 2): a registered key followed by `_` and an endpoint number (2 … 65534).
    public static func endpointKey(_ name: String) -> (base: String, endpoint: Int)? {
        guard let underscore = name.lastIndex(of: "_"), let number = Int(name[name.index(after: underscore)...]), (1...65534).contains(number),
              !name[name.index(after: underscore)...].hasPrefix("0") else { return nil }
        let base = String(name[..<underscore])
        return byName[base] != nil || vendorKeys.withLock({ $0[base] }) != nil ? (base, number) : nil
    }

    /// Keys the gateway adds to every snapshot itself; not settable, not in the registry of readings.
    public static let reserved: Set<String> = ["last_seen", "stale"]
}

/// Keys only one vendor reports (the consciousness backend's `consciousness_status`), declared by its factory
/// (`VendorFactory.stateKeys`) and registered when the gateway lists its vendors or a vendor is made, before any
/// device of that vendor exists. The model's own keys cannot be replaced.
private let vendorKeys = Mutex<[String: KeySpec]>([:])

extension StateKeys {
    /// Adds vendor-declared keys; a key the model already has, or one registered before, stays as it was.
    public static func register(_ specs: [KeySpec]) {
        vendorKeys.withLock { keys in
            for spec in specs where byName[spec.name] == nil && keys[spec.name] == nil { keys[spec.name] = spec }
        }
    }

    /// The vendor-declared keys registered so far, by name.
    public static var registered: [KeySpec] { vendorKeys.withLock { $0.values.sorted { $0.name < $1.name } } }
}
