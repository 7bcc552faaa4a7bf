import GatewayTesting
import MQTT
import TestTraits
import Testing

@Suite("MQTT 5 properties and MQTT 3.1.1", .integration, .timeLimit(.minutes(1)))
struct MQTTRequestResponseTests {
    @Test func responseTopicAndCorrelationDataRoundTrip() async throws {
        let broker = try await MosquittoBroker.started()
        let responder = try await TestMQTTClient.connect(to: broker.url)
        let requester = try await TestMQTTClient.connect(to: broker.url)
        try await responder.subscribe("gw/dev1/set")
        try await requester.subscribe("app/replies/42")

        let correlation: [UInt8] = [0xde, 0xad, 0x00, 0xbe, 0xef]
        try await requester.publish("gw/dev1/set", "{\"on\":true}", responseTopic: "app/replies/42",
                                    correlationData: correlation)

        let request = try await responder.waitForMessage(topic: "gw/dev1/set")
        #expect(request.responseTopic == "app/replies/42")
        #expect(request.correlationData == correlation)
        let replyTopic = try #require(request.responseTopic)
        let result = responder.client.publish(replyTopic, "{\"ok\":true}", qos: .atLeastOnce,
                                              properties: MQTTPublishProperties(correlationData: request.correlationData,
                                                                                messageExpiryInterval: 60))
        #expect(result == .sent)

        let reply = try await requester.waitForMessage(topic: "app/replies/42")
        #expect(reply.correlationData == correlation)
        #expect(reply.payloadString == "{\"ok\":true}")
        await requester.shutdown()
        await responder.shutdown()
    }

    @Test func mqtt311ModeWorksAndIgnoresProperties() async throws {
        let broker = try await MosquittoBroker.started()
        let subscriber = try await TestMQTTClient.connect(to: broker.url, protocolVersion: .v311)
        let publisher = try await TestMQTTClient.connect(to: broker.url, protocolVersion: .v311)
        try await subscriber.subscribe("v3/#")

        try await publisher.publish("v3/state", "hello", qos: .atLeastOnce, retain: true,
                                    responseTopic: "ignored", correlationData: [1])
        let message = try await subscriber.waitForMessage(topic: "v3/state")
        #expect(message.payloadString == "hello")
        #expect(message.responseTopic == nil)
        #expect(message.correlationData == nil)
        let snapshot = try await TestMQTTClient.retainedSnapshot(url: broker.url, filter: "v3/#")
        #expect(snapshot["v3/state"]?.payloadString == "hello")
        await publisher.shutdown()
        await subscriber.shutdown()
    }

    @Test func publishAndWaitGetsPubackAndTimesOutWithoutBroker() async throws {
        let broker = try await MosquittoBroker.started()
        let client = try await TestMQTTClient.connect(to: broker.url)
        try await client.client.publishAndWait("ack/state", "{\"state\":\"offline\"}", qos: .atLeastOnce, retain: true,
                                               timeout: .seconds(5))
        try await client.client.publishAndWait("ack/qos2", [1, 2, 3], qos: .exactlyOnce, timeout: .seconds(5))

        await broker.kill()
        try await waitUntil("disconnect noticed") { !client.client.isConnected }
        let timeout = await #expect(throws: MQTTError.self) {
            try await client.client.publishAndWait("ack/state", "late", qos: .atLeastOnce, timeout: .milliseconds(200))
        }
        #expect(timeout?.kind == .timeout)
        let dropped = await #expect(throws: MQTTError.self) {
            try await client.client.publishAndWait("ack/state", "qos0", qos: .atMostOnce, timeout: .seconds(1))
        }
        #expect(dropped?.kind == .notConnected)
        await client.shutdown()
    }

    @Test func shutdownIsIdempotentAndEndsStreams() async throws {
        let broker = try await MosquittoBroker.started()
        let client = try MQTTClient(configuration: MQTTConfiguration(url: broker.url,
                                                                     clientID: TestMQTTClient.uniqueClientID()))
        client.start()
        for await event in client.connectionEvents where event == .connected { break }
        await client.shutdown()
        await client.shutdown()
        #expect(!client.isConnected)
        #expect(client.publish("after/shutdown", "x", qos: .atLeastOnce) == .failed(MQTTError.shutDownForTests))
        var messages = client.messages.makeAsyncIterator()
        #expect(await messages.next() == nil)
        await #expect(throws: MQTTError.self) {
            try await client.subscribeAndWait(["a"])
        }
    }

    @Test func droppingClientsWithoutShutdownDoesNotCrash() async throws {
        let broker = try await MosquittoBroker.started()
        do {
            let neverStarted = try MQTTClient(configuration: MQTTConfiguration(url: broker.url, clientID: "never-started"))
            _ = neverStarted.isConnected
        }
        var events: AsyncStream<MQTTConnectionEvent>?
        do {
            let started = try MQTTClient(configuration: MQTTConfiguration(url: broker.url,
                                                                          clientID: TestMQTTClient.uniqueClientID()))
            started.start()
            events = started.connectionEvents
            for await event in started.connectionEvents where event == .connected { break }
        }
        // The abandoned client disconnects and finishes its streams in the background.
        var iterator = try #require(events).makeAsyncIterator()
        while await iterator.next() != nil {}
    }
}

extension MQTTError {
    static let shutDownForTests = MQTTError(kind: .shutDown, message: "the MQTT client was shut down")
}
