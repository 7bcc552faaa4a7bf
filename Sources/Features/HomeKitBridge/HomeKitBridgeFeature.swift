#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayCore
import GatewayModel
import HAP
import Logging
import ServiceLifecycle
import Synchronization
import VendorKit

/// `homekit:` — the gateway as a HomeKit bridge (what Homebridge does): every device appears in Apple Home,
/// live and controllable. An extension of the core like Home Assistant discovery; without `homekit:` it adds
/// nothing (no extension, no service, no listener, nothing in the cache).
package final class HomeKitBridgeFeature: GatewayFeature {
    private let built = Mutex<BridgeRuntime?>(nil)

    package init() {}

    package func extensions(_ parts: GatewayParts) -> [any GatewayExtension] {
        guard let settings = parts.hub.config.homekit, let persistence = parts.persistence else { return [] }
        let runtime = BridgeRuntime(settings: settings, store: BridgeStore(values: CacheVendorValueStore(store: persistence.store)), logger: parts.hub.logger)
        let bridge = BridgeExtension(hub: parts.hub, commands: parts.commands, runtime: runtime)
        runtime.attach(bridge)
        built.withLock { $0 = runtime }
        return [bridge]
    }

    package func services(_ config: GatewayConfig, logger: Logger) -> [any Service] {
        guard let settings = config.homekit, config.storage != nil else { return [] }
        return [HomeKitBridgeService(settings: settings, feature: self, logger: logger)]
    }

    /// The runtime once the gateway service built its controller; nil when the task is cancelled first.
    func runtime() async -> BridgeRuntime? {
        while !Task.isCancelled {
            if let ready = built.withLock({ $0 }) { return ready }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return nil
    }
}

/// The HAP server and its mDNS announcement as a service of the gateway's group. A port that is taken is logged,
/// never fatal (the gateway's job is MQTT).
struct HomeKitBridgeService: NamedService {
    let settings: HomeKitBridgeSettings
    let feature: HomeKitBridgeFeature
    let logger: Logger

    func run() async throws {
        guard let runtime = await cancelWhenGracefulShutdown({ await feature.runtime() }) else { return }
        let snapshot: BridgeStore.Snapshot
        do { snapshot = try await runtime.load() } catch {
            logger.error("homekit bridge: cannot read its identity from the cache: \(error); the bridge is off")
            try? await gracefulShutdown()
            return
        }
        let code = settings.setupCode.reveal()
        let delegate = BridgeDelegate(runtime: runtime, identity: snapshot.identity, setupCode: code)
        let server = HAPAccessoryServer(host: settings.host, port: settings.port, delegate: delegate, logger: logger)
        let advertiser = settings.advertise
            ? BridgeAdvertiser(name: settings.name, port: settings.port, deviceID: snapshot.identity.pairingID,
                               setupID: HomeKitBridgeSettings.setupID(for: code), logger: logger)
            : nil
        runtime.attach(server: server, advertiser: advertiser)
        await advertiser?.update(configNumber: snapshot.configNumber, paired: !snapshot.pairings.isEmpty)
        defer { advertiser?.stop() }
        do {
            try await cancelWhenGracefulShutdown {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await server.run() }
                    if let advertiser {
                        group.addTask {
                            while !Task.isCancelled {
                                try await Task.sleep(for: .seconds(5))
                                advertiser.keepAlive()
                            }
                        }
                    }
                    try await group.next()
                    group.cancelAll()
                }
            }
        } catch is CancellationError {
        } catch {
            logger.error("homekit bridge: the HAP server on \(settings.host):\(settings.port) could not run: \(error); set homekit.listen to a free port")
            try? await gracefulShutdown()
        }
        server.closeAll()
    }
}
