import GatewayCore
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel

/// One alert: a rule that holds for a device now.
package struct Alert: Sendable, Equatable {
    /// `<rule>_<device id>`: stable, so its retained topic and Home Assistant entity stay the same.
    package var id: String
    package var rule: String
    package var severity: GatewayError.Severity
    package var device: DeviceID
    package var room: String?
    package var key: String
    package var value: Double
    package var threshold: Double
    package var since: Date
    package var message: String
    package var suggestion: String

    package var json: JSON { .object(fields) }

    package var fields: [String: JSON] {
        [
            "alert": .string(id), "rule": .string(rule), "severity": .string(severity.rawValue), "device": .string(device.rawValue),
            "room": .optional(room), "key": .string(key), "value": .number(value), "threshold": .number(threshold),
            "since": .string(ISOTime.format(since)), "message": .string(message), "suggestion": .string(suggestion),
        ]
    }

    package init(id: String, rule: String, severity: GatewayError.Severity, device: DeviceID, room: String?, key: String, value: Double,
         threshold: Double, since: Date, message: String, suggestion: String) {
        self.id = id
        self.rule = rule
        self.severity = severity
        self.device = device
        self.room = room
        self.key = key
        self.value = value
        self.threshold = threshold
        self.since = since
        self.message = message
        self.suggestion = suggestion
    }

    /// Back from the cache's JSON; nil when it is not one.
    package init?(json: JSONValue) {
        guard let id = json["alert"]?.string, let rule = json["rule"]?.string, let raw = json["device"]?.string, let device = DeviceID(validating: raw),
              let key = json["key"]?.string, let value = json["value"]?.number, let threshold = json["threshold"]?.number,
              let since = json["since"]?.string.flatMap(ISOTime.parse) else { return nil }
        self.init(
            id: id, rule: rule, severity: json["severity"]?.string.flatMap(GatewayError.Severity.init(rawValue:)) ?? .warning, device: device,
            room: json["room"]?.string, key: key, value: value, threshold: threshold, since: since,
            message: json["message"]?.string ?? rule, suggestion: json["suggestion"]?.string ?? ""
        )
    }
}

/// What changed for one alert.
package enum AlertChange: Sendable, Equatable {
    case raised(Alert)
    case cleared(Alert, at: Date)
}

/// The rules, evaluated on normalized readings whatever the vendor (seed 004's leak, continuous usage and
/// environment alerts). Pure: time comes in with each reading, so tests need no clock.
/// - `water_leak`: a vendor's `leak` flag, or `water_flow` above `leak_flow_above` without a break for
///   `leak_flow_for` (a running toilet, a burst pipe). Severity critical; clears when both end.
/// - `<key>_high` / `<key>_low` for the environment keys, with limits per room, on devices that measure their
///   surroundings only (`AlertSettings.limitsApply`: not an appliance's own temperature, not a set-point). Hysteresis: an alert clears
///   only once the reading is back past the limit by a margin (CO2 50 ppm, humidity 2 %, temperature 0.5 °C,
///   PM2.5 3 µg/m³, VOC 5 %), so a value hovering at the limit does not flap.
package struct AlertRules: Sendable {
    package let settings: AlertSettings
    package private(set) var active: [String: Alert] = [:]
    /// Devices with at least one active alert: for the others (nearly every update) no alert id is built.
    private var alertingDevices: Set<DeviceID> = []
    /// Per device: since when water has been flowing above the leak limit.
    private var flowingSince: [DeviceID: Date] = [:]

    package init(settings: AlertSettings, active: [Alert] = []) {
        self.settings = settings
        for alert in active {
            self.active[alert.id] = alert
            alertingDevices.insert(alert.device)
        }
    }

    private func isActive(_ rule: String, _ device: DeviceID) -> Bool {
        alertingDevices.contains(device) && active[Self.id(rule, device)] != nil
    }

    package static func id(_ rule: String, _ device: DeviceID) -> String { rule + "_" + device.rawValue }

    package static func margin(_ key: String, _ limit: Double) -> Double {
        switch key {
        case "co2": 50
        case "humidity": 2
        case "temperature", "dew_point": 0.5
        case "pm25", "pm10": 3
        default: abs(limit) * 0.05
        }
    }

    /// Evaluates a device's current values (after an update at `at`).
    package mutating func evaluate(_ device: Device, values: [String: StateValue], at: Date) -> [AlertChange] {
        guard settings.enabled else { return [] }
        var changes: [AlertChange] = []
        evaluateWater(device, values: values, at: at, into: &changes)
        // Limits only for devices that measure their surroundings; this runs on every state update, so a meter or a
        // plug stops here, and a sensor's keys without a limit cost one lookup each.
        guard device.type.measuresSurroundings else { return changes }
        // The room's slug only matters for per-room limits (and costs a slug per update otherwise).
        let room = settings.rooms.isEmpty ? nil : device.roomSlug
        let alerting = alertingDevices.contains(device.id)
        var limited: [(key: String, reading: Double, limit: AlertSettings.Threshold)] = []
        for (key, value) in values {
            guard let reading = value.number, let limit = settings.threshold(key, room: room) else { continue }
            // A device without an alert whose reading is inside its limits (nearly every update) has nothing to
            // raise or clear: no key spec is looked up and nothing is collected.
            if !alerting, limit.above.map({ reading <= $0 }) ?? true, limit.below.map({ reading >= $0 }) ?? true { continue }
            guard AlertSettings.limitsApply(to: device, key: key) else { continue }
            limited.append((key, reading, limit))
        }
        if limited.count > 1 { limited.sort { $0.key < $1.key } }
        for (key, reading, limit) in limited {
            if let above = limit.above { evaluateLimit(device, key: key, reading: reading, limit: above, high: true, at: at, into: &changes) }
            if let below = limit.below { evaluateLimit(device, key: key, reading: reading, limit: below, high: false, at: at, into: &changes) }
        }
        return changes
    }

    /// `<key>_high` or `<key>_low` of one device: raised past the limit, cleared only once back past it by the margin.
    private mutating func evaluateLimit(_ device: Device, key: String, reading: Double, limit: Double, high: Bool, at: Date,
                                        into changes: inout [AlertChange]) {
        // A device without an alert whose reading is inside the limit (nearly every update): no rule id is built.
        if !alertingDevices.contains(device.id), high ? reading <= limit : reading >= limit { return }
        let rule = key + (high ? "_high" : "_low")
        let wasActive = isActive(rule, device.id)
        let margin = wasActive ? Self.margin(key, limit) : 0
        let holds = high ? reading > limit - margin : reading < limit + margin
        guard holds != wasActive else { return }
        let id = Self.id(rule, device.id)
        update(id, holds: holds, at: at, into: &changes) {
            let (label, unit) = Self.labelAndUnit(key)
            return Alert(id: id, rule: rule, severity: high && reading >= limit * 2 && limit > 0 ? .critical : .warning, device: device.id,
                         room: device.room, key: key, value: reading, threshold: limit, since: at,
                         message: "\(label) in \(device.room ?? device.name) is \(JSONText.number(reading))\(unit), \(high ? "above" : "below") \(JSONText.number(limit))\(unit).",
                         suggestion: Self.advice(key, high: high))
        }
    }

    private static func labelAndUnit(_ key: String) -> (label: String, unit: String) {
        let spec = StateKeys.spec(key)
        return (spec?.label ?? key, spec?.unit.map { " \($0)" } ?? "")
    }

    private mutating func evaluateWater(_ device: Device, values: [String: StateValue], at: Date, into changes: inout [AlertChange]) {
        let flow = values["water_flow"]?.number
        // Most devices never report a flow: then only a device already flowing has a start to look up.
        var since = flowingSince.isEmpty ? nil : flowingSince[device.id]
        if let flow {
            if flow > settings.leakFlowAbove {
                if since == nil {
                    since = at
                    flowingSince[device.id] = at
                }
            } else if since != nil {
                since = nil
                flowingSince[device.id] = nil
            }
        }
        let flagged = values["leak"] == .bool(true)
        let running = since.map { at.timeIntervalSince($0) >= settings.leakFlowDuration } ?? false
        guard flagged || running || isActive("water_leak", device.id) else { return }
        let id = Self.id("water_leak", device.id)
        let minutes = Int((since.map { at.timeIntervalSince($0) } ?? 0) / 60)
        let limit = settings.leakFlowAbove
        update(id, holds: flagged || running, at: at, into: &changes) {
            let message = flagged
                ? "\(device.name) reports a water leak."
                : "Water has been running at \(device.name) for \(minutes) min without a break (now \(JSONText.number(flow ?? 0)) L/min)."
            return Alert(id: id, rule: "water_leak", severity: .critical, device: device.id, room: device.room, key: flagged ? "leak" : "water_flow",
                         value: flagged ? 1 : (flow ?? 0), threshold: flagged ? 1 : limit, since: at, message: message,
                         suggestion: "Check taps, toilets, the irrigation and visible pipes; close the main valve if you cannot find it.")
        }
    }

    private mutating func update(_ id: String, holds: Bool, at: Date, into changes: inout [AlertChange], make: () -> Alert) {
        if holds, active[id] == nil {
            let alert = make()
            active[id] = alert
            alertingDevices.insert(alert.device)
            changes.append(.raised(alert))
        } else if !holds, let alert = active.removeValue(forKey: id) {
            if !active.values.contains(where: { $0.device == alert.device }) { alertingDevices.remove(alert.device) }
            changes.append(.cleared(alert, at: at))
        }
    }

    /// `unusual_consumption`: the use of the hour that started at `hour` against the same hour of earlier days.
    /// Raised when it is above `factor` × their mean (and above the key's minimum); cleared by an hour back under.
    package mutating func evaluateConsumption(_ device: Device, key: String, use: Double, sameHourBefore: [Double], hour: Date) -> [AlertChange] {
        guard settings.enabled, settings.consumptionFactor > 0, sameHourBefore.count >= settings.consumptionMinDays, use.isFinite else { return [] }
        let minimum = AlertSettings.consumptionKeys.first { $0.key == key }?.minimum ?? 0
        let usual = sameHourBefore.reduce(0, +) / Double(sameHourBefore.count)
        let limit = max(usual * settings.consumptionFactor, minimum)
        let id = Self.id("unusual_consumption", device.id)
        let unit = StateKeys.spec(key)?.unit ?? ""
        var changes: [AlertChange] = []
        update(id, holds: use > limit, at: hour.addingTimeInterval(3600), into: &changes) {
            let hourText = String(ISOTime.format(hour).dropFirst(11).prefix(5))
            return Alert(
                id: id, rule: "unusual_consumption", severity: .warning, device: device.id, room: device.room, key: key, value: Self.rounded(use),
                threshold: Self.rounded(limit), since: hour.addingTimeInterval(3600),
                message: "\(device.name) used \(JSONText.number(Self.rounded(use))) \(unit) in the hour from \(hourText) UTC; that hour usually takes \(JSONText.number(Self.rounded(usual))) \(unit) (mean of \(sameHourBefore.count) days).",
                suggestion: key == "water_volume" || key == "gas_volume"
                    ? "Look for something left running (a tap, irrigation, heating) or a leak."
                    : "Look for an appliance left on or running more than usual."
            )
        }
        return changes
    }

    package static func rounded(_ value: Double) -> Double { (value * 1000).rounded() / 1000 }

    /// Alerts of a device that went away.
    package mutating func forget(_ device: DeviceID) -> [Alert] {
        flowingSince[device] = nil
        let gone = active.values.filter { $0.device == device }
        for alert in gone { active[alert.id] = nil }
        alertingDevices.remove(device)
        return gone
    }

    package static func advice(_ key: String, high: Bool) -> String {
        switch (key, high) {
        case ("co2", _): "Let fresh air in: open a window or raise the ventilation."
        case ("humidity", true): "Ventilate or run a dehumidifier: above 60 % mould can grow."
        case ("humidity", false): "Dry air: a humidifier helps, and less heating if the room is warm."
        case ("temperature", true): "Cool the room: shade, ventilation or air conditioning."
        case ("temperature", false): "Check the heating and for open windows."
        case ("pm25", _), ("pm10", _): "Particles: close windows if the air outside is bad, run an air purifier, avoid smoke and frying."
        case ("voc", _), ("voc_ppb", _): "Ventilate: paints, cleaning products, new furniture and cooking release VOCs."
        default: "Check the room."
        }
    }
}
