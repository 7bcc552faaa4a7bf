import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayTesting
import Logging
import MQTT
import ServiceLifecycle

/// A real gateway (the same services `lbs-gateway run` starts) against a real broker, in-process.
final class GatewayHarness: Sendable {
    let broker: MosquittoBroker
    let directory: TemporaryDirectory
    let config: GatewayConfig
    private let group: ServiceGroup
    private let task: Task<Void, any Error>

    static func start(
        broker existing: MosquittoBroker? = nil, directory existingDirectory: TemporaryDirectory? = nil,
        mqtt mqttExtra: String = "", homeAssistant haExtra: String = "", yaml extra: String = "",
        vendors: String = "  - {type: demo, id: demo, poll_interval: 3600}", storage: Bool = false,
        brokerURL: String? = nil
    ) async throws -> GatewayHarness {
        let broker: MosquittoBroker
        if let existing { broker = existing } else { broker = try await MosquittoBroker.started() }
        let directory = try existingDirectory ?? TemporaryDirectory()
        let yaml = """
        mqtt:
          url: \(brokerURL ?? broker.url)
          client_id: gw-\(UInt32.random(in: 0...UInt32.max))
          reconnect_min_delay: 0.1
          reconnect_max_delay: 0.5
        \(mqttExtra.isEmpty ? "" : "  " + mqttExtra)
        homeassistant:
          republish_delay: 0.2
        \(haExtra.isEmpty ? "" : "  " + haExtra)
        \(storage ? "storage: {path: \(directory.file("gateway.sqlite"))}" : "")
        \(extra.contains("http:") ? "" : "http: {enabled: false}")
        \(extra)
        vendors:
        \(vendors)
        """
        let config = try ConfigLoader.parse(yaml: yaml, baseDirectory: directory.path).get()
        var logger = Logger(label: "gateway-under-test")
        logger.logLevel = .warning
        let services = try GatewayService.services(config: config, logger: logger)
        let group = ServiceGroup(configuration: .init(services: services.map { .init(service: $0) }, logger: logger))
        let task = Task { try await group.run() }
        return GatewayHarness(broker: broker, directory: directory, config: config, group: group, task: task)
    }

    private init(broker: MosquittoBroker, directory: TemporaryDirectory, config: GatewayConfig, group: ServiceGroup, task: Task<Void, any Error>) {
        self.broker = broker
        self.directory = directory
        self.config = config
        self.group = group
        self.task = task
    }

    /// The same path as SIGTERM: graceful shutdown of the service group.
    func stop() async {
        await group.triggerGracefulShutdown()
        _ = await task.result
    }

    /// A client subscribed to `filters`, returned once the gateway announced itself online (at most 5 s): its
    /// own subscriptions are in place then, so a request the test publishes next is not lost to a gateway that
    /// is still connecting (a race a loaded machine widens).
    func observer(_ filters: String...) async throws -> TestMQTTClient {
        let client = try await TestMQTTClient.connect(to: broker.url)
        for filter in filters { try await client.subscribe(filter) }
        await waitUntilOnline()
        return client
    }

    func waitUntilOnline(timeout: Duration = .seconds(5)) async {
        let state = config.mqtt.baseTopic + "/bridge/state"
        guard let probe = try? await TestMQTTClient.connect(to: broker.url) else { return }
        try? await probe.subscribe(state)
        _ = try? await probe.waitForMessage(topic: state, timeout: timeout) { $0.payloadString.contains("\"online\"") }
        await probe.shutdown()
    }
}

/// Where `swift build` put the `lbs-gateway` executable (next to the test bundle).
enum Binaries {
    static var gateway: String? {
        let candidates = [
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("lbs-gateway").path,
            (Fixtures.packageRoot() ?? ".") + "/.build/debug/lbs-gateway",
        ]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }
}

extension MQTTMessage {
    var json: [String: Any]? { (try? JSONSerialization.jsonObject(with: Data(payload))) as? [String: Any] }
    var text: String { String(decoding: payload, as: UTF8.self) }
}
