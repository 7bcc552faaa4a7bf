import FeatureHomeAssistant
import GatewayCore
import Cache
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import Logging

/// Scenes (seed 004's HomeScene and SceneAction): named sets of actions on devices of any vendors.
/// - Defined in the config (`scenes:`) or added and removed by request (`scene/add`, `scene/remove`); added
///   ones are kept in the cache and survive restarts.
/// - Run with `<base>/scene/<id>/set` `ON` or `scene/run`: the actions go through the command path as one
///   `batch` (validated per action, stored in the outbox, each vendor's actions in one vendor call where it
///   has one, each device's actions in order); one result with a result per action goes to the response
///   topic and, as `scene_run`, to `<base>/bridge/event`.
/// - Home Assistant: a `scene` entity per scene, on the gateway device.
@GatewayActor
package final class ScenesExtension: GatewayExtension {
    package let hub: GatewayHub
    private let commands: Commands
    private let store: CacheStore?
    package private(set) var scenes: [String: Scene] = [:]
    private var discovery: HomeAssistantDiscovery?

    package init(hub: GatewayHub, commands: Commands, store: CacheStore?) {
        self.hub = hub
        self.commands = commands
        self.store = store
        if hub.config.homeAssistant.enabled {
            discovery = HomeAssistantDiscovery(topics: hub.topics, mode: hub.config.homeAssistant.mode, version: GatewayController.version)
        }
        if let store {
            do {
                for (id, text) in try store.scenes() {
                    guard case .success(.object(let object)) = JSONValue.parse(Array(text.utf8)), case .success(let scene) = Scene.parse(object) else {
                        hub.logger.error("scene \(id) in the cache is unreadable; left out")
                        continue
                    }
                    scenes[scene.id] = scene
                }
            } catch {
                hub.logger.error("cannot read the scenes from the cache: \(error)")
            }
        }
        // The config file's scenes win over stored ones with the same id.
        for scene in hub.config.scenes { scenes[scene.id] = scene }
    }

    package var subscriptions: [String] { ["\(hub.topics.base)/scene/+/set"] }

    package var requestNames: [String] { ["scenes", "scene/add", "scene/remove", "scene/run"] }

    package func handle(_ event: HubEvent) {
        if case .connected = event { for id in scenes.keys.sorted() { announce(id) } }
    }

    package func receive(_ route: Topics.Inbound, _ message: InboundMessage) -> Bool {
        guard case .scene(let id) = route else { return false }
        let reply = Reply(responseTopic: message.responseTopic, correlationData: message.correlationData)
        let context: JSON = ["topic": .string(message.topic)]
        if message.retain {
            hub.fail(.retainedCommand(message.topic), device: nil, context: context, reply: reply)
            return true
        }
        let word = String(decoding: message.payload, as: UTF8.self).trimmingWhitespace()
        guard word.uppercased() == "ON" || word.isEmpty else {
            hub.fail(.invalidPayload("a scene runs with ON"), device: nil, context: context, reply: reply)
            return true
        }
        run(id, reply: reply, context: context)
        return true
    }

    package func request(_ name: String, body: [String: JSONValue], reply: Reply, context: JSON) {
        switch name {
        case "scenes":
            hub.respond(reply, status: "ok", data: ["scenes": .array(scenes.keys.sorted().compactMap { id in scenes[id].map(summary) })], error: nil)
        case "scene/add":
            switch Scene.parse(body) {
            case .failure(let error):
                hub.fail(error, device: nil, context: context, reply: reply)
            case .success(let scene):
                if scenes[scene.id]?.fromConfig == true {
                    return hub.fail(GatewayError(.invalidPayload, message: "Scene '\(scene.id)' is defined in the config file.",
                                                 suggestion: "Change it there, or add this one under another id."),
                                    device: nil, context: context, reply: reply)
                }
                if scenes[scene.id] == nil, scenes.count >= Scene.maxScenes {
                    return hub.fail(GatewayError(.limitReached, message: "There are \(scenes.count) scenes already, the most the gateway keeps.",
                                                 suggestion: "Remove scenes that are no longer used (scene/remove) first."),
                                    device: nil, context: context, reply: reply)
                }
                scenes[scene.id] = scene
                persist(scene)
                announce(scene.id)
                hub.respond(reply, status: "ok", data: summary(scene), error: nil)
            }
        case "scene/remove":
            guard case .string(let id)? = body["id"], let scene = scenes[id] else {
                return hub.fail(.invalidPayload("scene/remove needs {\"id\":\"<scene id>\"} of a known scene"), device: nil, context: context, reply: reply)
            }
            guard !scene.fromConfig else {
                return hub.fail(GatewayError(.invalidPayload, message: "Scene '\(id)' is defined in the config file.",
                                             suggestion: "Remove it from the config file and restart."),
                                device: nil, context: context, reply: reply)
            }
            scenes[id] = nil
            if let store { hub.tasks.spawn { [hub] in do { try await store.run { try $0.deleteScene(id: id) } } catch { hub.logger.error("cannot forget scene \(id): \(error)") } } }
            if let discovery { hub.transport.publish(discovery.sceneTopic(id), "", qos: 1, retain: true) }
            hub.respond(reply, status: "ok", data: ["id": .string(id)], error: nil)
        default:
            guard case .string(let id)? = body["id"] else {
                return hub.fail(.invalidPayload("scene/run needs {\"id\":\"<scene id>\"}"), device: nil, context: context, reply: reply)
            }
            run(id, reply: reply, context: context)
        }
    }

    package func report(into report: inout BridgeReport) {
        report.queues["scenes"] = .number(Double(scenes.count))
    }

    /// Runs a scene through the batch path; the result goes to the reply and to `bridge/event`.
    package func run(_ id: String, reply: Reply, context: JSON) {
        guard let scene = scenes[id] else {
            return hub.fail(GatewayError(.invalidPayload, message: "No scene with id '\(GatewayError.clip(id))'.",
                                         suggestion: "List the scenes with the 'scenes' bridge request."),
                            device: nil, context: context, reply: reply)
        }
        let items: [JSONValue] = scene.actions.map { .object(["device": .string($0.device), "set": .object($0.set)]) }
        let started = hub.now()
        commands.batch(["commands": .array(items)], reply: reply, context: context) { [hub] data in
            var event: [String: JSON] = ["scene": .string(scene.id), "name": .string(scene.name), "started_at": .string(ISOTime.format(started))]
            if case .object(let members) = data { event.merge(members) { $1 } }
            hub.publishEvent(.sceneRun, .object(event))
        }
    }

    private func summary(_ scene: Scene) -> JSON {
        var json = scene.json
        if case .object(var members) = json {
            members["source"] = .string(scene.fromConfig ? "config" : "request")
            members["command_topic"] = .string(hub.topics.sceneSet(scene.id))
            json = .object(members)
        }
        return json
    }

    private func persist(_ scene: Scene) {
        guard let store else { return }
        let text = scene.json.render()
        hub.tasks.spawn { [hub] in
            do { try await store.run { try $0.saveScene(id: scene.id, json: text) } } catch { hub.logger.error("cannot store scene \(scene.id): \(error)") }
        }
    }

    private func announce(_ id: String) {
        guard let discovery, let scene = scenes[id] else { return }
        let message = discovery.sceneMessage(scene)
        hub.transport.publish(message.topic, message.payload, qos: 1, retain: true)
    }
}
