import Cache
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import VendorKit

/// The whole configuration, after validation and environment overrides.
public struct GatewayConfig: Sendable {
    public var mqtt: MQTTSettings
    public var homeAssistant: HomeAssistantSettings
    public var storage: StorageSettings?
    public var commands: CommandSettings
    public var logLevel: String
    public var vendors: [VendorSettings]
    /// `alerts:` (on by default).
    public var alerts = AlertSettings()
    /// Scenes from the config file (`scenes:`); more come from `scene/add` and live in the cache.
    public var scenes: [Scene] = []
    public var http = HTTPSettings()
    /// `high_availability:` — one of two gateways on two boxes with the same config; nil for a single gateway.
    public var highAvailability: HighAvailabilitySettings?
    /// `homekit:` — the gateway as a HomeKit bridge; nil when off.
    public var homekit: HomeKitBridgeSettings?
    /// What works but should be changed (`check-config` prints it, `run` logs it at start).
    public var warnings: [ConfigProblem] = []

    public init(
        mqtt: MQTTSettings, homeAssistant: HomeAssistantSettings = .init(), storage: StorageSettings? = nil,
        commands: CommandSettings = .init(), logLevel: String = "info", vendors: [VendorSettings]
    ) {
        self.mqtt = mqtt
        self.homeAssistant = homeAssistant
        self.storage = storage
        self.commands = commands
        self.logLevel = logLevel
        self.vendors = vendors
    }
}

public struct MQTTSettings: Sendable {
    public enum Version: String, Sendable { case v5 = "5", v311 = "3.1.1" }

    public var url: String
    public var baseTopic: String = "lbs"
    public var clientID: String = "lbs-gateway"
    public var version: Version = .v5
    public var username: String?
    /// Resolved from `password_file` or `LBS_MQTT_PASSWORD`; never logged or published.
    public var password: VendorSecret?
    public var keepAlive: Int = 60
    public var caFile: String?
    /// Hashed CA directory used when there is no `ca_file` (default `/etc/ssl/certs`, the OS store on Debian).
    public var caPath: String?
    public var certFile: String?
    public var keyFile: String?
    /// Retain `<base>/device/<id>` snapshots (Home Assistant and late subscribers get the last value at once).
    public var retainState: Bool = true
    /// Inbound payloads above this size are rejected with `payload_too_large`.
    public var maxPayloadBytes: Int = 65_536
    public var reconnectMinDelay: Double = 0.5
    public var reconnectMaxDelay: Double = 30
    /// `session_expiry` (s, MQTT 5): when above 0, the broker keeps the gateway's session (its command subscriptions
    /// and the QoS 1 commands sent meanwhile) this long after a disconnect, and a reconnect resumes it. 0: a clean
    /// session per connection.
    public var sessionExpiry: Int = 0
    /// An unchanged device state is published again (to refresh `last_seen`) at most this often, in seconds.
    public var stateHeartbeat: Double = 60
    /// v5 Response Topics the gateway answers on: only topics under one of these prefixes (never under `<base>/`,
    /// the discovery prefix or Home Assistant's status topic). `replies/` by default, so a request cannot aim the
    /// gateway's reply at another system's command topic (`zigbee2mqtt/front_door/set`). An explicit empty list
    /// answers on any other topic (the old default; not recommended with broker ACLs).
    public static let defaultResponseTopicPrefixes = ["replies/"]
    public var responseTopicPrefixes: [String] = MQTTSettings.defaultResponseTopicPrefixes
    /// Publishes held while the broker is unreachable (retained coalesced per topic, oldest dropped when full).
    public var offlineQueueSize: Int = 10_000
    /// Above this many messages waiting in the connection, device states are held back per device (latest
    /// wins) until it drains; commands' replies and confirmed states are never held. A command's state still goes
    /// out behind what the connection holds: at ~48,000 states/s, 2,000 waiting were ~40 ms of every `/set` under
    /// overload; 500 (refilled every `StatePublisher.drainTick`) keep the same rate.
    public var maxBacklog: Int = 500

    public init(url: String) { self.url = url }
}

/// `http:` — the gateway's HTTP listener: the status page (`/`), its live feed and Prometheus `GET /metrics`.
public struct HTTPSettings: Sendable {
    public var enabled = true
    /// `host:port`; loopback by default, so nothing is exposed to the network unless asked.
    public var host = "127.0.0.1"
    public var port = 8099
    /// Devices may be switched from the status page (through the same command path as MQTT `/set`).
    public var allowCommands = false
    /// `allowed_hosts`: further names (or addresses) the listener answers to, e.g. a reverse proxy's or a DNS
    /// name of the box; the box's own names and addresses and `localhost` always are.
    public var allowedHosts: [String] = []
    /// `allow_anonymous_commands`: commands from the page on a non-loopback listener without credentials,
    /// chosen on purpose (check-config refuses that combination otherwise).
    public var allowAnonymousCommands = false
    /// `token_file` / `token_env` (`LBS_HTTP_TOKEN`): every request needs `Authorization: Bearer <token>`.
    public var token: VendorSecret?
    /// `username` + `password_file` / `password_env` (`LBS_HTTP_PASSWORD`): HTTP basic authentication.
    public var username: String?
    public var password: VendorSecret?

    /// True when requests must authenticate.
    public var requiresAuthentication: Bool { token != nil || password != nil }

    public init() {}
}

/// `high_availability:` — an active/standby pair elected through the broker (see `LeaseElector`).
public struct HighAvailabilitySettings: Sendable {
    /// This box's name in the pair (`node_id`, else `LBS_NODE_ID`, else the host name): unique per box.
    public var nodeID: String
    /// Keepalive of the lease connection: the broker clears a dead active's lease within 1.5 × this.
    public var leaseKeepAlive: Int = 5
    /// How long a claim waits for a competing claim before it counts.
    public var settle: Double = 0.5
    /// `nodes`: the pair's node ids. When set, a lease message of any other node is ignored (and logged): a
    /// forged retained lease cannot stop the active or hold the standby back. Empty: every node counts.
    public var nodes: [String] = []
    /// `per_connection_usernames`: the observer and lease connections log in as `<mqtt.username>-observer-<node_id>`
    /// and `<mqtt.username>-lease-<node_id>` (same password), so a broker that binds client ids to users
    /// (`use_username_as_clientid`) gives each connection its own id instead of having them kick each other.
    public var perConnectionUsernames = false

    public init(nodeID: String) { self.nodeID = nodeID }

    /// The active re-publishes its lease this often; a standby that sees no renewal of the held lease for
    /// `staleAfter` takes it as free (nobody holds a forged lease, or an active whose will got lost).
    public var renewInterval: Duration { .seconds(leaseKeepAlive) }
    public var staleAfter: Duration { .seconds(leaseKeepAlive * 3) }

    /// Whether a lease message of `node` counts.
    public func knows(_ node: String) -> Bool { nodes.isEmpty || nodes.contains(node) }

    /// How long the broker holds the active's `bridge/state` will (MQTT 5 Will Delay): longer than a takeover,
    /// so Home Assistant never sees the pair offline while the standby takes the session over.
    public var willDelay: Int { leaseKeepAlive * 3 / 2 + Int(settle.rounded(.up)) + 10 }
    /// How long the broker keeps the active's session (its subscriptions and the QoS 1 commands queued for it)
    /// after the connection is gone: a few seconds past the will delay, so queued commands are never old.
    public var sessionExpiry: Int { willDelay + 5 }
}

public struct HomeAssistantSettings: Sendable {
    public enum Mode: String, Sendable { case device, component }
    public var enabled = true
    public var discoveryPrefix = "homeassistant"
    public var statusTopic = "homeassistant/status"
    public var mode: Mode = .device
    /// Upper bound of the random delay before re-publishing after Home Assistant's birth message.
    public var republishDelayMax: Double = 5
    /// `node_id`: discovery goes to `<prefix>/<component>/<node_id>/<object_id>/config`, a topic level of this
    /// gateway's own, so a site's bridge (and the central ACL) can let through this site's discovery only.
    public var nodeID: String?

    public init() {}
}

public struct StorageSettings: Sendable {
    public var path: String
    public var retention = RetentionSettings()
    /// `storage.outbox_journal`: commands are made durable by a synchronous append to a preallocated file beside
    /// the database (`<path>-outbox`) and reach the database in shared commits behind; false: one database
    /// commit per command, as before.
    public var outboxJournal = true
    public init(path: String) { self.path = path }
}

/// `storage.retention`: how long history is kept (seeds 004 §6) and how much cleanup one pass may do.
public struct RetentionSettings: Sendable, Equatable {
    /// Raw readings older than this are rolled up into hourly aggregates and deleted.
    public var rawDays: Double = 7
    /// Hourly energy aggregates (grid, solar, battery, water, gas) are kept this long.
    public var energyDays: Double = 730
    /// Hourly environment aggregates (temperature, humidity, CO2, …) are kept this long.
    public var environmentDays: Double = 365
    /// Finished outbox rows (acked, failed, expired) are kept this long for inspection.
    public var outboxDays: Double = 7
    /// Seconds between cleanup passes.
    public var interval: Double = 600
    /// Upper bound of rows one pass rolls up or deletes, so a pass never stalls the writer for long.
    public var maxRowsPerRun: Int = 20_000

    public init() {}

    /// The cache's policy, in seconds.
    public var policy: RetentionPolicy {
        RetentionPolicy(
            rawReadings: rawDays * 86_400, energyAggregates: energyDays * 86_400,
            environmentAggregates: environmentDays * 86_400, completedOutbox: outboxDays * 86_400
        )
    }
}

/// How long a command may wait (outbox, vendor down) before it is dropped as `expired`.
public struct CommandSettings: Sendable {
    /// What to do with a command the outbox cannot store (disk full, broken cache).
    public enum StorageFailurePolicy: String, Sendable {
        /// Refuse it with `storage_unavailable` (default: an unstored command could run twice or be lost).
        case refuse
        /// Send it anyway, without the outbox's guarantees.
        case send
    }

    /// Locks, garage doors and covers: a late command is a dangerous command.
    public var securityTTL: Double = 10
    public var defaultTTL: Double = 300
    /// Commands that may wait for one device; more are refused at once with `queue_full`.
    public var maxQueuedPerDevice: Int = 256
    /// How long the gateway keeps reading a device's state back to settle a command whose outcome is
    /// unknown (a timeout after it was sent) before it gives up; newer commands for the device wait meanwhile.
    public var settleWindow: Double = 60
    public var whenStorageFails: StorageFailurePolicy = .refuse

    public init() {}

    public func ttl(for type: DeviceType) -> Double {
        type.isSecurityCritical ? securityTTL : defaultTTL
    }
}

extension GatewayConfig {
    /// `vendors[].energy_home` by vendor id: the keys its devices add to `energy/home` (absent: every key).
    package var energyHomeKeys: [String: Set<String>] {
        var allowed: [String: Set<String>] = [:]
        for vendor in vendors { if let keys = vendor.energyHome { allowed[vendor.id] = keys } }
        return allowed
    }
}
