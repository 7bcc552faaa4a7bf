import Foundation
import GatewayModel
import Logging
import MQTT
import ServiceLifecycle
import Vendors

/// The running gateway as a swift-service-lifecycle `Service`. On SIGTERM/SIGINT it stops the
/// vendors, publishes `offline`, disconnects cleanly (so the broker does not fire the will) and returns.
public struct GatewayService: Service {
    let config: GatewayConfig
    let logger: Logger
    let persistence: Persistence?
    let controls: BridgeControls?

    public init(config: GatewayConfig, logger: Logger, persistence: Persistence? = nil, controls: BridgeControls? = nil) {
        self.config = config
        self.logger = logger
        self.persistence = persistence
        self.controls = controls
    }

    /// The services of a configured gateway, in start order (shutdown runs in reverse).
    /// `controls`: the runtime log level and the restart of the `lbs-gateway` process (`bridge/request/options`, `restart`).
    public static func services(config: GatewayConfig, logger: Logger, controls: BridgeControls? = nil) throws -> [any Service] {
        // Also refuse a programmatically built config that `ConfigLoader` would have refused.
        let problems = VendorCatalog.crossCheck(config)
        if !problems.isEmpty { throw ConfigLoader.Failure(problems: problems) }
        guard let storage = config.storage else { return [GatewayService(config: config, logger: logger, controls: controls)] }
        let persistence = try Persistence(path: storage.path, logger: logger)
        return [PersistenceService(persistence: persistence, retention: storage.retention), GatewayService(config: config, logger: logger, persistence: persistence, controls: controls)]
    }

    public func run() async throws {
        let client = try MQTTClient(configuration: MQTTTransport.configuration(for: config))
        let transport = MQTTTransport(client: client)
        let controller = GatewayController(config: config, transport: transport, logger: logger, persistence: persistence)
        if let controls { await controller.configureBridge(controls) }
        // Cached devices and states go out (flagged stale) on the first connect, before any vendor answers.
        await controller.restoreFromCache()
        let events = EventInbox<VendorEvent>(capacity: 100_000)
        await controller.attach(events)
        let sink = VendorEventSink { events.send($0) }
        var vendors: [any Vendor] = []
        let context = VendorContext(pinStore: persistence.map { CacheTLSPinStore(store: $0.store) }, logger: logger)
        for settings in config.vendors {
            let vendor = try VendorCatalog.make(settings, sink: sink, context: context)
            await controller.register(vendor)
            vendors.append(vendor)
        }
        await controller.resumeOutbox()
        client.start()
        logger.info("lbs-gateway \(GatewayController.version) starting: broker \(ConfigLoader.redactURL(config.mqtt.url)), base topic '\(config.mqtt.baseTopic)', \(vendors.count) vendor(s)")

        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await event in client.connectionEvents {
                    switch event {
                    case .connected: await controller.connected()
                    case .disconnected(let error): logger.warning("disconnected from the broker: \(error.message)")
                    case .connectFailed(let error, let retryIn): logger.warning("cannot reach the broker (\(error.message)); retrying in \(GatewayError.readable(retryIn))")
                    }
                }
            }
            group.addTask {
                for await message in client.messages {
                    await controller.handle(InboundMessage(
                        topic: message.topic, payload: message.payload, retain: message.retain,
                        responseTopic: message.responseTopic, correlationData: message.correlationData))
                }
            }
            group.addTask { await controller.consume(events) }
            group.addTask { await controller.runBridgeHealth() }
            for vendor in vendors {
                group.addTask { await Self.keepRunning(vendor, logger: logger) }
            }
            // Wait for SIGTERM/SIGINT (or cancellation), then stop everything above.
            try? await gracefulShutdown()
            logger.info("shutting down")
            group.cancelAll()
        }
        events.finish()
        await controller.flushForShutdown()
        let acknowledged = await controller.publishOffline()
        if !acknowledged { logger.warning("the broker did not acknowledge the offline state in time") }
        await client.shutdown()
        logger.info("stopped")
    }

    /// A vendor whose loop fails is restarted after a pause; it never takes the gateway down.
    static func keepRunning(_ vendor: any Vendor, logger: Logger) async {
        var delay = Duration.seconds(1)
        while !Task.isCancelled {
            do {
                try await vendor.run()
                return
            } catch is CancellationError {
                return
            } catch {
                if Task.isCancelled { return }
                logger.error("vendor \(vendor.instanceID) stopped: \(error); restarting in \(GatewayError.readable(delay))")
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(60))
            }
        }
    }
}
