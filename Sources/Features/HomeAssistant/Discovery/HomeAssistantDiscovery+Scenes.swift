import GatewayCore
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel

extension HomeAssistantDiscovery {
    /// `homeassistant/scene/[<node_id>/]<base>_scene_<id>/config`: a Home Assistant `scene` that publishes `ON` to
    /// `<base>/scene/<id>/set`, on the gateway device.
    public func sceneTopic(_ id: String) -> String {
        topics.discovery("scene", "\(Slug.make(topics.base))_scene_\(id)")
    }

    public func sceneMessage(_ scene: Scene) -> Message {
        let object = "scene_" + scene.id.replacing("-", with: "_")
        let config: JSON = [
            "name": .string(scene.name), "unique_id": .string(Slug.make(topics.base) + "_scene_" + scene.id),
            "object_id": .string(object), "default_entity_id": .string("scene." + object),
            "command_topic": .string(topics.sceneSet(scene.id)), "payload_on": "ON",
            "device": ["identifiers": [.string(bridgeIdentifier)]], "origin": origin, "availability": bridgeAvailability, "qos": 1,
        ]
        return Message(topic: sceneTopic(scene.id), payload: config.render())
    }
}
