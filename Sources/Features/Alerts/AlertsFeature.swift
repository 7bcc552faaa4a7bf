import GatewayCore

/// Alerts (`alerts:`): `<base>/alert/<id>` raised and cleared by rules over the devices' states.
package struct AlertsFeature: GatewayFeature {
    package init() {}

    package func extensions(_ parts: GatewayParts) -> [any GatewayExtension] {
        parts.hub.config.alerts.enabled ? [AlertsExtension(hub: parts.hub, store: parts.persistence?.store)] : []
    }
}
