import GatewayCore

/// Home Assistant MQTT discovery (`homeassistant:`): every device, the bridge and the home views as entities.
package struct HomeAssistantFeature: GatewayFeature {
    package init() {}

    package func extensions(_ parts: GatewayParts) -> [any GatewayExtension] {
        parts.hub.config.homeAssistant.enabled ? [HomeAssistantExtension(hub: parts.hub)] : []
    }
}
