import GatewayCore

/// The home views: `<base>/energy/home` and `<base>/environment/<room>`.
package struct HomeViewsFeature: GatewayFeature {
    package init() {}

    package func extensions(_ parts: GatewayParts) -> [any GatewayExtension] {
        [HomeViewsPublisher(hub: parts.hub, store: parts.persistence?.store)]
    }
}
