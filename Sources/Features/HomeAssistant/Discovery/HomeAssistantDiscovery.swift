import GatewayCore
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel

/// Builds Home Assistant MQTT discovery messages from the normalized model.
/// Device-based discovery (`<prefix>/device/<object_id>/config`, HA 2024.12+) by default,
/// per-component discovery (`<prefix>/<component>/<object_id>/<key>/config`) as a setting.
public struct HomeAssistantDiscovery: Sendable {
    public struct Message: Sendable, Hashable {
        public var topic: String
        public var payload: String
    }

    public let topics: Topics
    public let mode: HomeAssistantSettings.Mode
    public let version: String
    /// The alert rules: each that applies to a device is a binary sensor of the device.
    public var alerts: AlertSettings?

    public init(topics: Topics, mode: HomeAssistantSettings.Mode, version: String) {
        self.topics = topics
        self.mode = mode
        self.version = version
    }

    /// The node id Home Assistant sees: `<base>_<device_id>`, topic-safe.
    public func objectID(_ id: DeviceID) -> String { Slug.make(topics.base) + "_" + id.rawValue }

    package var bridgeIdentifier: String { Slug.make(topics.base) + "_bridge" }

    package var origin: JSON { ["name": "lbs-gateway", "sw": .string(version), "url": "https://github.com/lbs-gateway/lbs-gateway"] }

    /// What a device has reported so far. Its entities cover only keys that have a value (a key a device lists but
    /// never reports, such as an Eve thermostat's `power`, is an entity that can never show anything), and `stale`
    /// and `last_seen` only once its state topic is published.
    public enum Reported: Sendable {
        /// Every key the device lists, as if all had values (descriptions, tests).
        case all
        /// The device's current state; nil: nothing yet.
        case state(DeviceState?)

        package func has(_ key: String) -> Bool {
            switch self {
            case .all: true
            case .state(let state): state?.values[key] != nil
            }
        }

        /// The device's state topic carries something.
        package var published: Bool {
            switch self {
            case .all: true
            case .state(let state): state != nil
            }
        }
    }

    /// The messages that announce one device (one in device mode, one per entity in component mode).
    public func messages(for device: Device, reported: Reported = .all) -> [Message] {
        let components = self.components(for: device, reported: reported)
        let deviceBlock: JSON = JSON.object([
            "identifiers": [.string(objectID(device.id))],
            "name": .string(device.name),
            "manufacturer": .optional(device.manufacturer),
            "model": .optional(device.model),
            "sw_version": .optional(device.swVersion),
            "serial_number": .optional(device.serialNumber),
            "suggested_area": .optional(device.room),
            "via_device": .string(device.viaDevice.map(objectID) ?? bridgeIdentifier),
        ]).compacted
        let availability: JSON = [
            ["topic": .string(topics.bridgeState), "value_template": "{{ value_json.state }}"],
            ["topic": .string(topics.availability(device.id)), "value_template": "{{ value_json.state }}"],
        ]
        switch mode {
        case .device:
            let payload: JSON = [
                "device": deviceBlock,
                "origin": origin,
                "components": .object(Dictionary(uniqueKeysWithValues: components.map { ($0.key, JSON.object($0.config)) })),
                "state_topic": .string(topics.device(device.id)),
                "availability": availability,
                "availability_mode": "all",
                "qos": 1,
            ]
            return [Message(topic: deviceTopic(device.id), payload: payload.render())]
        case .component:
            return components.map { component in
                var config = component.config
                config["device"] = deviceBlock
                config["origin"] = origin
                config["state_topic"] = config["state_topic"] ?? .string(topics.device(device.id))
                config["availability"] = availability
                config["availability_mode"] = "all"
                config.removeValue(forKey: "platform")
                return Message(topic: componentTopic(component.platform, device.id, component.key), payload: JSON.object(config).render())
            }
        }
    }

    /// Topics to clear (empty retained payload) when a device goes away: no ghost entities.
    public func clearTopics(for device: Device) -> [String] {
        switch mode {
        case .device: [deviceTopic(device.id)]
        case .component: components(for: device, reported: .all).map { componentTopic($0.platform, device.id, $0.key) }
        }
    }

    package func deviceTopic(_ id: DeviceID) -> String { topics.discovery("device", objectID(id)) }

    package func componentTopic(_ platform: String, _ id: DeviceID, _ key: String) -> String {
        topics.discovery(platform, objectID(id), key: key)
    }

    package struct Component {
        package var key: String
        package var platform: String
        package var config: [String: JSON]
    }

    /// One entry per Home Assistant entity of the device.
    package func components(for device: Device, reported: Reported) -> [Component] {
        let id = device.id
        // Keys the vendor cannot change become sensors, never entities with a command topic (device.isWritable);
        // keys without a value yet have no entity (the device's discovery goes out again when one arrives).
        let keys = Set(device.keys.filter { (!(StateKeys.spec($0)?.writable ?? false) || device.isWritable($0)) && reported.has($0) })
        var result: [Component] = []
        var covered: Set<String> = []

        // The device's main entity (light, switch, lock, cover, climate: `name: null`) takes the device id
        // alone as its entity id (`light.demo_light`), as zigbee2mqtt does; only the first one, so two main
        // entities never ask for the same id. unique_id keeps `<base>_<device>_<key>`: changing it would
        // orphan the entities users already have (their registry keeps the entity ids they have today).
        var mainTaken = false
        func identity(_ key: String, platform: String, name: JSON, main: Bool = false) -> [String: JSON] {
            let unique = objectID(id) + "_" + key
            let bare = main && !mainTaken
            if bare { mainTaken = true }
            let object = bare ? id.rawValue : id.rawValue + "_" + key
            var shown = name
            if case .string(let label) = name { shown = Self.entityName(label, deviceName: device.name, nullAllowed: !mainTaken) }
            var config: [String: JSON] = [
                "platform": .string(platform), "unique_id": .string(unique), "name": shown,
                "object_id": .string(object), "default_entity_id": .string("\(platform).\(object)"),
            ]
            // `stale` and `last_seen` as attributes of the main entity: visible without opening diagnostics.
            if bare { config.merge(staleAttributes(id), uniquingKeysWith: { $1 }) }
            return config
        }

        if keys.contains("state") {
            if device.type == .light {
                var config = identity("light", platform: "light", name: .null, main: true)
                config["schema"] = "json"
                config["command_topic"] = .string(topics.set(id))
                config["state_topic"] = .string(topics.device(id))
                // A colour light offers hs (its `color` carries h/s and x/y), beside colour temperature when it has it.
                var modes: [JSON] = keys.contains("color_temp_kelvin") ? ["color_temp"] : []
                if keys.contains("color") { modes.append("hs") }
                if keys.contains("color_temp_kelvin") {
                    config["color_temp_kelvin"] = true
                    if case .number(let low?, let high?) = (device.spec("color_temp_kelvin") ?? StateKeys.colorTempKelvin).kind {
                        config["min_kelvin"] = .number(low)
                        config["max_kelvin"] = .number(high)
                    }
                }
                if modes.isEmpty { modes = keys.contains("brightness") ? ["brightness"] : ["onoff"] }
                config["supported_color_modes"] = .array(modes)
                if keys.contains("brightness") {
                    config["brightness"] = true
                    config["brightness_scale"] = 100
                }
                result.append(Component(key: "light", platform: "light", config: config))
                covered.formUnion(["state", "brightness", "color_temp_kelvin", "color", "color_mode"])
            } else {
                var config = identity("state", platform: "switch", name: .null, main: true)
                config["command_topic"] = .string(topics.set(id, key: "state"))
                config["value_template"] = "{{ value_json.state }}"
                config["payload_on"] = "ON"
                config["payload_off"] = "OFF"
                if device.type == .plug { config["device_class"] = "outlet" }
                result.append(Component(key: "state", platform: "switch", config: config))
                covered.insert("state")
            }
        }
        // A further endpoint's on/off (`state_2`): a switch of its own.
        for key in device.keys.sorted() where keys.contains(key) && StateKeys.endpointKey(key)?.base == "state" && device.isWritable(key) {
            var config = identity(key, platform: "switch", name: .string(StateKeys.spec(key)?.label ?? key))
            config["command_topic"] = .string(topics.set(id, key: key))
            config["value_template"] = .string("{{ value_json.\(key) }}")
            config["payload_on"] = "ON"
            config["payload_off"] = "OFF"
            result.append(Component(key: key, platform: "switch", config: config))
            covered.insert(key)
        }
        if keys.contains("lock") {
            var config = identity("lock", platform: "lock", name: .null, main: true)
            config["command_topic"] = .string(topics.set(id, key: "lock"))
            config["value_template"] = "{{ value_json.lock }}"
            config["payload_lock"] = "LOCK"
            config["payload_unlock"] = "UNLOCK"
            config["state_locked"] = "LOCKED"
            config["state_unlocked"] = "UNLOCKED"
            config["state_locking"] = "LOCKING"
            config["state_unlocking"] = "UNLOCKING"
            config["state_jammed"] = "JAMMED"
            result.append(Component(key: "lock", platform: "lock", config: config))
            covered.insert("lock")
        }
        if keys.contains("cover") || keys.contains("position") {
            var config = identity("cover", platform: "cover", name: .null, main: true)
            if device.type == .garageDoor { config["device_class"] = "garage" }
            if keys.contains("cover") {
                config["command_topic"] = .string(topics.set(id, key: "cover"))
                config["value_template"] = "{{ value_json.cover }}"
                config["payload_open"] = "OPEN"
                config["payload_close"] = "CLOSE"
                config["payload_stop"] = "STOP"
                config["state_open"] = "OPEN"
                config["state_closed"] = "CLOSED"
                config["state_opening"] = "OPENING"
                config["state_closing"] = "CLOSING"
                config["state_stopped"] = "STOPPED"
            }
            if keys.contains("position") {
                config["position_topic"] = .string(topics.device(id))
                config["position_template"] = "{{ value_json.position }}"
                config["set_position_topic"] = .string(topics.set(id, key: "position"))
            }
            result.append(Component(key: "cover", platform: "cover", config: config))
            covered.formUnion(["cover", "position"])
        }
        if keys.contains("target_temperature") || keys.contains("hvac_mode") {
            var config = identity("climate", platform: "climate", name: .null, main: true)
            let state = JSON.string(topics.device(id))
            config["temperature_unit"] = "C"
            config["precision"] = 0.1
            config["temp_step"] = 0.5
            if keys.contains("temperature") {
                config["current_temperature_topic"] = state
                config["current_temperature_template"] = "{{ value_json.temperature }}"
            }
            if keys.contains("target_temperature") {
                config["temperature_command_topic"] = .string(topics.set(id, key: "target_temperature"))
                config["temperature_state_topic"] = state
                config["temperature_state_template"] = "{{ value_json.target_temperature }}"
                if case .number(let low?, let high?) = (device.spec("target_temperature") ?? StateKeys.targetTemperature).kind {
                    config["min_temp"] = .number(low)
                    config["max_temp"] = .number(high)
                }
            }
            if keys.contains("hvac_mode"), case .enumeration(let modes) = StateKeys.hvacMode.kind {
                config["mode_command_topic"] = .string(topics.set(id, key: "hvac_mode"))
                config["mode_state_topic"] = state
                config["mode_state_template"] = "{{ value_json.hvac_mode }}"
                // Home Assistant offers every listed mode; fan_only and dry are only reported, not offered, since
                // few thermostats have them.
                config["modes"] = .array(modes.filter { ["off", "heat", "cool", "auto"].contains($0) }.map(JSON.string))
            }
            if keys.contains("hvac_action") {
                config["action_topic"] = state
                config["action_template"] = "{{ value_json.hvac_action }}"
            }
            result.append(Component(key: "climate", platform: "climate", config: config))
            covered.formUnion(["target_temperature", "hvac_mode", "hvac_action"])
        }
        // The water-leak alert covers the vendor's own leak flag (and long flows): one leak entity, not two.
        let leakAlert = alerts?.rules(for: device).contains { $0.name == "water_leak" } ?? false
        if keys.contains("fan_mode") || keys.contains("fan_speed") {
            result.append(fanComponent(device, keys: keys, identity: identity("fan", platform: "fan", name: .null, main: true)))
            covered.formUnion(["fan_mode", "fan_speed"])
        }
        for key in device.keys where !covered.contains(key) && reported.has(key) {
            // The device's own range and words (`Device.limits`), not only the registry's.
            guard let spec = device.spec(key) else { continue }
            if key == "leak", leakAlert { continue }
            // A setting the vendor can change (a battery's backup reserve, its operation mode): a control.
            if spec.writable, device.isWritable(key), let platform = Self.controlPlatform(spec) {
                var config = identity(key, platform: platform, name: .string(spec.label))
                config.merge(controlConfig(key, spec, device: id), uniquingKeysWith: { $1 })
                result.append(Component(key: key, platform: platform, config: config))
                continue
            }
            if key == "grid_status" {
                // "Grid connected" on/off, Home Assistant's way to show a grid outage, beside the status itself.
                var connected = identity("grid_connected", platform: "binary_sensor", name: "Grid connected")
                connected["value_template"] = "{{ 'ON' if value_json.grid_status == 'connected' else 'OFF' }}"
                connected["device_class"] = "power"
                result.append(Component(key: "grid_connected", platform: "binary_sensor", config: connected))
            }
            switch spec.kind {
            case .bool:
                var config = identity(key, platform: "binary_sensor", name: .string(spec.label))
                // `contact` is true when closed (zigbee2mqtt's way); Home Assistant's door sensor is on when open.
                let open = StateKeys.endpointKey(key)?.base ?? key
                config["value_template"] = open == "contact"
                    ? .string("{{ 'OFF' if value_json.\(key) else 'ON' }}") : .string("{{ 'ON' if value_json.\(key) else 'OFF' }}")
                if let deviceClass = SensorMapping.binaryClasses[open] { config["device_class"] = .string(deviceClass) }
                result.append(Component(key: key, platform: "binary_sensor", config: config))
            default:
                var config = identity(key, platform: "sensor", name: .string(spec.label))
                config["value_template"] = .string("{{ value_json.\(key) }}")
                let mapping = SensorMapping.for(spec)
                if let unit = spec.unit { config["unit_of_measurement"] = .string(unit) }
                if let deviceClass = mapping.deviceClass { config["device_class"] = .string(deviceClass) }
                if let stateClass = mapping.stateClass { config["state_class"] = .string(stateClass) }
                if let precision = SensorMapping.precision(spec) { config["suggested_display_precision"] = .number(Double(precision)) }
                if key == "battery" { config["entity_category"] = "diagnostic" }
                if case .enumeration(let options) = spec.kind {
                    config["device_class"] = "enum"
                    config["options"] = .array(options.map(JSON.string))
                }
                result.append(Component(key: key, platform: "sensor", config: config))
            }
        }
        // One-off events (button presses, …): an `event` entity on the device's event topic.
        if let types = device.eventTypes, !types.isEmpty {
            var config = identity("event", platform: "event", name: "Event")
            config["state_topic"] = .string(topics.deviceEvent(id))
            config["event_types"] = .array(types.map(JSON.string))
            if device.type == .button { config["device_class"] = "button" }
            result.append(Component(key: "event", platform: "event", config: config))
        }
        // A device that takes commands: a refused or failed one shows in Home Assistant (a service call there has
        // no answer of its own), as an `event` entity fed with the error's code, message and suggestion.
        if device.keys.contains(where: { keys.contains($0) && device.isWritable($0) }) {
            var config = identity("command_error", platform: "event", name: "Command error")
            config["state_topic"] = .string(topics.commandError(id))
            config["event_types"] = .array(Self.commandErrorTypes.map(JSON.string))
            config["entity_category"] = "diagnostic"
            config["icon"] = "mdi:alert-circle-outline"
            result.append(Component(key: "command_error", platform: "event", config: config))
        }
        // One binary sensor per alert rule that applies (on while `<base>/alert/<rule>_<device>` says ON).
        for rule in alerts?.rules(for: device) ?? [] {
            var config = identity("alert_\(rule.name)", platform: "binary_sensor", name: .string(rule.label))
            let topic = topics.alert(rule.name + "_" + id.rawValue)
            config["state_topic"] = .string(topic)
            config["value_template"] = "{{ value_json.state }}"
            config["json_attributes_topic"] = .string(topic)
            config["device_class"] = .string(rule.deviceClass)
            result.append(Component(key: "alert_\(rule.name)", platform: "binary_sensor", config: config))
        }
        // Both read the device's state topic: only once it is published.
        guard reported.published else { return result }
        // A diagnostic "Stale" problem sensor: ON while the values come from the cache, not the vendor.
        var stale = identity("stale", platform: "binary_sensor", name: "Stale")
        stale["value_template"] = "{{ 'ON' if value_json.stale | default(false) else 'OFF' }}"
        stale["device_class"] = "problem"
        stale["entity_category"] = "diagnostic"
        stale.merge(staleAttributes(id), uniquingKeysWith: { $1 })
        result.append(Component(key: "stale", platform: "binary_sensor", config: stale))
        var lastSeen = identity("last_seen", platform: "sensor", name: "Last seen")
        lastSeen["value_template"] = "{{ value_json.last_seen }}"
        lastSeen["device_class"] = "timestamp"
        lastSeen["entity_category"] = "diagnostic"
        lastSeen["enabled_by_default"] = false
        result.append(Component(key: "last_seen", platform: "sensor", config: lastSeen))
        return result
    }
}

extension HomeAssistantDiscovery {
    /// A fan (`fan_mode` and/or `fan_speed`): Home Assistant's `fan` with on/off, a percentage and the device's own
    /// modes as presets. On is `fan_mode` `on` (the device picks the speed; a running fan keeps its own), off is
    /// `off`; without `fan_mode`, on and off set `fan_speed` 100 and 0.
    package func fanComponent(_ device: Device, keys: Set<String>, identity: [String: JSON]) -> Component {
        let id = device.id
        let state = JSON.string(topics.device(id))
        var config = identity
        config["state_topic"] = state
        config["payload_on"] = "on"
        config["payload_off"] = "off"
        if keys.contains("fan_mode") {
            config["command_topic"] = .string(topics.set(id, key: "fan_mode"))
            config["state_value_template"] = "{{ 'off' if value_json.fan_mode == 'off' else 'on' }}"
            if case .enumeration(let words)? = device.spec("fan_mode")?.kind {
                let presets = words.filter { $0 != "off" && $0 != "on" }
                if !presets.isEmpty, device.isWritable("fan_mode") {
                    config["preset_modes"] = .array(presets.map(JSON.string))
                    config["preset_mode_command_topic"] = .string(topics.set(id, key: "fan_mode"))
                    config["preset_mode_state_topic"] = state
                    // Home Assistant's "no preset" is the word None.
                    let list = presets.map { "'\($0)'" }.joined(separator: ", ")
                    config["preset_mode_value_template"] = .string("{{ value_json.fan_mode if value_json.fan_mode in [\(list)] else 'None' }}")
                }
            }
        } else {
            config["command_topic"] = .string(topics.set(id, key: "fan_speed"))
            config["command_template"] = "{{ 100 if value == 'on' else 0 }}"
            config["state_value_template"] = "{{ 'on' if value_json.fan_speed | float(0) > 0 else 'off' }}"
        }
        if keys.contains("fan_speed"), device.isWritable("fan_speed") {
            config["percentage_command_topic"] = .string(topics.set(id, key: "fan_speed"))
            config["percentage_state_topic"] = state
            config["percentage_value_template"] = "{{ value_json.fan_speed | round(0) | int }}"
            config["speed_range_min"] = 1
            config["speed_range_max"] = 100
        }
        return Component(key: "fan", platform: "fan", config: config)
    }

    /// The `event_type`s on `<base>/device/<id>/command_error`: `command_refused` when the gateway or the vendor said
    /// no (a bad value, a read-only key, the vendor refused it), `command_failed` when it could not be carried out
    /// (the vendor unreachable or too slow, the command expired).
    public static let commandErrorTypes = ["command_refused", "command_failed"]

    package static let refusedCodes: Set<GatewayError.Code> = [
        .invalidJSON, .invalidUTF8, .invalidPayload, .unknownKey, .readOnlyKey, .outOfRange, .payloadTooLarge, .retainedCommand,
        .queueFull, .limitReached, .storageUnavailable, .badRequest, .vendorRejected, .notFound,
    ]

    /// The event type of a `command_failed` error code.
    public static func commandErrorType(_ code: String) -> String {
        GatewayError.Code(rawValue: code).map { refusedCodes.contains($0) } == true ? "command_refused" : "command_failed"
    }

    /// Home Assistant shows "<device name> <entity name>", so an entity name that repeats the device's name is
    /// shortened: "Home energy" on the device "Home energy" becomes the device's name alone (`name: null`, unless
    /// another entity has it already), "Home power" on an Emporia Vue named "Home" becomes "Power".
    package static func entityName(_ label: String, deviceName: String, nullAllowed: Bool = true) -> JSON {
        // Compared character by character, case folded: Foundation's case-insensitive `compare`/`range(of:)`
        // went through NSString and were a tenth of a 1,000-device start's discovery.
        let device = deviceName.trimmed
        guard !device.isEmpty else { return .string(label) }
        var labelIndex = label.startIndex
        for character in device {
            guard labelIndex < label.endIndex, label[labelIndex].lowercased() == character.lowercased() else { return .string(label) }
            labelIndex = label.index(after: labelIndex)
        }
        if labelIndex == label.endIndex { return nullAllowed ? .null : .string(label) }
        guard label[labelIndex] == " " else { return .string(label) }
        let rest = label[label.index(after: labelIndex)...].trimmed
        guard let first = rest.first else { return .string(label) }
        return .string(first.uppercased() + rest.dropFirst())
    }

    /// A writable number is a `number` entity, a writable word a `select`; other kinds have no control.
    package static func controlPlatform(_ spec: KeySpec) -> String? {
        switch spec.kind {
        case .number: "number"
        case .enumeration: "select"
        default: nil
        }
    }

    /// The command and state fields of a `number` or `select`: it sets the key alone through `/set/<key>`.
    package func controlConfig(_ key: String, _ spec: KeySpec, device: DeviceID) -> [String: JSON] {
        var config: [String: JSON] = [
            "command_topic": .string(topics.set(device, key: key)),
            "value_template": .string("{{ value_json.\(key) }}"),
        ]
        switch spec.kind {
        case .number(let low, let high):
            config["command_template"] = "{{ value }}"
            if let low { config["min"] = .number(low) }
            if let high { config["max"] = .number(high) }
            config["step"] = 1
            config["mode"] = "box"
            if let unit = spec.unit { config["unit_of_measurement"] = .string(unit) }
        case .enumeration(let options):
            config["options"] = .array(options.map(JSON.string))
        default:
            break
        }
        return config
    }
}

/// Home Assistant's device_class and state_class for each sensor key. Energy counters are
/// `total_increasing` in kWh so the Energy dashboard accepts them.
package enum SensorMapping {
    package struct Entry {
        package var deviceClass: String?
        package var stateClass: String?
    }

    package static let deviceClasses: [String: String] = [
        "temperature": "temperature", "humidity": "humidity", "co2": "carbon_dioxide",
        "voc": "volatile_organic_compounds", "voc_ppb": "volatile_organic_compounds_parts",
        "pm25": "pm25", "pm10": "pm10", "illuminance": "illuminance",
        "power": "power", "max_power": "power", "solar_power": "power", "grid_power": "power", "battery_power": "power", "home_power": "power",
        "energy": "energy", "solar_energy": "energy", "grid_import_energy": "energy", "grid_export_energy": "energy",
        "battery_charge_energy": "energy", "battery_discharge_energy": "energy", "home_energy": "energy",
        "battery_level": "battery", "battery": "battery",
        "water_flow": "volume_flow_rate", "water_volume": "water", "gas_volume": "gas",
        "voltage": "voltage", "frequency": "frequency", "noise": "sound_pressure", "dew_point": "temperature",
        "current": "current", "co": "carbon_monoxide",
    ]

    /// Home Assistant's binary_sensor device_class per boolean key.
    package static let binaryClasses: [String: String] = [
        "motion": "motion", "leak": "moisture", "water_leak": "moisture", "contact": "door", "smoke": "smoke", "carbon_monoxide": "carbon_monoxide",
        "occupancy": "occupancy", "battery_low": "battery", "in_use": "running",
    ]

    /// `suggested_display_precision` per key: what a reading is worth showing (vendors send 44.628 %).
    package static let precisions: [String: Int] = [
        "temperature": 1, "target_temperature": 1, "humidity": 0, "co2": 0, "voc": 0, "voc_ppb": 0,
        "pm25": 0, "pm10": 0, "illuminance": 0,
        "power": 0, "solar_power": 0, "grid_power": 0, "battery_power": 0, "home_power": 0,
        "energy": 2, "solar_energy": 2, "grid_import_energy": 2, "grid_export_energy": 2,
        "battery_charge_energy": 2, "battery_discharge_energy": 2, "home_energy": 2,
        "battery_level": 0, "battery": 0, "water_flow": 1, "water_volume": 0, "gas_volume": 2,
        "brightness": 0, "color_temp_kelvin": 0, "position": 0,
        "awareness_level": 0, "arousal": 2, "valence": 2, "voltage": 1, "frequency": 2, "noise": 0, "dew_point": 1, "score": 0,
        "current": 2, "co": 0, "fan_speed": 0, "charging_current": 0,
    ]

    /// Every numeric key gets a precision; one without an entry in the table shows one decimal.
    package static func precision(_ spec: KeySpec) -> Int? {
        guard case .number = spec.kind else { return nil }
        return precisions[baseName(spec.name)] ?? 1
    }

    /// A phase key (`grid_power_l2`) or a further endpoint's key (`temperature_2`) maps as its key.
    package static func baseName(_ name: String) -> String { StateKeys.phase(of: name)?.base ?? StateKeys.endpointKey(name)?.base ?? name }

    package static func `for`(_ spec: KeySpec) -> Entry {
        let stateClass: String? = switch spec.series {
        case .measurement: "measurement"
        case .counter: "total_increasing"
        case .none: nil
        }
        return Entry(deviceClass: deviceClasses[baseName(spec.name)], stateClass: stateClass)
    }
}

private extension StringProtocol {
    /// Without the spaces and tabs at either end (what `trimmingCharacters(in: .whitespaces)` drops, without Foundation).
    var trimmed: String {
        let isBlank: (Character) -> Bool = { $0 == " " || $0 == "\t" || ($0.isWhitespace && !$0.isNewline) }
        guard let start = firstIndex(where: { !isBlank($0) }), let end = lastIndex(where: { !isBlank($0) }) else { return "" }
        return String(self[start...end])
    }
}
