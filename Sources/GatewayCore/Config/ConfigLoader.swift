#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import VendorKit

/// Turns a YAML file plus environment overrides into a validated `GatewayConfig`,
/// or into the complete list of problems, each with its key path and a fix.
public enum ConfigLoader {
    /// Environment variables that override the file (so secrets can stay out of it).
    public enum Environment {
        public static let url = "LBS_MQTT_URL"
        public static let username = "LBS_MQTT_USERNAME"
        public static let password = "LBS_MQTT_PASSWORD"
        public static let passwordFile = "LBS_MQTT_PASSWORD_FILE"
    }

    public struct Failure: Error, Sendable, CustomStringConvertible {
        public var problems: [ConfigProblem]
        public var description: String { problems.map(\.description).joined(separator: "\n") }
    }

    public static func load(path: String, environment: [String: String] = ProcessInfo.processInfo.environment, vendors: VendorCatalog) -> Result<GatewayConfig, Failure> {
        text(ofFile: path).flatMap { parse(yaml: $0, environment: environment, baseDirectory: path.deletingLastPathComponent, vendors: vendors) }
    }

    /// The config file's text, or why it cannot be read.
    private static func text(ofFile path: String) -> Result<String, Failure> {
        guard let data = FileManager.default.contents(atPath: path) else {
            return .failure(Failure(problems: [ConfigProblem(path: path, message: "cannot read the config file", fix: "check the path and that the gateway may read it")]))
        }
        guard let text = String(data: data, encoding: .utf8) else {
            return .failure(Failure(problems: [ConfigProblem(path: path, message: "the file is not UTF-8 text", fix: "save it as UTF-8")]))
        }
        return .success(text)
    }

    /// The YAML's root node (nil: an empty file), or why it is not YAML.
    private static func compose(_ yaml: String) -> Result<ConfigNode?, Failure> {
        do throws(YAMLReader.SyntaxError) {
            return .success(try YAMLReader.parse(yaml))
        } catch {
            return .failure(Failure(problems: [ConfigProblem(path: "(file)", message: "not valid YAML: \(error)", fix: "check indentation and quoting near that line")]))
        }
    }

    public static func parse(yaml: String, environment: [String: String] = [:], baseDirectory: String = ".", vendors: VendorCatalog) -> Result<GatewayConfig, Failure> {
        let root: ConfigNode
        switch compose(yaml) {
        case .failure(let failure): return .failure(failure)
        case .success(nil):
            return .failure(Failure(problems: [ConfigProblem(path: "(file)", message: "the file is empty", fix: "start from deploy/config.example.yaml")]))
        case .success(let node?): root = node
        }
        var reader = ConfigReader()
        let config = read(root, reader: &reader, environment: environment, baseDirectory: baseDirectory, vendors: vendors)
        // Checks that span entries (`tls: first_use` needs `storage:`).
        for problem in config.map(vendors.crossCheck) ?? [] { reader.problem(problem.path, problem.message, fix: problem.fix) }
        if var config, reader.problems.isEmpty {
            config.warnings = reader.warnings
            return .success(config)
        }
        return .failure(Failure(problems: reader.problems))
    }

    /// What a config refers to outside itself: the broker and every file it names (`ConfigReader.namedFiles`).
    public struct References: Sendable, Equatable {
        public var brokerURL: String?
        public var files: [String]
    }

    /// The references of the file at `path`, valid or not (an installer asks before the files it names are
    /// readable or even exist), read without the environment: what the file itself says. Fails only when the
    /// file cannot be read or is not YAML.
    public static func references(path: String, vendors: VendorCatalog) -> Result<References, Failure> {
        text(ofFile: path).flatMap(compose).map { root in
            guard let root else { return References(brokerURL: nil, files: []) }
            var reader = ConfigReader()
            let config = read(root, reader: &reader, environment: [:], baseDirectory: path.deletingLastPathComponent, vendors: vendors)
            let url = config?.mqtt.url ?? ""
            return References(brokerURL: url.isEmpty ? nil : url, files: reader.namedFiles)
        }
    }

    /// The keys each mapping of `yaml` accepts (see `ConfigReader.acceptedKeys`); only mappings the text has are
    /// visited, so give it every section. For the configuration reference's drift check.
    public static func acceptedKeys(yaml: String, environment: [String: String] = [:], baseDirectory: String = ".", vendors: VendorCatalog) -> [String: Set<String>] {
        guard case .success(let root?) = compose(yaml) else { return [:] }
        var reader = ConfigReader()
        _ = read(root, reader: &reader, environment: environment, baseDirectory: baseDirectory, vendors: vendors)
        return reader.acceptedKeys
    }

    private static func read(_ root: ConfigNode, reader: inout ConfigReader, environment: [String: String], baseDirectory: String, vendors catalog: VendorCatalog) -> GatewayConfig? {
        guard case .mapping = root else {
            reader.problem("(file)", "expected a mapping at the top level", fix: "start with 'mqtt:' and 'vendors:' sections")
            return nil
        }
        reader.rejectUnknownKeys(in: root, at: "", allowed: ["mqtt", "homeassistant", "storage", "commands", "log_level", "vendors", "alerts", "scenes", "http", "high_availability", "homekit"])

        // mqtt
        let mqttNode = reader.mapping(root["mqtt"], at: "mqtt", required: environment[Environment.url] == nil)
        reader.rejectUnknownKeys(in: mqttNode, at: "mqtt", allowed: [
            "url", "base_topic", "client_id", "version", "username", "password_file", "keepalive", "ca_file", "cert_file",
            "key_file", "retain_state", "max_payload_bytes", "reconnect_min_delay", "reconnect_max_delay", "session_expiry",
            "state_heartbeat", "response_topic_prefixes",
            "ca_path", "offline_queue_size", "max_backlog",
        ])
        if mqttNode?["password"] != nil {
            reader.problem("mqtt.password", "passwords are not read from the config file", fix: "use mqtt.password_file or the \(Environment.password) environment variable")
        }
        let url = environment[Environment.url] ?? reader.string(mqttNode?["url"], at: "mqtt.url", required: true)
        var mqtt = MQTTSettings(url: url ?? "")
        if let url { validateURL(url, reader: &reader) }
        if let base = reader.string(mqttNode?["base_topic"], at: "mqtt.base_topic") {
            if base.isEmpty || base.contains("#") || base.contains("+") || base.hasPrefix("/") || base.hasSuffix("/") {
                reader.problem("mqtt.base_topic", "'\(base)' is not a usable topic prefix", fix: "use letters, digits, '_', '-' and inner '/' only, e.g. lbs")
            } else {
                mqtt.baseTopic = base
            }
        }
        if let id = reader.string(mqttNode?["client_id"], at: "mqtt.client_id") { mqtt.clientID = id }
        if let version = reader.oneOf(mqttNode?["version"], at: "mqtt.version", ["5", "3.1.1"]) {
            mqtt.version = MQTTSettings.Version(rawValue: version) ?? .v5
        }
        mqtt.username = environment[Environment.username] ?? reader.string(mqttNode?["username"], at: "mqtt.username")
        // An empty password (an empty file, as install.sh leaves for a broker without logins) is no password.
        if let password = environment[Environment.password] {
            mqtt.password = password.isEmpty ? nil : VendorSecret(password)
        } else if let file = environment[Environment.passwordFile] ?? reader.string(mqttNode?["password_file"], at: "mqtt.password_file") {
            mqtt.password = reader.readSecretFile(file, at: "mqtt.password_file", baseDirectory: baseDirectory).flatMap { $0.reveal().isEmpty ? nil : $0 }
        }
        if mqtt.password != nil, mqtt.username?.isEmpty ?? true {
            reader.problem("mqtt.username", "a broker password is set but no username (MQTT sends a password only with a username)",
                           fix: "set mqtt.username (or \(Environment.username)), or leave the password file empty if the broker needs no login")
        }
        if let keepAlive = reader.number(mqttNode?["keepalive"], at: "mqtt.keepalive", range: 5...65535) { mqtt.keepAlive = Int(keepAlive) }
        for (key, setter) in [("ca_file", \MQTTSettings.caFile), ("cert_file", \.certFile), ("key_file", \.keyFile)] as [(String, WritableKeyPath<MQTTSettings, String?>)] {
            if let file = reader.string(mqttNode?[key], at: "mqtt.\(key)") {
                let resolved = ConfigReader.resolve(file, baseDirectory: baseDirectory)
                reader.namesFile(resolved)
                if !FileManager.default.isReadableFile(atPath: resolved) {
                    reader.problem("mqtt.\(key)", "cannot read '\(file)'", fix: "check the path and permissions")
                }
                mqtt[keyPath: setter] = resolved
            }
        }
        if let directory = reader.string(mqttNode?["ca_path"], at: "mqtt.ca_path") {
            let resolved = ConfigReader.resolve(directory, baseDirectory: baseDirectory)
            var isDirectory = false
            if !FileManager.default.fileExists(atPath: resolved, isDirectory: &isDirectory) || !isDirectory {
                reader.problem("mqtt.ca_path", "'\(directory)' is not a directory", fix: "give a directory of CA certificates hashed with 'openssl rehash'")
            }
            mqtt.caPath = resolved
        }
        if (mqtt.certFile == nil) != (mqtt.keyFile == nil) {
            reader.problem("mqtt.cert_file", "a client certificate needs both cert_file and key_file", fix: "set both or neither")
        }
        if let retain = reader.bool(mqttNode?["retain_state"], at: "mqtt.retain_state") { mqtt.retainState = retain }
        if let limit = reader.number(mqttNode?["max_payload_bytes"], at: "mqtt.max_payload_bytes", range: 64...16_777_216) { mqtt.maxPayloadBytes = Int(limit) }
        if let delay = reader.number(mqttNode?["reconnect_min_delay"], at: "mqtt.reconnect_min_delay", range: 0.05...60) { mqtt.reconnectMinDelay = delay }
        if let delay = reader.number(mqttNode?["reconnect_max_delay"], at: "mqtt.reconnect_max_delay", range: 0.1...3600) { mqtt.reconnectMaxDelay = delay }
        if let expiry = reader.number(mqttNode?["session_expiry"], at: "mqtt.session_expiry", range: 0...86_400) {
            mqtt.sessionExpiry = Int(expiry)
            if expiry > 0, mqtt.version != .v5 {
                reader.problem("mqtt.session_expiry", "a session that outlives the connection needs MQTT 5 here", fix: "remove mqtt.version: 3.1.1, or session_expiry")
            }
        }
        if let seconds = reader.number(mqttNode?["state_heartbeat"], at: "mqtt.state_heartbeat", range: 1...86_400) { mqtt.stateHeartbeat = seconds }
        switch mqttNode?["response_topic_prefixes"] {
        case .none, .null?: break
        case .sequence(let items)?:
            // The list replaces the default `replies/`.
            mqtt.responseTopicPrefixes = []
            for (index, item) in items.enumerated() {
                let at = "mqtt.response_topic_prefixes[\(index)]"
                guard let prefix = reader.string(item, at: at) else { continue }
                if prefix.isEmpty || prefix.contains("#") || prefix.contains("+") {
                    reader.problem(at, "'\(prefix)' is not a usable topic prefix", fix: "use a plain prefix such as replies/")
                } else {
                    mqtt.responseTopicPrefixes.append(prefix)
                }
            }
        case let other?:
            reader.problem("mqtt.response_topic_prefixes", "expected a list, found \(other.kindName)", fix: "write e.g. [replies/, nodered/]")
        }
        if let size = reader.number(mqttNode?["offline_queue_size"], at: "mqtt.offline_queue_size", range: 0...1_000_000) { mqtt.offlineQueueSize = Int(size) }
        if let size = reader.number(mqttNode?["max_backlog"], at: "mqtt.max_backlog", range: 100...10_000_000) { mqtt.maxBacklog = Int(size) }

        // homeassistant
        var ha = HomeAssistantSettings()
        let haNode = reader.mapping(root["homeassistant"], at: "homeassistant")
        reader.rejectUnknownKeys(in: haNode, at: "homeassistant", allowed: ["enabled", "discovery_prefix", "status_topic", "discovery_mode", "republish_delay", "node_id"])
        if let enabled = reader.bool(haNode?["enabled"], at: "homeassistant.enabled") { ha.enabled = enabled }
        if let prefix = reader.string(haNode?["discovery_prefix"], at: "homeassistant.discovery_prefix") { ha.discoveryPrefix = prefix }
        if let topic = reader.string(haNode?["status_topic"], at: "homeassistant.status_topic") { ha.statusTopic = topic }
        if let mode = reader.oneOf(haNode?["discovery_mode"], at: "homeassistant.discovery_mode", ["device", "component"]) {
            ha.mode = HomeAssistantSettings.Mode(rawValue: mode) ?? .device
        }
        if let delay = reader.number(haNode?["republish_delay"], at: "homeassistant.republish_delay", range: 0...300) { ha.republishDelayMax = delay }
        if let node = reader.string(haNode?["node_id"], at: "homeassistant.node_id") {
            // Home Assistant accepts [a-zA-Z0-9_-] in a discovery node id.
            if !node.isEmpty, node.unicodeScalars.allSatisfy({ ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "_" || $0 == "-" }) {
                ha.nodeID = node
            } else {
                reader.problem("homeassistant.node_id", "'\(node)' is not a usable discovery node id",
                               fix: "use letters, digits, '_' or '-', e.g. site_a for base_topic site/a")
            }
        }

        // storage
        var storage: StorageSettings?
        if let storageNode = reader.mapping(root["storage"], at: "storage") {
            reader.rejectUnknownKeys(in: storageNode, at: "storage", allowed: ["path", "retention", "outbox_journal"])
            let retention = readRetention(storageNode["retention"], reader: &reader)
            let journal = reader.bool(storageNode["outbox_journal"], at: "storage.outbox_journal")
            if let path = reader.string(storageNode["path"], at: "storage.path", required: true) {
                storage = StorageSettings(path: ConfigReader.resolve(path, baseDirectory: baseDirectory))
                storage?.retention = retention
                if let journal { storage?.outboxJournal = journal }
            }
        }

        // commands
        var commands = CommandSettings()
        if let commandsNode = reader.mapping(root["commands"], at: "commands") {
            reader.rejectUnknownKeys(in: commandsNode, at: "commands", allowed: [
                "ttl", "security_ttl", "max_queued_per_device", "settle_window", "when_storage_fails",
            ])
            if let ttl = reader.number(commandsNode["ttl"], at: "commands.ttl", range: 1...86_400) { commands.defaultTTL = ttl }
            if let ttl = reader.number(commandsNode["security_ttl"], at: "commands.security_ttl", range: 1...3600) { commands.securityTTL = ttl }
            if let limit = reader.number(commandsNode["max_queued_per_device"], at: "commands.max_queued_per_device", range: 1...100_000) {
                commands.maxQueuedPerDevice = Int(limit)
            }
            if let seconds = reader.number(commandsNode["settle_window"], at: "commands.settle_window", range: 0...3600) { commands.settleWindow = seconds }
            if let policy = reader.oneOf(commandsNode["when_storage_fails"], at: "commands.when_storage_fails", ["refuse", "send"]) {
                commands.whenStorageFails = CommandSettings.StorageFailurePolicy(rawValue: policy) ?? .refuse
            }
        }

        let alerts = readAlerts(root["alerts"], reader: &reader)
        let scenes = reader.scenes(root["scenes"])
        var http = HTTPSettings()
        if let node = reader.mapping(root["http"], at: "http") {
            reader.rejectUnknownKeys(
                in: node, at: "http",
                allowed: ["enabled", "listen", "allow_commands", "allow_anonymous_commands", "allowed_hosts", "username"]
                    + ConfigReader.secretKeys("token") + ConfigReader.secretKeys("password"))
            if let enabled = reader.bool(node["enabled"], at: "http.enabled") { http.enabled = enabled }
            if let allow = reader.bool(node["allow_commands"], at: "http.allow_commands") { http.allowCommands = allow }
            // Secrets as for vendors: <name>_file, <name>_env or LBS_HTTP_<NAME>, never in the file itself.
            let secrets = VendorSettings(type: "http", id: "http", options: node, path: "http")
            var withBase = secrets
            withBase.baseDirectory = baseDirectory
            http.token = reader.secret("token", of: withBase, environment: environment, required: false)
            http.username = reader.string(node["username"], at: "http.username")
            http.password = reader.secret("password", of: withBase, environment: environment, required: http.username != nil)
            if http.password != nil, http.username == nil {
                reader.problem("http.username", "a password is set but no username", fix: "add http.username for basic authentication")
            }
            if let (host, port) = readListen(node["listen"], at: "http.listen", ports: 0...65535, example: "127.0.0.1:8099 (0.0.0.0:8099 for every interface)",
                                             reader: &reader) {
                http.host = host
                http.port = port
            }
            http.allowedHosts = readAllowedHosts(node["allowed_hosts"], reader: &reader)
            if let anonymous = reader.bool(node["allow_anonymous_commands"], at: "http.allow_anonymous_commands") { http.allowAnonymousCommands = anonymous }
            // Anyone on the network could unlock a door from the page: only when asked for in so many words.
            if http.enabled, http.allowCommands, !http.requiresAuthentication, !http.allowAnonymousCommands, !Self.isLoopback(http.host) {
                reader.problem(
                    "http.allow_commands",
                    "commands are allowed from the page on \(http.host), reachable from the network, with no credentials",
                    fix: "set http.token_file (or http.username and http.password_file), listen on 127.0.0.1, or set http.allow_anonymous_commands: true if every host that can reach it may switch your devices")
            }
        }

        let logLevel = reader.oneOf(root["log_level"], at: "log_level", ["trace", "debug", "info", "notice", "warning", "error", "critical"]) ?? "info"

        // vendors
        var vendors: [VendorSettings] = []
        switch root["vendors"] {
        case .none, .null?:
            reader.problem("vendors", "missing", fix: "add at least '- {type: demo, id: demo}' under 'vendors:'")
        case .sequence(let items)?:
            if items.isEmpty { reader.problem("vendors", "is empty", fix: "add at least '- {type: demo, id: demo}'") }
            var seen: Set<String> = []
            for (index, item) in items.enumerated() {
                let path = "vendors[\(index)]"
                // An empty item (`- ` followed by nothing but a comment) is a problem, not a vendor to skip.
                guard reader.mapping(item, at: path, required: true) != nil else { continue }
                // `type:` with nothing after it (or only an anchor, `type: &a`) is as missing as no `type:` at all.
                let typeNode = item["type"]
                let type = reader.oneOf(typeNode, at: "\(path).type", catalog.types)
                    ?? (typeNode == nil || typeNode == .null ? { reader.problem("\(path).type", "missing", fix: "set type to one of: \(catalog.types.joined(separator: ", "))"); return nil }() : nil)
                let id = reader.string(item["id"], at: "\(path).id") ?? type
                if let id {
                    if !Slug.isValid(id) || id.count > 32 {
                        reader.problem("\(path).id", "'\(id)' is not a valid vendor id", fix: "use 1–32 lower-case letters, digits, '_' or '-'")
                    } else if !seen.insert(id).inserted {
                        reader.problem("\(path).id", "'\(id)' is used twice", fix: "give every vendor entry its own id")
                    }
                }
                let poll = reader.number(item["poll_interval"], at: "\(path).poll_interval", range: 0.05...86_400)
                let maxDevices = reader.number(item["max_devices"], at: "\(path).max_devices", range: 1...1_000_000)
                guard let type, let id else { continue }
                var settings = VendorSettings(type: type, id: id, pollInterval: poll, options: item, path: path)
                if let maxDevices { settings.maxDevices = Int(maxDevices) }
                settings.energyHome = readEnergyHome(item["energy_home"], at: "\(path).energy_home", reader: &reader)
                settings.baseDirectory = baseDirectory
                catalog.validate(settings, reader: &reader, environment: environment)
                vendors.append(settings)
            }
        case let other?:
            reader.problem("vendors", "expected a list, found \(other.kindName)", fix: "write each vendor as a '- type: …' item")
        }
        var config = GatewayConfig(mqtt: mqtt, homeAssistant: ha, storage: storage, commands: commands, logLevel: logLevel, vendors: vendors)
        config.alerts = alerts
        config.scenes = scenes
        config.http = http
        config.highAvailability = readHighAvailability(root["high_availability"], mqtt: config.mqtt, reader: &reader, environment: environment)
        config.homekit = readHomeKitBridge(root["homekit"], storage: storage, reader: &reader, environment: environment, baseDirectory: baseDirectory)
        // `unusual_consumption` compares with the cache's hourly history: without `storage:` there is none.
        if storage == nil { config.alerts.consumptionFactor = 0 }
        return config
    }

    /// A `listen: host:port` key (`[::1]:8099` too); nil, with a problem, when it is not one.
    static func readListen(_ node: ConfigNode?, at path: String, ports: ClosedRange<Int>, example: String, reader: inout ConfigReader) -> (String, Int)? {
        guard let listen = reader.string(node, at: path) else { return nil }
        guard let colon = listen.lastIndex(of: ":"), colon > listen.startIndex, let port = Int(listen[listen.index(after: colon)...]), ports.contains(port) else {
            reader.problem(path, "'\(listen)' is not host:port", fix: "write e.g. \(example)")
            return nil
        }
        var host = listen[..<colon]
        if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        return (String(host), port)
    }

    /// `http.allowed_hosts`: host names or addresses, without scheme or path.
    private static func readAllowedHosts(_ node: ConfigNode?, reader: inout ConfigReader) -> [String] {
        switch node {
        case .none, .null?:
            return []
        case .sequence(let items)?:
            var hosts: [String] = []
            for (index, item) in items.enumerated() {
                let at = "http.allowed_hosts[\(index)]"
                guard let host = reader.string(item, at: at) else { continue }
                if host.isEmpty || host.contains("/") || host.contains("@") || host.contains(where: \.isWhitespace) {
                    reader.problem(at, "'\(host)' is not a host name or address", fix: "write the name alone, e.g. gateway.example.net or 192.168.1.10")
                } else {
                    hosts.append(host)
                }
            }
            return hosts
        case let other?:
            reader.problem("http.allowed_hosts", "expected a list, found \(other.kindName)", fix: "write e.g. [gateway.example.net]")
            return []
        }
    }

    /// 127.0.0.0/8, ::1 and localhost: reachable from this box only.
    package static func isLoopback(_ host: String) -> Bool {
        let host = host.lowercased()
        return host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    /// `high_availability: {node_id, lease_keepalive, settle}`; `node_id` defaults to `LBS_NODE_ID`, then the host name.
    /// Also `nodes` (the pair's node ids) and `per_connection_usernames` (see `HighAvailabilitySettings`).
    package static func readHighAvailability(
        _ node: ConfigNode?, mqtt: MQTTSettings, reader: inout ConfigReader, environment: [String: String]
    ) -> HighAvailabilitySettings? {
        guard let node = reader.mapping(node, at: "high_availability") else { return nil }
        reader.rejectUnknownKeys(in: node, at: "high_availability", allowed: ["enabled", "node_id", "lease_keepalive", "settle", "nodes", "per_connection_usernames"])
        if reader.bool(node["enabled"], at: "high_availability.enabled") == false { return nil }
        let nodeID = reader.string(node["node_id"], at: "high_availability.node_id")
            ?? environment["LBS_NODE_ID"] ?? ProcessInfo.processInfo.hostName
        guard !nodeID.isEmpty, nodeID.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == "." }) else {
            reader.problem("high_availability.node_id", "'\(nodeID)' is not a usable node id", fix: "use letters, digits, '-', '_' or '.', different on each box")
            return nil
        }
        var settings = HighAvailabilitySettings(nodeID: nodeID)
        if let keepAlive = reader.number(node["lease_keepalive"], at: "high_availability.lease_keepalive", range: 5...60) {
            settings.leaseKeepAlive = Int(keepAlive)
        }
        if let settle = reader.number(node["settle"], at: "high_availability.settle", range: 0.1...10) { settings.settle = settle }
        switch node["nodes"] {
        case .none, .null?: break
        case .sequence(let items)?:
            for (index, item) in items.enumerated() {
                guard let name = reader.string(item, at: "high_availability.nodes[\(index)]") else { continue }
                if name.isEmpty || !name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == "." }) {
                    reader.problem("high_availability.nodes[\(index)]", "'\(name)' is not a usable node id", fix: "use letters, digits, '-', '_' or '.'")
                } else if !settings.nodes.contains(name) {
                    settings.nodes.append(name)
                }
            }
            // Otherwise this node would ignore its own lease and claim it over and over.
            if !settings.nodes.isEmpty, !settings.nodes.contains(nodeID) {
                reader.problem("high_availability.nodes", "this node's id '\(nodeID)' is not in the list [\(settings.nodes.joined(separator: ", "))]",
                               fix: "list every node of the pair, this one included, or set high_availability.node_id (or LBS_NODE_ID) to one of them")
            }
        case let other?:
            reader.problem("high_availability.nodes", "expected a list of node ids, found \(other.kindName)", fix: "write e.g. nodes: [gw-1, gw-2]")
        }
        if let own = reader.bool(node["per_connection_usernames"], at: "high_availability.per_connection_usernames") {
            settings.perConnectionUsernames = own
            if own, mqtt.username == nil {
                reader.problem("high_availability.per_connection_usernames", "needs mqtt.username (the extra connections log in as <username>-observer-<node_id> and <username>-lease-<node_id>)",
                               fix: "set mqtt.username, or remove per_connection_usernames")
            }
        }
        // The takeover resumes the active's MQTT 5 session (queued commands, delayed will); 3.1.1 has neither.
        if mqtt.version != .v5 {
            reader.problem("high_availability", "an active/standby pair needs MQTT 5", fix: "remove mqtt.version: 3.1.1")
        }
        return settings
    }

    /// `energy_home: true|false|[keys]`: which energy keys an entry adds to `<base>/energy/home`.
    /// `alerts: {enabled, water_leak: {flow_above, for}, environment: {<key>: {above, below}}, rooms: {<room>: {<key>: …}}}`.
    /// A key's limits replace the default ones for that key; `<key>: false` turns its alerts off.
    package static func readAlerts(_ node: ConfigNode?, reader: inout ConfigReader) -> AlertSettings {
        var settings = AlertSettings()
        guard let node = reader.mapping(node, at: "alerts") else { return settings }
        reader.rejectUnknownKeys(in: node, at: "alerts", allowed: ["enabled", "water_leak", "environment", "rooms", "unusual_consumption"])
        if let usage = reader.mapping(node["unusual_consumption"], at: "alerts.unusual_consumption") {
            reader.rejectUnknownKeys(in: usage, at: "alerts.unusual_consumption", allowed: ["factor", "days", "min_days"])
            if let factor = reader.number(usage["factor"], at: "alerts.unusual_consumption.factor", range: 0...100) { settings.consumptionFactor = factor }
            if let days = reader.number(usage["days"], at: "alerts.unusual_consumption.days", range: 1...60) { settings.consumptionDays = Int(days) }
            if let days = reader.number(usage["min_days"], at: "alerts.unusual_consumption.min_days", range: 1...60) { settings.consumptionMinDays = Int(days) }
        }
        if let enabled = reader.bool(node["enabled"], at: "alerts.enabled") { settings.enabled = enabled }
        if let water = reader.mapping(node["water_leak"], at: "alerts.water_leak") {
            reader.rejectUnknownKeys(in: water, at: "alerts.water_leak", allowed: ["flow_above", "for"])
            if let flow = reader.number(water["flow_above"], at: "alerts.water_leak.flow_above", range: 0...1000) { settings.leakFlowAbove = flow }
            if let seconds = reader.number(water["for"], at: "alerts.water_leak.for", range: 60...86_400) { settings.leakFlowDuration = seconds }
        }
        func limits(_ node: ConfigNode?, at path: String, into table: inout [String: AlertSettings.Threshold]) {
            guard let node = reader.mapping(node, at: path) else { return }
            for key in node.keys {
                let at = "\(path).\(key)"
                guard let spec = StateKeys.spec(key), case .number = spec.kind else {
                    reader.problem(at, "'\(key)' is not a numeric state key", fix: "use e.g. co2, humidity, temperature, pm25, voc, voc_ppb")
                    continue
                }
                if case .scalar(let text, _)? = node[key], text.lowercased() == "false" {
                    table[key] = AlertSettings.Threshold()
                    continue
                }
                guard let limit = reader.mapping(node[key], at: at) else { continue }
                reader.rejectUnknownKeys(in: limit, at: at, allowed: ["above", "below"])
                table[key] = AlertSettings.Threshold(above: reader.number(limit["above"], at: "\(at).above"), below: reader.number(limit["below"], at: "\(at).below"))
            }
        }
        limits(node["environment"], at: "alerts.environment", into: &settings.environment)
        if let rooms = reader.mapping(node["rooms"], at: "alerts.rooms") {
            for room in rooms.keys {
                var table: [String: AlertSettings.Threshold] = [:]
                limits(rooms[room], at: "alerts.rooms.\(room)", into: &table)
                settings.rooms[Slug.make(room)] = table
            }
        }
        return settings
    }

    package static func readEnergyHome(_ node: ConfigNode?, at path: String, reader: inout ConfigReader) -> Set<String>? {
        let known = HomeViews.powerKeys + HomeViews.counterKeys + ["battery_level"]
        switch node {
        case .none, .null?:
            return nil
        case .scalar?:
            return reader.bool(node, at: path).map { $0 ? nil : [] } ?? nil
        case .sequence(let items)?:
            var keys: Set<String> = []
            for (index, item) in items.enumerated() {
                guard let key = reader.string(item, at: "\(path)[\(index)]") else { continue }
                if known.contains(key) { keys.insert(key) } else {
                    reader.problem("\(path)[\(index)]", "'\(key)' is not a key of energy/home", fix: "use keys from: \(known.joined(separator: ", "))")
                }
            }
            return keys
        case let other?:
            reader.problem(path, "expected true, false or a list of keys, found \(other.kindName)", fix: "e.g. energy_home: [grid_power, battery_power, battery_level]")
            return nil
        }
    }

    /// `storage.retention`; every key is optional and defaults to seeds 004 §6.
    package static func readRetention(_ node: ConfigNode?, reader: inout ConfigReader) -> RetentionSettings {
        var retention = RetentionSettings()
        guard let node = reader.mapping(node, at: "storage.retention") else { return retention }
        let at = "storage.retention"
        reader.rejectUnknownKeys(in: node, at: at, allowed: [
            "raw_days", "energy_days", "environment_days", "outbox_days", "interval", "max_rows_per_run",
        ])
        if let days = reader.number(node["raw_days"], at: "\(at).raw_days", range: 0.05...3650) { retention.rawDays = days }
        if let days = reader.number(node["energy_days"], at: "\(at).energy_days", range: 1...36_500) { retention.energyDays = days }
        if let days = reader.number(node["environment_days"], at: "\(at).environment_days", range: 1...36_500) { retention.environmentDays = days }
        if let days = reader.number(node["outbox_days"], at: "\(at).outbox_days", range: 0.05...3650) { retention.outboxDays = days }
        if let seconds = reader.number(node["interval"], at: "\(at).interval", range: 1...86_400) { retention.interval = seconds }
        if let rows = reader.number(node["max_rows_per_run"], at: "\(at).max_rows_per_run", range: 100...10_000_000) {
            retention.maxRowsPerRun = Int(rows)
        }
        // Aggregates younger than the raw window would be deleted as soon as they are written.
        for (key, days) in [("energy_days", retention.energyDays), ("environment_days", retention.environmentDays)] where days < retention.rawDays {
            reader.problem("\(at).\(key)", "\(JSONText.number(days)) days is shorter than raw_days (\(JSONText.number(retention.rawDays)))",
                           fix: "keep hourly aggregates at least as long as raw readings")
        }
        return retention
    }

    package static func validateURL(_ url: String, reader: inout ConfigReader) {
        let lower = url.lowercased()
        guard lower.hasPrefix("mqtt://") || lower.hasPrefix("mqtts://") else {
            reader.problem("mqtt.url", "'\(ConfigReader.redactURL(url))' must start with mqtt:// or mqtts://", fix: "e.g. mqtt://localhost:1883")
            return
        }
        if url.contains("@") {
            reader.problem("mqtt.url", "credentials in the URL are not accepted", fix: "use mqtt.username and mqtt.password_file or \(Environment.password)")
        }
    }
}

