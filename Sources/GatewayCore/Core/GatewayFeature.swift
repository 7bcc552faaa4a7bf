import GatewayModel
import Logging
import ServiceLifecycle

/// What the core hands a feature when it builds its extensions: the hub, the command path and the cache.
@GatewayActor
package struct GatewayParts {
    package let hub: GatewayHub
    package let bridge: BridgeAPI
    package let commands: Commands
    package let persistence: CacheLink?
    package let cache: CacheWriter?
}

/// A feature: one folder, one target (`Feature<Name>` in Sources/Features/<Name>) and one line in the
/// composition root (`LBSGatewayApp`'s `GatewayApp.features`), which lists the features in dispatch order.
/// A feature adds extensions to the core (none when its config leaves it off) and may add long-running services
/// (the HTTP listener) to the service group. Features never look each other up: they talk through `HubEvent`s.
package protocol GatewayFeature: Sendable {
    /// The feature's extensions for this controller, in the order they receive events.
    @GatewayActor func extensions(_ parts: GatewayParts) -> [any GatewayExtension]
    /// Services of the feature. They start after the gateway service and stop before it (after the vendors).
    func services(_ config: GatewayConfig, logger: Logger) -> [any Service]
}

extension GatewayFeature {
    package func services(_ config: GatewayConfig, logger: Logger) -> [any Service] { [] }
}

/// The core's own extensions, placed among the features by the composition root.
package enum CoreFeature: GatewayFeature {
    /// `bridge/request/*`, `bridge/info`, `bridge/devices`, `bridge/health` (first: on a connect the bridge
    /// topics go out before anything else).
    case bridgeAPI
    /// Device state, availability and vendor health topics.
    case statePublisher
    /// The write-behind cache (with `storage:`).
    case cache
    /// The command path: parser, lanes, outbox, vendor call, confirmation.
    case commands
    /// Clears what an earlier run published that nobody owns any more.
    case retainedSweep

    package func extensions(_ parts: GatewayParts) -> [any GatewayExtension] {
        switch self {
        case .bridgeAPI: [parts.bridge]
        case .statePublisher: [StatePublisher(hub: parts.hub)]
        case .cache: parts.cache.map { [$0] } ?? [NoStorage(hub: parts.hub)]
        case .commands: [parts.commands]
        case .retainedSweep: [RetainedSweep(hub: parts.hub)]
        }
    }
}

/// Without `storage:`: answers the cache's requests with what to configure, instead of "unknown request".
@GatewayActor
package final class NoStorage: GatewayExtension {
    package let hub: GatewayHub

    package init(hub: GatewayHub) {
        self.hub = hub
    }

    package var requestNames: [String] { ["history"] }

    package func request(_ name: String, body: [String: JSONValue], reply: Reply, context: JSON) {
        hub.fail(GatewayError(.invalidPayload, message: "History needs the SQLite cache.", suggestion: "Set storage.path in the configuration."),
                 device: nil, context: context, reply: reply)
    }
}
