import GatewayTesting
import MQTT
import TestTraits
import Testing

@Suite("MQTTClient bursts (coalescingWrites) against a real mosquitto broker", .integration, .timeLimit(.minutes(1)))
struct MQTTBurstTests {
    /// 200 small publishes made at once, with the gateway's work per state between them, leave as a handful of TCP
    /// segments, complete and in order. Without the burst, nearly each is a segment of its own (Nagle is off): the
    /// network thread writes every packet as it comes (measured: ~160 of 200 spaced like this, 2-13 with the burst).
    @Test func aBurstLeavesAsFewSegmentsCompleteAndInOrder() async throws {
        let broker = try await MosquittoBroker.started()
        let subscriber = try await TestMQTTClient.connect(to: broker.url)
        let publisher = try await TestMQTTClient.connect(to: broker.url)
        try await subscriber.subscribe("lbs/burst/#", qos: .atMostOnce)
        let before = try #require(publisher.client.segmentsSent)

        publisher.client.coalescingWrites {
            for index in 0..<200 {
                publisher.client.publish("lbs/burst/\(index % 10)", "\(index)", qos: .atMostOnce)
                // What the gateway does per state (the whole burst stays well within `SocketCork.longestWait`).
                let workDone = ContinuousClock.now + .microseconds(20)
                while ContinuousClock.now < workDone {}
            }
        }
        try await waitUntil("all 200 received", timeout: .seconds(10)) { subscriber.received.count >= 200 }

        #expect(subscriber.received.map(\.payloadString) == (0..<200).map { "\($0)" })
        let segments = try #require(publisher.client.segmentsSent) - before
        #expect(segments < 60, "200 publishes took \(segments) segments")
        await publisher.shutdown()
        await subscriber.shutdown()
        await broker.stop()
    }

    /// What is published after a burst (from another thread, or alone) still leaves at once: a QoS 1 publish is
    /// acknowledged, and the socket holds nothing back.
    @Test func aPublishAfterABurstIsNotHeldBack() async throws {
        let broker = try await MosquittoBroker.started()
        let subscriber = try await TestMQTTClient.connect(to: broker.url)
        let publisher = try await TestMQTTClient.connect(to: broker.url)
        try await subscriber.subscribe("lbs/burst/#", qos: .atLeastOnce)

        publisher.client.coalescingWrites {
            for index in 0..<50 { publisher.client.publish("lbs/burst/a", "\(index)", qos: .atMostOnce) }
        }
        try await publisher.client.publishAndWait("lbs/burst/b", Array("after".utf8), qos: .atLeastOnce, timeout: .seconds(5))
        let message = try await subscriber.waitForMessage(topic: "lbs/burst/b")
        #expect(message.payloadString == "after")
        #expect(subscriber.messages(on: "lbs/burst/a").count == 50)
        await publisher.shutdown()
        await subscriber.shutdown()
        await broker.stop()
    }
}
