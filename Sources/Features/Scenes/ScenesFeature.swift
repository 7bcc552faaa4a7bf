import GatewayCore

/// Scenes (`scenes:` and `bridge/request/scene/*`): several commands under one name, run through the command path.
package struct ScenesFeature: GatewayFeature {
    package init() {}

    package func extensions(_ parts: GatewayParts) -> [any GatewayExtension] {
        [ScenesExtension(hub: parts.hub, commands: parts.commands, store: parts.persistence?.store)]
    }
}
