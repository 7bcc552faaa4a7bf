import GatewayCore
import GatewayModel
import Logging
import ServiceLifecycle
import Synchronization

/// The HTTP listener (`http:`): the live status page and its API, and Prometheus metrics on `GET /metrics`
/// (the metrics extension also publishes `<base>/bridge/metrics` without the listener).
package final class StatusPageFeature: GatewayFeature {
    /// What the listener serves, built with the controller's extensions.
    package struct Endpoints: Sendable {
        package let hub: GatewayHub
        package let metrics: MetricsExtension
        /// The page's data and its live updates (nil without the listener).
        package let page: StatusPageExtension?
        package let feed: LiveFeed?
    }

    /// Set once the gateway service built its controller; until then the listener answers 503.
    private let built = Mutex<Endpoints?>(nil)

    package init() {}

    package var endpoints: Endpoints? { built.withLock { $0 } }

    package func extensions(_ parts: GatewayParts) -> [any GatewayExtension] {
        let metrics = MetricsExtension(hub: parts.hub, persistence: parts.persistence)
        let feed = parts.hub.config.http.enabled ? LiveFeed() : nil
        let page = feed.map { StatusPageExtension(hub: parts.hub, commands: parts.commands, store: parts.persistence?.store, feed: $0) }
        let endpoints = Endpoints(hub: parts.hub, metrics: metrics, page: page, feed: feed)
        built.withLock { $0 = endpoints }
        return [metrics] + (page.map { [$0] } ?? [])
    }

    package func services(_ config: GatewayConfig, logger: Logger) -> [any Service] {
        config.http.enabled ? [HTTPListenerService(settings: config.http, feature: self, logger: logger)] : []
    }

    /// A command from the status page: exactly what an MQTT `/set` with this payload does (parser, outbox,
    /// breaker, events). False when there is no such device.
    @GatewayActor
    package static func command(_ endpoints: Endpoints, device rawID: String, payload: [UInt8]) -> Bool {
        let hub = endpoints.hub
        guard let id = DeviceID(validating: rawID), hub.devices[id] != nil else { return false }
        hub.handle(InboundMessage(topic: hub.topics.set(id), payload: payload))
        return true
    }
}

/// The HTTP listener as a service of the gateway's group. A port that is taken is logged, never fatal (the
/// gateway's job is MQTT): the service then waits for the group's shutdown.
package struct HTTPListenerService: NamedService {
    package let settings: HTTPSettings
    package let feature: StatusPageFeature
    package let logger: Logger

    package func run() async throws {
        let application = HTTPListener.application(settings: settings, feature: feature, logger: logger)
        do {
            // Open pages' live streams end first, or the server's graceful stop would wait for them.
            try await withGracefulShutdownHandler {
                try await application.run()
            } onGracefulShutdown: {
                feature.endpoints?.feed?.close()
            }
        } catch is CancellationError {
            return
        } catch {
            logger.error("the HTTP listener on \(settings.host):\(settings.port) could not run: \(error); the status page and /metrics are unavailable (set http.listen)")
            try? await gracefulShutdown()
        }
    }
}
