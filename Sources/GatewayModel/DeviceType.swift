/// What a device is, as users and Home Assistant think of it.
public enum DeviceType: String, Sendable, Hashable, Codable, CaseIterable {
    case light
    case `switch`
    case plug
    case lock
    case cover
    case garageDoor = "garage_door"
    case thermostat
    case sensor
    case airQuality = "air_quality"
    case energyMeter = "energy_meter"
    case waterMeter = "water_meter"
    case gasMeter = "gas_meter"
    case evCharger = "ev_charger"
    case fan
    case camera
    case speaker
    case motionSensor = "motion_sensor"
    case hub
    /// A button or switch that reports presses as one-off events (`eventTypes`), not state.
    case button
    /// A water heater (its temperatures are its tank's).
    case waterHeater = "water_heater"
    /// A household appliance: a fridge, an oven, a washer, a heat pump, a home battery, a solar inverter…
    case appliance

    /// Whether the device's environment readings (`temperature`, `humidity`, `co2`…) are its surroundings', the
    /// room's: sensors, air monitors, a thermostat's room temperature. An appliance's are its own (a water heater's
    /// tank, a charger's or a fridge's inside), so the room's limits (alerts `<key>_high`/`_low`) are not for them.
    public var measuresSurroundings: Bool {
        switch self {
        case .sensor, .airQuality, .motionSensor, .thermostat, .hub, .button: true
        case .light, .switch, .plug, .lock, .cover, .garageDoor, .energyMeter, .waterMeter, .gasMeter, .evCharger, .fan, .camera, .speaker,
             .waterHeater, .appliance: false
        }
    }

    /// Actuators whose stale or replayed commands could open the house.
    public var isSecurityCritical: Bool {
        switch self {
        case .lock, .garageDoor, .cover: true
        default: false
        }
    }
}
