import MQTT
import Synchronization

/// A convenience MQTT client for tests: connects, remembers subscriptions (re-subscribing after a
/// reconnect), records every message and lets tests wait for one with a deadline.
public final class TestMQTTClient: Sendable {
    /// The underlying client.
    public let client: MQTTClient
    private let recorder = Recorder()

    /// Shared with the consuming tasks, which must not keep the client itself alive.
    private final class Recorder: Sendable {
        struct State {
            var received: [MQTTMessage] = []
            var events: [MQTTConnectionEvent] = []
            var connects = 0
            var filters: [String: MQTTQoS] = [:]
        }

        let state = Mutex(State())
    }

    private init(client: MQTTClient) {
        self.client = client
    }

    /// A unique client id for tests running in parallel.
    public static func uniqueClientID(_ prefix: String = "test") -> String {
        "\(prefix)-\(UInt32.random(in: .min ... .max))-\(UInt32.random(in: .min ... .max))"
    }

    /// Connects to `url` and waits for the first CONNACK; `configure` may adjust the configuration.
    public static func connect(to url: String, clientID: String = uniqueClientID(),
                               protocolVersion: MQTTProtocolVersion = .v5, timeout: Duration = .seconds(5),
                               configure: (inout MQTTConfiguration) -> Void = { _ in }) async throws -> TestMQTTClient {
        var configuration = try MQTTConfiguration(url: url, clientID: clientID)
        configuration.protocolVersion = protocolVersion
        configuration.reconnect = MQTTReconnectPolicy(minDelay: .milliseconds(50), maxDelay: .milliseconds(500))
        configuration.inboundBufferSize = 100_000
        configure(&configuration)
        let testClient = TestMQTTClient(client: try MQTTClient(configuration: configuration))
        testClient.startConsuming()
        testClient.client.start()
        try await testClient.waitForConnects(1, timeout: timeout)
        return testClient
    }

    private func startConsuming() {
        let messages = client.messages
        let events = client.connectionEvents
        let recorder = self.recorder
        Task {
            for await message in messages {
                recorder.state.withLock { $0.received.append(message) }
            }
        }
        Task { [weak client] in
            for await event in events {
                let filters: [String: MQTTQoS] = recorder.state.withLock { state in
                    state.events.append(event)
                    guard case .connected = event else { return [:] }
                    state.connects += 1
                    return state.connects > 1 ? state.filters : [:]
                }
                for (filter, qos) in filters { try? client?.subscribe([filter], qos: qos) }
            }
        }
    }

    /// Subscribes, waits for SUBACK and re-subscribes after every reconnect.
    public func subscribe(_ filter: String, qos: MQTTQoS = .atLeastOnce, timeout: Duration = .seconds(5)) async throws {
        recorder.state.withLock { $0.filters[filter] = qos }
        try await client.subscribeAndWait([filter], qos: qos, timeout: timeout)
    }

    /// Publishes; QoS 1/2 waits for the broker's acknowledgement.
    public func publish(_ topic: String, _ payload: [UInt8], qos: MQTTQoS = .atLeastOnce, retain: Bool = false,
                        responseTopic: String? = nil, correlationData: [UInt8]? = nil,
                        timeout: Duration = .seconds(5)) async throws {
        let properties = MQTTPublishProperties(responseTopic: responseTopic, correlationData: correlationData)
        if qos == .atMostOnce {
            let result = client.publish(topic, payload, qos: qos, retain: retain, properties: properties)
            guard result == .sent else { throw TestSupportError("QoS 0 publish to \(topic): \(result)") }
        } else {
            try await client.publishAndWait(topic, payload, qos: qos, retain: retain, properties: properties,
                                            timeout: timeout)
        }
    }

    /// Publishes a UTF-8 payload; see the `[UInt8]` variant.
    public func publish(_ topic: String, _ payload: String, qos: MQTTQoS = .atLeastOnce, retain: Bool = false,
                        responseTopic: String? = nil, correlationData: [UInt8]? = nil,
                        timeout: Duration = .seconds(5)) async throws {
        try await publish(topic, Array(payload.utf8), qos: qos, retain: retain, responseTopic: responseTopic,
                          correlationData: correlationData, timeout: timeout)
    }

    /// Every message received so far, in arrival order.
    public var received: [MQTTMessage] { recorder.state.withLock { $0.received } }

    /// Every connection event seen so far.
    public var connectionEvents: [MQTTConnectionEvent] { recorder.state.withLock { $0.events } }

    /// Number of `.connected` events seen so far.
    public var connectCount: Int { recorder.state.withLock { $0.connects } }

    /// Messages received on exactly `topic`.
    public func messages(on topic: String) -> [MQTTMessage] { received.filter { $0.topic == topic } }

    /// The first received message (on `topic`, if given) matching `predicate`, waiting up to `timeout`.
    @discardableResult
    public func waitForMessage(topic: String? = nil, timeout: Duration = .seconds(5),
                               where predicate: @Sendable (MQTTMessage) -> Bool = { _ in true }) async throws -> MQTTMessage {
        var found: MQTTMessage?
        try await waitUntil("message on \(topic ?? "any topic")", timeout: timeout) {
            found = received.first { (topic == nil || $0.topic == topic) && predicate($0) }
            return found != nil
        }
        guard let found else { throw TestTimeoutError("message on \(topic ?? "any topic")") }
        return found
    }

    /// Waits until at least `count` `.connected` events were seen.
    public func waitForConnects(_ count: Int, timeout: Duration = .seconds(10)) async throws {
        try await waitUntil("\(count) connect(s); events: \(connectionEvents)", timeout: timeout) { connectCount >= count }
    }

    /// Disconnects cleanly and stops the client.
    public func shutdown() async {
        await client.shutdown()
    }

    /// The retained messages matching `filter`, collected by a fresh client. A marker message published
    /// after subscribing arrives after all retained ones, so no quiet-period guess is needed.
    public static func retainedSnapshot(url: String, filter: String,
                                        timeout: Duration = .seconds(5)) async throws -> [String: MQTTMessage] {
        let reader = try await connect(to: url, clientID: uniqueClientID("snapshot"), timeout: timeout)
        let marker = "lbs-test/snapshot-marker/\(reader.client.configuration.clientID)"
        do {
            try await reader.subscribe(filter, timeout: timeout)
            try await reader.subscribe(marker, timeout: timeout)
            try await reader.publish(marker, "end", qos: .atLeastOnce, timeout: timeout)
            try await reader.waitForMessage(topic: marker, timeout: timeout)
        } catch {
            await reader.shutdown()
            throw error
        }
        await reader.shutdown()
        var snapshot: [String: MQTTMessage] = [:]
        for message in reader.received where message.retain && message.topic != marker {
            snapshot[message.topic] = message
        }
        return snapshot
    }
}
