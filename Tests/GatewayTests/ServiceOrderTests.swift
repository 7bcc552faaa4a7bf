import Foundation
@testable import FeatureStatusPage
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayTesting
import Logging
import Testing

/// Shutdown drains in a known order: the group stops its services in reverse start order. The HTTP listener (a
/// feature's service) stops after the vendors and before the core.
@Suite struct ServiceOrderTests {
    @Test func cacheFirstThenCoreThenVendorsSoVendorsStopFirstAndTheCacheLast() throws {
        let directory = try TemporaryDirectory()
        let yaml = "mqtt: {url: mqtt://127.0.0.1:1}\nstorage: {path: \(directory.file("g.sqlite"))}\nvendors: [{type: demo, id: demo}]\n"
        let config = try ConfigLoader.parse(yaml: yaml).get()
        let services = try GatewayService.services(config: config, logger: Logger(label: "test"))
        #expect(services.map { String(describing: type(of: $0)) } == ["CacheService", "GatewayService", "HTTPListenerService", "VendorSupervisor"])

        let withoutCache = try ConfigLoader.parse(yaml: "mqtt: {url: mqtt://127.0.0.1:1}\nhttp: {enabled: false}\nvendors: [{type: demo, id: demo}]\n").get()
        let fewer = try GatewayService.services(config: withoutCache, logger: Logger(label: "test"))
        #expect(fewer.map { String(describing: type(of: $0)) } == ["GatewayService", "VendorSupervisor"])
    }

    /// ServiceGroup names each service with `"\(service)"`: a service without a description is reflected field by
    /// field (the whole config for the gateway service), which cost ~90 M instructions of a cold start.
    @Test func everyServiceNamesItselfWithoutReflection() throws {
        let directory = try TemporaryDirectory()
        let yaml = "mqtt: {url: mqtt://127.0.0.1:1}\nstorage: {path: \(directory.file("g.sqlite"))}\nvendors: [{type: demo, id: demo}]\n"
        let config = try ConfigLoader.parse(yaml: yaml).get()
        let services = try GatewayService.services(config: config, logger: Logger(label: "test"))
        for service in services {
            #expect("\(service)" == String(describing: type(of: service)))
        }
    }
}
