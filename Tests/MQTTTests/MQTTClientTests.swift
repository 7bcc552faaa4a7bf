import GatewayTesting
import MQTT
import TestTraits
import Testing

@Suite("MQTTClient against a real mosquitto broker", .integration, .timeLimit(.minutes(1)))
struct MQTTClientTests {
    @Test func publishSubscribeRoundTrip() async throws {
        let broker = try await MosquittoBroker.started()
        let subscriber = try await TestMQTTClient.connect(to: broker.url)
        let publisher = try await TestMQTTClient.connect(to: broker.url)
        try await subscriber.subscribe("lbs/test/+/state")

        #expect(publisher.client.isConnected)
        #expect(publisher.client.publish("lbs/test/a/state", "{\"on\":true}", qos: .atMostOnce) == .sent)
        try await publisher.publish("lbs/test/b/state", [0, 1, 2, 255], qos: .atLeastOnce)

        let text = try await subscriber.waitForMessage(topic: "lbs/test/a/state")
        #expect(text.payloadString == "{\"on\":true}")
        #expect(text.retain == false)
        let binary = try await subscriber.waitForMessage(topic: "lbs/test/b/state")
        #expect(binary.payload == [0, 1, 2, 255])
        #expect(binary.qos == .atLeastOnce)

        await publisher.shutdown()
        await subscriber.shutdown()
        await broker.stop()
    }

    @Test func retainedMessageReachesLateSubscriber() async throws {
        let broker = try await MosquittoBroker.started()
        let publisher = try await TestMQTTClient.connect(to: broker.url)
        try await publisher.publish("lbs/bridge/state", "{\"state\":\"online\"}", qos: .atLeastOnce, retain: true)
        try await publisher.publish("lbs/other", "not retained", qos: .atLeastOnce)

        let snapshot = try await TestMQTTClient.retainedSnapshot(url: broker.url, filter: "lbs/#")
        #expect(snapshot.keys.sorted() == ["lbs/bridge/state"])
        #expect(snapshot["lbs/bridge/state"]?.payloadString == "{\"state\":\"online\"}")
        #expect(snapshot["lbs/bridge/state"]?.retain == true)
        await publisher.shutdown()
    }
}
