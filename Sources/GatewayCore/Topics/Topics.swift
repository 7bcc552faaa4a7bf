import GatewayModel

/// Every topic the gateway publishes or subscribes to, in one place. `mqtt-topics.md` documents
/// the same list; `TopicContractTests` keeps the two in step.
public struct Topics: Sendable {
    public let base: String
    public let discoveryPrefix: String
    public let haStatus: String
    /// `homeassistant.node_id`: a discovery topic level of this gateway's own (nil: none, the old layout).
    public let discoveryNodeID: String?

    public init(base: String, discoveryPrefix: String = "homeassistant", haStatus: String = "homeassistant/status", discoveryNodeID: String? = nil) {
        self.base = base
        self.discoveryPrefix = discoveryPrefix
        self.haStatus = haStatus
        self.discoveryNodeID = discoveryNodeID
    }

    /// A discovery topic: `<prefix>/<component>/<object>/config`, with `node_id` set
    /// `<prefix>/<component>/<node_id>/<object>/config` (Home Assistant's optional node level). `key` is the
    /// component mode's entity key: `<object>/<key>` without a node id, `<object>_<key>` with one (one level is left).
    public func discovery(_ component: String, _ object: String, key: String? = nil) -> String {
        guard let node = discoveryNodeID else {
            return "\(discoveryPrefix)/\(component)/\(object)\(key.map { "/" + $0 } ?? "")/config"
        }
        return "\(discoveryPrefix)/\(component)/\(node)/\(object)\(key.map { "_" + $0 } ?? "")/config"
    }

    public var bridgeState: String { "\(base)/bridge/state" }
    /// The active/standby pair's lease (retained: the active node; cleared by its Last Will).
    public var bridgeLease: String { "\(base)/bridge/lease" }
    public var bridgeInfo: String { "\(base)/bridge/info" }
    public var bridgeDevices: String { "\(base)/bridge/devices" }
    /// The end marker of one retained read-back (`GatewayHub.readRetained`): an empty QoS 0 message, never retained.
    public func bridgeFence(_ token: UInt64) -> String { "\(base)/bridge/fence/\(String(token, radix: 16))" }
    public var bridgeEvent: String { "\(base)/bridge/event" }
    public var bridgeHealth: String { "\(base)/bridge/health" }
    public func bridgeRequest(_ name: String) -> String { "\(base)/bridge/request/\(name)" }
    public func bridgeResponse(_ name: String) -> String { "\(base)/bridge/response/\(name)" }
    public func vendor(_ id: String) -> String { "\(base)/bridge/vendors/\(id)" }

    public func device(_ id: DeviceID) -> String { "\(base)/device/\(id.rawValue)" }
    public func availability(_ id: DeviceID) -> String { "\(base)/device/\(id.rawValue)/availability" }
    public func set(_ id: DeviceID) -> String { "\(base)/device/\(id.rawValue)/set" }
    public func set(_ id: DeviceID, key: String) -> String { "\(base)/device/\(id.rawValue)/set/\(key)" }
    public func get(_ id: DeviceID) -> String { "\(base)/device/\(id.rawValue)/get" }
    /// One-off events of a device (not retained): `{"event_type":"short_press",…}`.
    public func deviceEvent(_ id: DeviceID) -> String { "\(base)/device/\(id.rawValue)/event" }
    /// A refused or failed command for the device (not retained), for Home Assistant's "Command error" event entity.
    public func commandError(_ id: DeviceID) -> String { "\(base)/device/\(id.rawValue)/command_error" }

    public var energyHome: String { "\(base)/energy/home" }
    public func environment(room: String) -> String { "\(base)/environment/\(room)" }
    /// One alert's retained state (`<base>/alert/<alert id>`).
    public func alert(_ id: String) -> String { "\(base)/alert/\(id)" }
    public func sceneSet(_ id: String) -> String { "\(base)/scene/\(id)/set" }

    /// What people and automations send the gateway (commands, reads, requests, scenes), Home Assistant's birth
    /// and the pair's lease: inbound messages on these never share a buffer with the gateway's own echoed topics
    /// (the retained sweep and read-backs subscribe to what it publishes), so a flood of those cannot drop them.
    public var priorityFilters: [String] {
        ["\(base)/device/+/set", "\(base)/device/+/set/+", "\(base)/device/+/get", "\(base)/bridge/request/#",
         "\(base)/scene/+/set", haStatus, bridgeLease]
    }

    /// An inbound topic, parsed.
    public enum Inbound: Sendable, Equatable {
        /// `<base>/device/<id>/set` or `/set/<key>`; the id is the raw segment (may be unknown or invalid).
        case set(device: String, key: String?)
        case get(device: String)
        /// `<base>/scene/<id>/set`.
        case scene(String)
        case request(String)
        case homeAssistantStatus
        case other
    }

    public func parse(_ topic: String) -> Inbound {
        if topic == haStatus { return .homeAssistantStatus }
        let prefix = base + "/"
        guard topic.hasPrefix(prefix) else { return .other }
        let rest = topic.dropFirst(prefix.count)
        let parts = rest.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        if parts.count >= 3, parts[0] == "bridge", parts[1] == "request" {
            return .request(parts[2...].joined(separator: "/"))
        }
        if parts.count == 3, parts[0] == "scene", parts[2] == "set" { return .scene(parts[1]) }
        guard parts.count >= 3, parts[0] == "device" else { return .other }
        switch (parts.count, parts[2]) {
        case (3, "set"): return .set(device: parts[1], key: nil)
        case (4, "set"): return .set(device: parts[1], key: parts[3])
        case (3, "get"): return .get(device: parts[1])
        default: return .other
        }
    }
}
