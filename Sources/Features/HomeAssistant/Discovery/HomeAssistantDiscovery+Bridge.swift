import GatewayCore
import GatewayModel

/// Discovery of what is not a vendor device: the gateway itself (restart, log level, version,
/// command counters, vendor health) and the home views (`<base>/energy/home`, `<base>/environment/<room>`).
extension HomeAssistantDiscovery {
    /// The log levels the `log_level` select offers (swift-log's, the same words as the config key).
    public static var logLevels: [String] { BridgeControls.logLevels }

    /// `stale` and `last_seen` of a device's state topic as entity attributes.
    package func staleAttributes(_ id: DeviceID) -> [String: JSON] {
        [
            "json_attributes_topic": .string(topics.device(id)),
            "json_attributes_template": "{{ {'stale': value_json.stale | default(false), 'last_seen': value_json.last_seen | default(none)} | tojson }}",
        ]
    }

    package var bridgeAvailability: JSON { [["topic": .string(topics.bridgeState), "value_template": "{{ value_json.state }}"]] }

    package var bridgeDevice: JSON {
        ["identifiers": [.string(bridgeIdentifier)], "name": "LBS Gateway", "manufacturer": "lbs-gateway",
         "model": "MQTT edge gateway", "sw_version": .string(version)]
    }

    /// The gateway device `homeassistant/device/<base>_bridge/config`: connection state, a restart button,
    /// a log-level select, the version, command counters (from `<base>/bridge/health`) and one health
    /// sensor per vendor (from `<base>/bridge/vendors/<id>`). `removedVendorIDs`: vendors no longer configured whose
    /// health sensors Home Assistant should remove: in device mode a component sent as its platform alone
    /// (`{"p":"sensor"}`, the only way Home Assistant removes one component of a device), in component mode an
    /// empty retained message on the sensor's own topic.
    public func bridgeMessages(vendorIDs: [String], removedVendorIDs: Set<String> = []) -> [Message] {
        var components: [(key: String, platform: String, config: [String: JSON])] = []
        func add(_ key: String, _ platform: String, name: String, _ extra: [String: JSON]) {
            let object = bridgeIdentifier + "_" + key
            var config: [String: JSON] = [
                "platform": .string(platform), "name": .string(name), "unique_id": .string(object),
                "object_id": .string(object), "default_entity_id": .string("\(platform).\(object)"),
            ]
            // Everything but the connection state is unavailable while the gateway is offline.
            if key != "connection_state" { config["availability"] = bridgeAvailability }
            config.merge(extra, uniquingKeysWith: { $1 })
            components.append((key, platform, config))
        }
        add("connection_state", "binary_sensor", name: "Connection state", [
            "device_class": "connectivity", "entity_category": "diagnostic", "state_topic": .string(topics.bridgeState),
            "value_template": "{{ value_json.state }}", "payload_on": "online", "payload_off": "offline",
        ])
        add("restart", "button", name: "Restart", [
            "device_class": "restart", "entity_category": "config",
            "command_topic": .string(topics.bridgeRequest("restart")), "payload_press": "{}",
        ])
        add("log_level", "select", name: "Log level", [
            "entity_category": "config", "icon": "mdi:list-status",
            "state_topic": .string(topics.bridgeInfo), "value_template": "{{ value_json.log_level }}",
            "command_topic": .string(topics.bridgeRequest("options")), "command_template": #"{"log_level":"{{ value }}"}"#,
            "options": .array(Self.logLevels.map(JSON.string)),
        ])
        add("version", "sensor", name: "Version", [
            "entity_category": "diagnostic", "icon": "mdi:package-variant",
            "state_topic": .string(topics.bridgeInfo), "value_template": "{{ value_json.version }}",
        ])
        add("commands_executed", "sensor", name: "Commands executed", [
            "entity_category": "diagnostic", "state_class": "total_increasing", "icon": "mdi:check-circle-outline",
            "state_topic": .string(topics.bridgeHealth), "value_template": "{{ value_json.commands.executed }}",
        ])
        add("commands_failed", "sensor", name: "Commands failed", [
            "entity_category": "diagnostic", "state_class": "total_increasing", "icon": "mdi:alert-circle-outline",
            "state_topic": .string(topics.bridgeHealth), "value_template": "{{ value_json.commands.failed }}",
        ])
        for vendor in vendorIDs.sorted() {
            let topic = JSON.string(topics.vendor(vendor))
            add("vendor_" + Slug.make(vendor), "sensor", name: "Vendor \(vendor)", [
                "entity_category": "diagnostic", "device_class": "enum", "options": ["starting", "ok", "degraded", "down"],
                "state_topic": topic, "value_template": "{{ value_json.state }}",
                "json_attributes_topic": topic, "json_attributes_template": "{{ value_json | tojson }}",
            ])
        }
        let kept = Set(components.map(\.key))
        let removed = Set(removedVendorIDs.map { "vendor_" + Slug.make($0) }).subtracting(kept).sorted()
        switch mode {
        case .device:
            var all = Dictionary(uniqueKeysWithValues: components.map { ($0.key, JSON.object($0.config)) })
            for key in removed { all[key] = ["p": "sensor"] }
            let payload: JSON = ["device": bridgeDevice, "origin": origin, "components": .object(all)]
            return [Message(topic: topics.discovery("device", bridgeIdentifier), payload: payload.render())]
        case .component:
            return components.map { component in
                var config = component.config
                config.removeValue(forKey: "platform")
                config["device"] = bridgeDevice
                config["origin"] = origin
                return Message(topic: topics.discovery(component.platform, bridgeIdentifier, key: component.key),
                               payload: JSON.object(config).render())
            } + removed.map { Message(topic: topics.discovery("sensor", bridgeIdentifier, key: $0), payload: "") }
        }
    }

    /// The keys of a home view's payload that become sensors, in a stable order.
    public static func homeViewKeys(_ payload: [String: JSON]) -> [String] {
        payload.keys.filter { HomeViews.energyKeys.contains($0) || HomeViews.environmentKeys.contains($0) }.sorted()
    }

    /// Discovery of a home view: one sensor per key it carries, with device_class, state_class
    /// (energy counters `total_increasing`, so they can be picked in the Energy dashboard), unit and precision.
    public func homeViewMessages(_ view: HomeView, keys: [String]) -> [Message] {
        let identifier = Slug.make(topics.base) + "_" + view.slug
        let stateTopic: String
        let deviceName: String
        var device: [String: JSON] = ["identifiers": [.string(identifier)], "manufacturer": "lbs-gateway", "via_device": .string(bridgeIdentifier)]
        switch view {
        case .energy:
            stateTopic = topics.energyHome
            deviceName = "Home energy"
            device["model"] = "Energy flows of the home"
        case .environment(let room, let name):
            stateTopic = topics.environment(room: room)
            deviceName = "\(name) environment"
            device["model"] = "Room environment"
            device["suggested_area"] = .string(name)
        }
        device["name"] = .string(deviceName)
        var components: [(key: String, config: [String: JSON])] = []
        for key in keys {
            guard let spec = StateKeys.spec(key) else { continue }
            let object = view.slug + "_" + key
            var config: [String: JSON] = [
                "platform": "sensor", "name": Self.entityName(spec.label, deviceName: deviceName), "unique_id": .string(identifier + "_" + key),
                "object_id": .string(object), "default_entity_id": .string("sensor." + object),
                "value_template": .string("{{ value_json.\(key) }}"),
            ]
            let mapping = SensorMapping.for(spec)
            if let unit = spec.unit { config["unit_of_measurement"] = .string(unit) }
            if let deviceClass = mapping.deviceClass { config["device_class"] = .string(deviceClass) }
            if let stateClass = mapping.stateClass { config["state_class"] = .string(stateClass) }
            if let precision = SensorMapping.precision(spec) { config["suggested_display_precision"] = .number(Double(precision)) }
            components.append((key, config))
        }
        switch mode {
        case .device:
            let payload: JSON = [
                "device": .object(device), "origin": origin,
                "components": .object(Dictionary(uniqueKeysWithValues: components.map { ($0.key, JSON.object($0.config)) })),
                "state_topic": .string(stateTopic), "availability": bridgeAvailability, "qos": 1,
            ]
            return [Message(topic: topics.discovery("device", identifier), payload: payload.render())]
        case .component:
            return components.map { component in
                var config = component.config
                config.removeValue(forKey: "platform")
                config["device"] = .object(device)
                config["origin"] = origin
                config["state_topic"] = .string(stateTopic)
                config["availability"] = bridgeAvailability
                return Message(topic: topics.discovery("sensor", identifier, key: component.key), payload: JSON.object(config).render())
            }
        }
    }

    /// Topics to clear when a home view disappears (a room without readings any more) or loses keys.
    public func homeViewClearTopics(_ view: HomeView, keys: [String]) -> [String] {
        let identifier = Slug.make(topics.base) + "_" + view.slug
        switch mode {
        case .device: return [topics.discovery("device", identifier)]
        case .component: return keys.map { topics.discovery("sensor", identifier, key: $0) }
        }
    }
}
