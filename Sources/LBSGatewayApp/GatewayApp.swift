import FeatureAlerts
import FeatureHomeAssistant
import FeatureHomeKitBridge
import FeatureHomeViews
import FeatureScenes
import FeatureStatusPage
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayCore
import Logging
import ServiceLifecycle

/// The composition root: which vendors and features this gateway is built with, and in which order the
/// features' extensions receive the hub's events. `lbs-gateway`, the benchmarks and the tests all build their
/// gateway from here. Adding a feature: its folder under Sources/Features, one line in Package.swift's
/// `features`, one line in `features()` below (see docs/adding-a-feature.md).
public enum GatewayApp {
    /// Every vendor type (see `VendorRegistry`).
    public static let vendors = VendorCatalog(factories: VendorRegistry.factories)

    /// The features in dispatch order. The order is part of the topic contract (`mqtt-topics.md`, "Order of
    /// messages"): on a (re)connect the bridge topics first, then discovery, then each device's availability
    /// and state, then the home views.
    package static func features() -> [any GatewayFeature] {
        [
            CoreFeature.bridgeAPI,
            HomeAssistantFeature(),
            CoreFeature.statePublisher,
            HomeViewsFeature(),
            AlertsFeature(),
            CoreFeature.cache,
            CoreFeature.commands,
            ScenesFeature(),
            CoreFeature.retainedSweep,
            StatusPageFeature(),
            HomeKitBridgeFeature(),
        ]
    }

    /// The services of a configured gateway, in start order (shutdown runs in reverse).
    public static func services(config: GatewayConfig, logger: Logger, controls: BridgeControls? = nil) throws -> [any Service] {
        try GatewayService.services(config: config, vendors: vendors, features: features(), logger: logger, controls: controls)
    }
}

// The core's entry points with this gateway's vendors and features filled in.

extension VendorCatalog {
    /// Every vendor type this gateway is built with.
    public static var all: VendorCatalog { GatewayApp.vendors }
}

extension ConfigLoader {
    public static func load(path: String, environment: [String: String] = ProcessInfo.processInfo.environment) -> Result<GatewayConfig, Failure> {
        load(path: path, environment: environment, vendors: GatewayApp.vendors)
    }

    public static func parse(yaml: String, environment: [String: String] = [:], baseDirectory: String = ".") -> Result<GatewayConfig, Failure> {
        parse(yaml: yaml, environment: environment, baseDirectory: baseDirectory, vendors: GatewayApp.vendors)
    }

    public static func references(path: String) -> Result<References, Failure> {
        references(path: path, vendors: GatewayApp.vendors)
    }

    public static func acceptedKeys(yaml: String, environment: [String: String] = [:], baseDirectory: String = ".") -> [String: Set<String>] {
        acceptedKeys(yaml: yaml, environment: environment, baseDirectory: baseDirectory, vendors: GatewayApp.vendors)
    }
}

extension GatewayService {
    public static func services(config: GatewayConfig, logger: Logger, controls: BridgeControls? = nil) throws -> [any Service] {
        try GatewayApp.services(config: config, logger: logger, controls: controls)
    }
}

extension GatewayController {
    /// A controller with every feature (benchmarks and tests that drive one without the services).
    package convenience init(
        config: GatewayConfig, transport: any MessageTransport, logger: Logger, persistence: CacheLink? = nil,
        clock: any Clock<Duration> = ContinuousClock(), now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.init(config: config, transport: transport, logger: logger, persistence: persistence, features: GatewayApp.features(), clock: clock, now: now)
    }
}

extension TLSPinTool {
    public static func inspect(config: GatewayConfig, vendorID: String, connectTimeout: Duration = .seconds(5)) async throws(Failure) -> Report {
        try await inspect(config: config, vendors: GatewayApp.vendors, vendorID: vendorID, connectTimeout: connectTimeout)
    }

    public static func forget(config: GatewayConfig, vendorID: String) async throws(Failure) -> String? {
        try await forget(config: config, vendors: GatewayApp.vendors, vendorID: vendorID)
    }
}
