import GatewayCore
import Logging
import Synchronization

/// The HTTP listener (`http:`): the live status page and its API, and Prometheus metrics on `GET /metrics`
/// (the metrics extension also publishes `<base>/bridge/metrics` without the listener).
package final class StatusPageFeature: GatewayFeature {
    /// What the listener serves, built with the controller's extensions.
    package struct Endpoints: Sendable {
        package let metrics: MetricsExtension
        /// The page's data and its live updates (nil without the listener).
        package let page: StatusPageExtension?
        package let feed: LiveFeed?
    }

    private let built = Mutex<Endpoints?>(nil)

    package init() {}

    package func extensions(_ parts: GatewayParts) -> [any GatewayExtension] {
        let metrics = MetricsExtension(hub: parts.hub, persistence: parts.persistence)
        let feed = parts.hub.config.http.enabled ? LiveFeed() : nil
        let page = feed.map { StatusPageExtension(hub: parts.hub, commands: parts.commands, store: parts.persistence?.store, feed: $0) }
        let endpoints = Endpoints(metrics: metrics, page: page, feed: feed)
        built.withLock { $0 = endpoints }
        return [metrics] + (page.map { [$0] } ?? [])
    }

    package func run(_ controller: GatewayController, logger: Logger) async {
        let settings = await controller.hub.config.http
        guard settings.enabled, let endpoints = built.withLock({ $0 }) else { return }
        await HTTPListener.run(settings: settings, endpoints: endpoints, controller: controller, logger: logger)
    }
}
