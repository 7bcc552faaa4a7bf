#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel

/// One call to the Matter server that carries out part of a `/set`.
enum MatterCall: Sendable, Equatable {
    /// `device_command`: a cluster command on an endpoint; `timedMs` for commands that need a timed invoke (locks).
    case command(endpoint: Int, cluster: Int, name: String, payload: [String: MatterPayload], timedMs: Int?)
    /// `write_attribute` to `endpoint/cluster/attribute`.
    case write(endpoint: Int, cluster: Int, attribute: Int, value: MatterPayload)

    var summary: String {
        switch self {
        case .command(let endpoint, let cluster, let name, _, _): "\(name) on \(endpoint)/\(cluster)"
        case .write(let endpoint, let cluster, let attribute, _): "write \(endpoint)/\(cluster)/\(attribute)"
        }
    }
}

/// A value sent to the server (payload fields and attribute writes).
enum MatterPayload: Sendable, Equatable {
    case int(Int)
    case string(String)
    /// A nullable field without a value (EnableCharging's `chargingEnabledUntil`: no end).
    case null

    var value: MatterValue {
        switch self {
        case .int(let value): .int(Int64(value))
        case .string(let value): .string(value)
        case .null: .null
        }
    }
}

/// `/set` keys → Matter commands and attribute writes, as the Matter specification and Home Assistant's Matter
/// integration send them. The published state changes only when the node reports the new value.
enum MatterCommands {
    /// Home Assistant sends lock commands as a timed invoke of 1 s; the SDK refuses them without one.
    static let lockTimedRequestMs = 1000
    /// Energy EVSE's EnableCharging and Disable need a timed invoke too; Home Assistant gives them 3 s.
    static let evseTimedRequestMs = 3000

    static func calls(for changes: [String: StateValue], plan: MatterDevicePlan, node: MatterNode, pinCode: String? = nil) throws(GatewayError) -> [MatterCall] {
        var calls: [MatterCall] = []
        // On/off first, then level and colour (MoveToLevelWithOnOff also switches on), then the rest.
        let order = ["state", "brightness", "color_temp_kelvin", "color"]
        let keys = changes.keys.sorted { (order.firstIndex(of: plainKey($0, plan)) ?? 99, $0) < (order.firstIndex(of: plainKey($1, plan)) ?? 99, $1) }
        for name in keys {
            guard let value = changes[name], let route = plan.routes[name] else {
                throw GatewayError(.vendorRejected, message: "\(plan.device.id) has no '\(name)' to set.")
            }
            calls += try self.calls(route: route, name: name, value: value, plan: plan, node: node, pinCode: pinCode)
        }
        return calls
    }

    static func plainKey(_ name: String, _ plan: MatterDevicePlan) -> String { plan.routes[name]?.key ?? name }

    static func calls(route: MatterRoute, name: String, value: StateValue, plan: MatterDevicePlan, node: MatterNode,
                      pinCode: String? = nil) throws(GatewayError) -> [MatterCall] {
        let endpoint = route.endpoint
        func invalid(_ expected: String) -> GatewayError {
            GatewayError(.invalidPayload, message: "'\(name)' takes \(expected).", suggestion: "Send e.g. {\"\(name)\": \(example(route.key))}.")
        }
        switch route.key {
        case "state":
            guard let word = value.string?.uppercased(), ["ON", "OFF", "TOGGLE"].contains(word) else { throw invalid("ON, OFF or TOGGLE") }
            if MatterMapping.hasCluster(node, endpoint, 153), !MatterMapping.hasCluster(node, endpoint, 6) {
                return [evseCall(endpoint: endpoint, word: word, node: node)]
            }
            let command = ["ON": "On", "OFF": "Off", "TOGGLE": "Toggle"][word] ?? "Toggle"
            return [.command(endpoint: endpoint, cluster: 6, name: command, payload: [:], timedMs: nil)]
        case "brightness":
            guard let percent = value.number, (0...100).contains(percent) else { throw invalid("a number from 0 to 100") }
            if percent == 0 { return [.command(endpoint: endpoint, cluster: 6, name: "Off", payload: [:], timedMs: nil)] }
            let level = Int(max(1, min(254, (percent / 100 * 254).rounded())))
            return [.command(endpoint: endpoint, cluster: 8, name: "MoveToLevelWithOnOff",
                             payload: ["level": .int(level), "transitionTime": .int(0), "optionsMask": .int(0), "optionsOverride": .int(0)], timedMs: nil)]
        case "color_temp_kelvin":
            guard let kelvin = value.number, kelvin >= 1000, kelvin <= 20000 else { throw invalid("a colour temperature in K") }
            var mireds = Int((1_000_000 / kelvin).rounded())
            // Keep inside the light's own range (ColorTempPhysicalMin/MaxMireds).
            if let low = node.value(endpoint, 768, 16395)?.integer, mireds < low { mireds = Int(low) }
            if let high = node.value(endpoint, 768, 16396)?.integer, high > 0, mireds > high { mireds = Int(high) }
            return [.command(endpoint: endpoint, cluster: 768, name: "MoveToColorTemperature",
                             payload: ["colorTemperatureMireds": .int(mireds), "transitionTime": .int(0), "optionsMask": .int(0), "optionsOverride": .int(0)],
                             timedMs: nil)]
        case "color":
            guard let parts = value.object else { throw invalid("{\"hue\":…,\"saturation\":…} or {\"x\":…,\"y\":…}") }
            let options: [String: MatterPayload] = ["transitionTime": .int(0), "optionsMask": .int(0), "optionsOverride": .int(0)]
            if let hue = parts["hue"]?.number, let saturation = parts["saturation"]?.number {
                let payload = options.merging(["hue": .int(Int(min(254, (hue / 360 * 254).rounded()))),
                                               "saturation": .int(Int(min(254, (saturation / 100 * 254).rounded())))]) { $1 }
                return [.command(endpoint: endpoint, cluster: 768, name: "MoveToHueAndSaturation", payload: payload, timedMs: nil)]
            }
            if let x = parts["x"]?.number, let y = parts["y"]?.number {
                // CurrentX/Y are 1/65536 of the CIE range, at most 0xFEFF.
                let payload = options.merging(["colorX": .int(Int(min(65279, (x * 65536).rounded()))),
                                               "colorY": .int(Int(min(65279, (y * 65536).rounded())))]) { $1 }
                return [.command(endpoint: endpoint, cluster: 768, name: "MoveToColor", payload: payload, timedMs: nil)]
            }
            throw invalid("{\"hue\":…,\"saturation\":…} or {\"x\":…,\"y\":…}")
        case "lock":
            guard let word = value.string?.uppercased(), word == "LOCK" || word == "UNLOCK" else { throw invalid("LOCK or UNLOCK") }
            // A lock that requires a PIN for remote operation (257/51) gets the configured one (octets: base64 on
            // the wire, field `PINCode`); without one the command is refused here rather than by the lock.
            var payload: [String: MatterPayload] = [:]
            if let pinCode { payload["PINCode"] = .string(Data(pinCode.utf8).base64EncodedString()) }
            if node.value(endpoint, 257, 51)?.bool == true, pinCode == nil {
                throw GatewayError(.vendorRejected, message: "This lock requires a PIN code for remote operation.",
                                   suggestion: "Put the lock's PIN code in the Matter entry's pin_code_file.")
            }
            return [.command(endpoint: endpoint, cluster: 257, name: word == "LOCK" ? "LockDoor" : "UnlockDoor", payload: payload, timedMs: lockTimedRequestMs)]
        case "cover":
            guard let word = value.string?.uppercased(), ["OPEN", "CLOSE", "STOP"].contains(word) else { throw invalid("OPEN, CLOSE or STOP") }
            let command = ["OPEN": "UpOrOpen", "CLOSE": "DownOrClose", "STOP": "StopMotion"][word] ?? "StopMotion"
            return [.command(endpoint: endpoint, cluster: 258, name: command, payload: [:], timedMs: nil)]
        case "position":
            guard let percent = value.number, (0...100).contains(percent) else { throw invalid("a number from 0 (closed) to 100 (open)") }
            // Matter's lift percentage counts closed-ness: 0 is fully open.
            return [.command(endpoint: endpoint, cluster: 258, name: "GoToLiftPercentage",
                             payload: ["liftPercent100thsValue": .int(Int(((100 - percent) * 100).rounded()))], timedMs: nil)]
        case "target_temperature":
            guard let celsius = value.number, (-50...100).contains(celsius) else { throw invalid("a temperature in °C") }
            let mode = node.value(endpoint, 513, 28)?.integer
            // Cooling set-point while cooling (when the thermostat has one), else heating.
            let cooling = (mode == 3 || mode == 6) && node.attributes["\(endpoint)/513/17"] != nil
            let heats = node.attributes["\(endpoint)/513/18"] != nil
            let attribute = cooling || !heats ? 17 : 18
            return [.write(endpoint: endpoint, cluster: 513, attribute: attribute, value: .int(Int((celsius * 100).rounded())))]
        case "hvac_mode":
            guard let word = value.string?.lowercased(), let mode = MatterMapping.systemModes[word] else {
                throw invalid("one of \(MatterMapping.systemModes.keys.sorted().joined(separator: ", "))")
            }
            return [.write(endpoint: endpoint, cluster: 513, attribute: 28, value: .int(Int(mode)))]
        case "charging_current":
            return [try chargingCurrentCall(endpoint: endpoint, amps: value, node: node)]
        case "fan_mode":
            guard let word = value.string?.lowercased(), let mode = MatterMapping.fanModes.firstIndex(of: word) else {
                throw invalid("one of \(MatterMapping.fanModes.joined(separator: ", "))")
            }
            // `on` for a fan that runs already keeps its speed (Home Assistant sends it before a percentage).
            if word == "on", let current = node.value(endpoint, 514, 0)?.integer, current != 0 { return [] }
            return [.write(endpoint: endpoint, cluster: 514, attribute: 0, value: .int(mode))]
        case "fan_speed":
            guard let percent = value.number, (0...100).contains(percent) else { throw invalid("a number from 0 to 100") }
            return [.write(endpoint: endpoint, cluster: 514, attribute: 2, value: .int(Int(percent.rounded())))]
        default:
            throw GatewayError(.vendorRejected, message: "'\(name)' cannot be set on a Matter device.")
        }
    }

    /// An EV charger's `state`: ON is EnableCharging without an end time, between the EVSE's own minimum and maximum
    /// charge current (0x0099/6 and /7 in mA; else 6 A, the lowest a pilot signal offers, and CircuitCapacity /5);
    /// OFF is Disable; TOGGLE follows SupplyState.
    static func evseCall(endpoint: Int, word: String, node: MatterNode) -> MatterCall {
        let enabled = node.value(endpoint, 153, 1)?.integer.map(MatterMapping.chargingEnabled) ?? false
        guard word == "ON" || (word == "TOGGLE" && !enabled) else {
            return .command(endpoint: endpoint, cluster: 153, name: "Disable", payload: [:], timedMs: evseTimedRequestMs)
        }
        let minimum = milliamps(153, 6, endpoint, node) ?? 6000
        let maximum = max(minimum, milliamps(153, 7, endpoint, node) ?? milliamps(153, 5, endpoint, node) ?? minimum)
        return .command(endpoint: endpoint, cluster: 153, name: "EnableCharging",
                        payload: ["chargingEnabledUntil": .null, "minimumChargeCurrent": .int(minimum), "maximumChargeCurrent": .int(maximum)],
                        timedMs: evseTimedRequestMs)
    }

    static func milliamps(_ cluster: Int, _ attribute: Int, _ endpoint: Int, _ node: MatterNode) -> Int? {
        node.value(endpoint, cluster, attribute)?.integer.flatMap { $0 >= 0 ? Int(exactly: $0) : nil }
    }

    /// An EV charger's `charging_current` (A): EnableCharging again with the new maximum (Energy EVSE has no
    /// writable current of its own), keeping its minimum and its end time. Only while charging is enabled: it
    /// would otherwise switch charging on.
    static func chargingCurrentCall(endpoint: Int, amps value: StateValue, node: MatterNode) throws(GatewayError) -> MatterCall {
        guard let amps = value.number, amps > 0, amps <= 1000 else {
            throw GatewayError(.invalidPayload, message: "'charging_current' takes a current in A.", suggestion: "Send e.g. {\"charging_current\": 16}.")
        }
        guard node.value(endpoint, 153, 1)?.integer.map(MatterMapping.chargingEnabled) == true else {
            throw GatewayError(.vendorRejected, message: "Charging is off, so the charger offers no current to change.",
                               suggestion: "Switch charging on (state ON) first; it keeps the current set then.")
        }
        let minimum = milliamps(153, 6, endpoint, node) ?? 6000
        let maximum = Int((amps * 1000).rounded())
        guard maximum >= minimum else { throw .outOfRange(key: "charging_current", value: amps, min: Double(minimum) / 1000, max: nil) }
        let until: MatterPayload = node.value(endpoint, 153, 3)?.integer.flatMap { Int(exactly: $0) }.map(MatterPayload.int) ?? .null
        return .command(endpoint: endpoint, cluster: 153, name: "EnableCharging",
                        payload: ["chargingEnabledUntil": until, "minimumChargeCurrent": .int(minimum), "maximumChargeCurrent": .int(maximum)],
                        timedMs: evseTimedRequestMs)
    }

    // MARK: Confirmation by the node's report

    /// What a fan must report before its change counts as done: the server acknowledges a write as soon as the node
    /// stored it, also when the motor never follows.
    enum FanTarget: Sendable, Equatable {
        /// PercentCurrent (else PercentSetting) at the new speed, or moving toward it from where it was.
        case speed(key: String, endpoint: Int, target: Double, before: Double?)
        /// FanMode at the new mode (`on`: anything but off).
        case mode(key: String, endpoint: Int, word: String)

        var key: String {
            switch self {
            case .speed(let key, _, _, _), .mode(let key, _, _): key
            }
        }
    }

    static func fanTargets(_ changes: [String: StateValue], plan: MatterDevicePlan, node: MatterNode) -> [FanTarget] {
        changes.keys.sorted().compactMap { name -> FanTarget? in
            guard let route = plan.routes[name], let value = changes[name] else { return nil }
            switch route.key {
            case "fan_speed": return value.number.map { .speed(key: name, endpoint: route.endpoint, target: $0.rounded(), before: percent(node, route.endpoint)) }
            case "fan_mode": return value.string.map { .mode(key: name, endpoint: route.endpoint, word: $0.lowercased()) }
            default: return nil
            }
        }
    }

    static func percent(_ node: MatterNode, _ endpoint: Int) -> Double? {
        node.value(endpoint, 514, 3)?.number ?? node.value(endpoint, 514, 2)?.number
    }

    static func reached(_ target: FanTarget, _ node: MatterNode) -> Bool {
        switch target {
        case .speed(_, let endpoint, let wanted, let before):
            if wanted == 0, node.value(endpoint, 514, 0)?.integer == 0 { return true }
            guard let now = percent(node, endpoint) else { return false }
            if now == wanted { return true }
            // A fan that ramps: it moved from where it was toward the new speed.
            guard let before, before != wanted, now != before else { return false }
            return (now - before).sign == (wanted - before).sign && abs(now - before) <= abs(wanted - before)
        case .mode(_, let endpoint, let word):
            guard let now = node.value(endpoint, 514, 0)?.integer.flatMap(MatterMapping.fanMode) else { return false }
            return word == "on" ? now != "off" : now == word
        }
    }

    static func example(_ key: String) -> String {
        switch key {
        case "state": #""ON""#
        case "lock": #""LOCK""#
        case "cover": #""OPEN""#
        case "hvac_mode": #""heat""#
        case "fan_mode": #""auto""#
        case "color_temp_kelvin": "2700"
        case "target_temperature": "21"
        default: "50"
        }
    }
}
