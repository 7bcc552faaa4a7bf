#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import Logging
import MQTT
import ServiceLifecycle
import Synchronization
import VendorKit
import Resilience

/// The core of a running gateway as a swift-service-lifecycle `Service`: the MQTT connection, the
/// controller (hub and extensions) and the vendor event inbox. Vendors run in their own service,
/// `VendorSupervisor`, and the cache writer in `CacheService`.
///
/// Start order: `CacheService`, `GatewayService`, `VendorSupervisor`. The group shuts down in reverse:
/// 1. the vendors stop (no new events);
/// 2. the core stops taking MQTT messages, lets commands in flight finish (up to 2 s), cancels its timers,
///    hands the cache its last batch, publishes `offline` and disconnects cleanly (so the broker does not
///    fire the will);
/// 3. the cache writer writes what it was handed and checkpoints the database.
public struct GatewayService: NamedService {
    package let config: GatewayConfig
    package let logger: Logger
    package let persistence: CacheLink?
    package let controls: BridgeControls?
    package let runtime: SharedRuntime
    /// The features in dispatch order (the composition root's list).
    package let features: [any GatewayFeature]
    /// Every wait of the service (the watchdog's pings) goes through it.
    package let clock: any Clock<Duration>
    /// systemd's notification socket (`Type=notify`, `WatchdogSec=`); inert outside systemd.
    package let notifier: SystemdNotifier

    /// What the core and the vendor supervisor share: the event inbox and the vendors, and the moment the
    /// vendors may start (after the cache was restored and each vendor got its last known state).
    public final class SharedRuntime: Sendable {
        package let inbox: EventInbox<VendorEvent>
        package let vendors: [any Vendor]
        private let ready = ReadyGate()

        package init(inbox: EventInbox<VendorEvent>, vendors: [any Vendor]) {
            self.inbox = inbox
            self.vendors = vendors
        }

        package func markReady() { ready.open() }
        /// Returns when the gateway is ready, or when the waiting task is cancelled (see `isReady`).
        package func waitUntilReady() async { await ready.wait() }
        package var isReady: Bool { ready.isOpen }
    }

    package init(config: GatewayConfig, logger: Logger, persistence: CacheLink?, controls: BridgeControls?, runtime: SharedRuntime,
         features: [any GatewayFeature], notifier: SystemdNotifier = SystemdNotifier(), clock: any Clock<Duration> = ContinuousClock()) {
        self.config = config
        self.features = features
        self.clock = clock
        self.logger = logger
        self.persistence = persistence
        self.controls = controls
        self.runtime = runtime
        self.notifier = notifier
    }

    /// The services of a configured gateway, in start order (shutdown runs in reverse).
    /// `controls`: the runtime log level and the restart of the `lbs-gateway` process (`bridge/request/options`, `restart`).
    /// `vendors` and `features`: what the composition root (`LBSGatewayApp`) built the gateway with.
    package static func services(
        config: GatewayConfig, vendors catalog: VendorCatalog, features: [any GatewayFeature], logger: Logger, controls: BridgeControls? = nil
    ) throws -> [any Service] {
        // Also refuse a programmatically built config that `ConfigLoader` would have refused.
        let problems = catalog.crossCheck(config)
        if !problems.isEmpty { throw ConfigLoader.Failure(problems: problems) }
        // The broker settings are checked here, so a bad combination stops the start with its error instead of
        // failing the gateway service after the others started.
        try MQTTTransport.configuration(for: config).validate()
        let persistence = try config.storage.map { try CacheLink(path: $0.path, logger: logger, outboxJournal: $0.outboxJournal) }
        let context = VendorContext(pinStore: persistence.map { CacheTLSPinStore(store: $0.store) }, logger: logger,
                                    valueStore: persistence.map { CacheVendorValueStore(store: $0.store) })
        // Built before anything runs, so a bad vendor entry stops the start with its error.
        let inbox = EventInbox<VendorEvent>(capacity: 100_000, coalescing: .deviceStates)
        let sink = inbox.sink
        let environment = ProcessInfo.processInfo.environment
        let vendors = try config.vendors.map { try catalog.make($0, sink: sink, context: context, environment: environment) }
        let runtime = SharedRuntime(inbox: inbox, vendors: vendors)
        var services: [any Service] = []
        if let persistence, let storage = config.storage {
            services.append(CacheService(persistence: persistence, retention: storage.retention))
        }
        let notifier = SystemdNotifier()
        services.append(GatewayService(config: config, logger: logger, persistence: persistence, controls: controls, runtime: runtime,
                                       features: features, notifier: notifier))
        // The features' services (the HTTP listener): after the core, so they stop before it.
        services += features.flatMap { $0.services(config, logger: logger) }
        services.append(VendorSupervisor(runtime: runtime, logger: logger, notifier: notifier))
        return services
    }

    public func run() async throws {
        let client = try MQTTClient(configuration: MQTTTransport.configuration(for: config))
        let transport = MQTTTransport(client: client)
        let controller = await GatewayController(config: config, transport: transport, logger: logger, persistence: persistence, features: features)
        if let controls { await controller.configureBridge(controls) }
        // Cached devices and states go out (flagged stale) on the first connect, before any vendor answers.
        await controller.restoreFromCache()
        let events = runtime.inbox
        await controller.attach(events)
        for vendor in runtime.vendors { await controller.register(vendor) }
        await controller.resumeOutbox()
        runtime.markReady()
        client.start()
        logger.info("lbs-gateway \(GatewayController.version) starting: broker \(ConfigReader.redactURL(config.mqtt.url)), base topic '\(config.mqtt.baseTopic)', \(runtime.vendors.count) vendor(s)")

        let notifier = self.notifier
        let clock = self.clock
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                var ready = false
                for await event in client.connectionEvents {
                    switch event {
                    case .connected:
                        await controller.connected()
                        // READY=1 once: the cache is restored and the broker connected.
                        notifier.notify((ready ? [] : ["READY=1"]) + ["STATUS=" + (await controller.statusLine())])
                        ready = true
                    case .disconnected(let error):
                        logger.warning("disconnected from the broker: \(error.message)")
                        notifier.notify(["STATUS=broker disconnected: " + error.message])
                    case .connectFailed(let error, let retryIn):
                        logger.warning("cannot reach the broker (\(error.message)); retrying in \(GatewayError.readable(retryIn))")
                        notifier.notify(["STATUS=cannot reach the broker: " + error.message])
                    }
                }
            }
            if let interval = notifier.watchdogInterval {
                // The ping needs the core's executor: a stuck core misses it, and systemd restarts the gateway.
                group.addTask {
                    while !Task.isCancelled {
                        let status = await controller.statusLine()
                        notifier.notify(["WATCHDOG=1", "STATUS=" + status])
                        try? await clock.sleep(for: interval)
                    }
                }
            }
            // Two lanes (`Topics.priorityFilters`): commands and requests never wait behind, or get dropped by,
            // a flood of the gateway's own retained topics echoed back while it reads them.
            for lane in [client.messages, client.bulkMessages] {
                group.addTask {
                    for await message in lane {
                        await controller.handle(InboundMessage(
                            topic: message.topic, payload: message.payload, retain: message.retain,
                            responseTopic: message.responseTopic, correlationData: message.correlationData))
                    }
                }
            }
            group.addTask { await controller.consume(events) }
            group.addTask { await controller.runBridgeHealth() }
            // Wait for the group's shutdown (the vendors stopped before it reaches this service), or cancellation.
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
}

/// Runs every configured vendor, each restarted after a pause when its loop fails, until the group
/// shuts down. It is the last service in the group, so on shutdown the vendors stop first.
public struct VendorSupervisor: NamedService {
    package let runtime: GatewayService.SharedRuntime
    package let logger: Logger
    package var notifier = SystemdNotifier(environment: [:])
    /// The pause before a failed vendor loop starts again goes through it.
    package var clock: any Clock<Duration> = ContinuousClock()

    public func run() async throws {
        // Until the gateway service has started; if it never does (it failed), the group's shutdown ends the wait.
        await cancelWhenGracefulShutdown { await runtime.waitUntilReady() }
        guard runtime.isReady else {
            logger.debug("vendors not started: the gateway did not start")
            return
        }
        let vendors = runtime.vendors
        let logger = self.logger
        let clock = self.clock
        await withTaskGroup(of: Void.self) { group in
            for vendor in vendors {
                group.addTask { await Self.keepRunning(vendor, logger: logger, clock: clock) }
            }
            try? await gracefulShutdown()
            // The first service to hear of the shutdown (the group stops them in reverse order).
            notifier.notify(["STOPPING=1", "STATUS=stopping"])
            group.cancelAll()
        }
        logger.debug("vendors stopped")
    }

    /// A vendor whose loop fails is restarted after a pause; it never takes the gateway down.
    package static func keepRunning(_ vendor: any Vendor, logger: Logger, clock: any Clock<Duration>) async {
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
                try? await clock.sleep(for: delay)
                delay = min(delay * 2, .seconds(60))
            }
        }
    }
}
