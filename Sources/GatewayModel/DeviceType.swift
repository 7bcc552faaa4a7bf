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

    /// Actuators whose stale or replayed commands could open the house.
    public var isSecurityCritical: Bool {
        switch self {
        case .lock, .garageDoor, .cover: true
        default: false
        }
    }
}
