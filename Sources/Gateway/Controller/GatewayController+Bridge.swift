import Foundation
import GatewayModel
import Logging

/// What the Home Assistant side of the gateway keeps between calls: the controls of the process,
/// which home views were announced with which keys, and when `<base>/bridge/health` last went out.
struct BridgeExtras {
    var controls: BridgeControls?
    /// Home views announced to Home Assistant, with the keys their sensors cover.
    var homeViews: [String: (view: HomeAssistantDiscovery.HomeView, keys: [String])] = [:]
    var lastHealth: (digest: Int, at: Date)?
}

extension GatewayController {
    /// How often the health loop looks at the counters, and the longest gap between two health messages.
    static let healthCheckInterval: Duration = .seconds(3)
    static let healthMaxInterval: TimeInterval = 60

    public func configureBridge(_ controls: BridgeControls) {
        bridgeExtras.controls = controls
    }

    /// The log level shown in `bridge/info` and the `log_level` select.
    var currentLogLevel: String { bridgeExtras.controls?.logLevel.value.rawValue ?? config.logLevel }

    // MARK: - Gateway device and home views in Home Assistant

    /// The gateway device; forgets which home views were announced so they go out again with the next
    /// aggregates (after a reconnect the broker may have lost them).
    func publishGatewayDiscovery() {
        for message in discovery.bridgeMessages(vendorIDs: config.vendors.map(\.id)) {
            transport.publish(message.topic, message.payload, qos: 1, retain: true)
        }
        bridgeExtras.homeViews.removeAll()
    }

    /// Called with each fresh home-view payload (nil: the view is gone, e.g. a room without readings).
    /// Discovery changes only when the set of keys changes, never with the values.
    func homeViewUpdated(_ kind: HomeAssistantDiscovery.HomeView, payload: JSON?) {
        guard config.homeAssistant.enabled else { return }
        var view = kind
        let keys: [String]
        if case .object(let members)? = payload {
            keys = HomeAssistantDiscovery.homeViewKeys(members)
            if case .environment(let room, _) = kind, case .string(let name)? = members["room"] { view = .environment(room: room, name: name) }
        } else {
            keys = []
        }
        let id = view.slug
        let previous = bridgeExtras.homeViews[id]
        if keys.isEmpty {
            // Cleared even when this run never announced it: a room emptied by devices removed at start-up
            // (restored from the cache, vendor gone) was announced by the previous run.
            let possible = if case .energy = view { HomeViews.energyKeys } else { HomeViews.environmentKeys }
            let gone = previous ?? (view, possible.sorted())
            for topic in discovery.homeViewClearTopics(gone.view, keys: gone.keys) { transport.publish(topic, "", qos: 1, retain: true) }
            bridgeExtras.homeViews[id] = nil
            return
        }
        if let previous, previous.keys == keys, previous.view == view { return }
        let messages = discovery.homeViewMessages(view, keys: keys)
        if let previous {
            let kept = Set(messages.map(\.topic))
            for topic in discovery.homeViewClearTopics(previous.view, keys: previous.keys) where !kept.contains(topic) {
                transport.publish(topic, "", qos: 1, retain: true)
            }
        }
        for message in messages { transport.publish(message.topic, message.payload, qos: 1, retain: true) }
        bridgeExtras.homeViews[id] = (view, keys)
    }

    // MARK: - <base>/bridge/health

    /// Publishes the `health` request's data, retained, every 60 s and when the counters change
    /// (checked every 3 s, so a burst of commands gives one message, not one per command).
    public func runBridgeHealth() async {
        while !Task.isCancelled {
            do { try await clock.sleep(for: Self.healthCheckInterval) } catch { return }
            // The first one goes out from `connected()`: nothing is queued for the broker before that.
            if bridgeExtras.lastHealth != nil { publishBridgeHealth(force: false) }
        }
    }

    func publishBridgeHealth(force: Bool) {
        var data = healthJSON()
        // Uptime moves every second: it alone is no reason to publish.
        if case .object(var members) = data {
            members["uptime_s"] = nil
            data = .object(members)
        }
        var hasher = Hasher()
        hasher.combine(data.render())
        let digest = hasher.finalize()
        let time = now()
        if !force, let last = bridgeExtras.lastHealth, last.digest == digest, time.timeIntervalSince(last.at) < Self.healthMaxInterval { return }
        bridgeExtras.lastHealth = (digest, time)
        transport.publish(topics.bridgeHealth, healthJSON().render(), qos: 1, retain: true)
    }

    // MARK: - Requests: restart, options

    func restartRequest(reply: Reply, context: JSON) {
        guard let restart = bridgeExtras.controls?.restart else {
            return fail(GatewayError(.internal, message: "This process cannot restart itself (it is not the lbs-gateway executable)."),
                        device: nil, context: context, reply: reply)
        }
        logger.notice("restart requested on \(topics.bridgeRequest("restart"))")
        respond(reply, status: "ok", data: ["restart": true], error: nil)
        restart()
    }

    /// `{"log_level":"debug"}` (or zigbee2mqtt's `{"options":{"log_level":"debug"}}`): changes the level at
    /// once, until the next start (the config's `log_level` applies again then).
    func optionsRequest(_ body: [String: JSONValue], reply: Reply, context: JSON) {
        var options = body
        if case .object(let nested)? = body["options"] { options = nested }
        guard let value = options["log_level"] else {
            return fail(.invalidPayload("options needs {\"log_level\":\"<level>\"}; levels: \(HomeAssistantDiscovery.logLevels.joined(separator: ", "))"),
                        device: nil, context: context, reply: reply)
        }
        guard case .string(let word) = value, let level = Logger.Level(rawValue: word),
              HomeAssistantDiscovery.logLevels.contains(word) else {
            return fail(.invalidPayload("log_level must be one of \(HomeAssistantDiscovery.logLevels.joined(separator: ", ")), got \(value.brief)"),
                        device: nil, context: context, reply: reply)
        }
        guard let controls = bridgeExtras.controls else {
            return fail(GatewayError(.internal, message: "The log level of this process cannot be changed at runtime."), device: nil, context: context, reply: reply)
        }
        controls.logLevel.value = level
        logger.notice("log level set to \(word)")
        respond(reply, status: "ok", data: ["log_level": .string(word)], error: nil)
        publishBridgeInfo()
    }
}
