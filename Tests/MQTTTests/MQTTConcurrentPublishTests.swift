import GatewayTesting
import MQTT
import TestTraits
import Testing

/// Publishes from several threads at once on a connection that also receives, and a publish larger than the
/// socket takes at once: whole messages, each publisher's order.
@Suite("MQTTClient under concurrent and large publishes", .integration, .timeLimit(.minutes(2)))
struct MQTTConcurrentPublishTests {
    /// 8 MB cannot go into the socket at once: the network thread writes it over several turns.
    @Test func aPublishLargerThanTheSocketTakesArrivesWhole() async throws {
        let broker = try await MosquittoBroker.started()
        let publisher = try await TestMQTTClient.connect(to: broker.url)
        let subscriber = try await TestMQTTClient.connect(to: broker.url)
        try await subscriber.subscribe("lbs/big/#")
        for qos in [MQTTQoS.atMostOnce, .atLeastOnce] {
            let payload = (0..<8_000_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(qos.rawValue)) }
            _ = publisher.client.publish("lbs/big/\(qos.rawValue)", payload, qos: qos)
            let message = try await subscriber.waitForMessage(topic: "lbs/big/\(qos.rawValue)", timeout: .seconds(30))
            #expect(message.payload.count == payload.count)
            #expect(message.payload == payload)
        }
        try await waitUntil("the backlog drained", timeout: .seconds(30)) { publisher.client.outgoingBacklog == 0 }
        await publisher.shutdown()
        await subscriber.shutdown()
        await broker.stop()
    }

    /// Four tasks publish at once, with pauses and in bursts, on a connection that receives a flood at the same
    /// time (its PUBACKs written by the network thread between the publishers' messages): every
    /// message arrives once, each task's in its order, and the flood is read whole. All QoS 1: QoS 0 may be
    /// dropped by a busy broker, and QoS 1 waits its turn in the in-flight window where QoS 0 would not.
    @Test func concurrentPublishersOnAReceivingConnectionKeepEachOnesOrder() async throws {
        // mosquitto drops QoS 1 messages for a client more than `max_queued_messages` (default 1,000) behind; a
        // subscriber on a loaded machine can be, and a drop is not what this test is about.
        let broker = try await MosquittoBroker.started(extraConfiguration: "max_queued_messages 0")
        let subscriber = try await TestMQTTClient.connect(to: broker.url)
        try await subscriber.subscribe("lbs/order/#")
        let busy = try await TestMQTTClient.connect(to: broker.url)
        try await busy.subscribe("lbs/flood/#")
        let flooder = try await TestMQTTClient.connect(to: broker.url)
        let perTask = 1_500
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for index in 0..<3_000 { _ = flooder.client.publish("lbs/flood/\(index % 7)", "\(index)", qos: .atLeastOnce) }
            }
            for task in 0..<4 {
                group.addTask {
                    for index in 0..<perTask {
                        _ = busy.client.publish("lbs/order/\(task)", "\(index)", qos: .atLeastOnce)
                        // Every 100th message after a pause: an isolated publish, written by this thread.
                        if index.isMultiple(of: 100) { try? await Task.sleep(for: .milliseconds(2)) }
                    }
                }
            }
        }
        // Not `try`: on a timeout the expectations below say which task lost what.
        try? await waitUntil("every message arrived", timeout: .seconds(45)) {
            subscriber.received.filter { $0.topic.hasPrefix("lbs/order/") }.count >= 4 * perTask
        }
        #expect(subscriber.client.droppedInboundMessages == 0 && busy.client.droppedInboundMessages == 0)
        for task in 0..<4 {
            let values = subscriber.messages(on: "lbs/order/\(task)").map { Int($0.payloadString) ?? -1 }
            let firstOutOfOrder = values.indices.first { values[$0] != $0 }
            #expect(values.count == perTask && firstOutOfOrder == nil,
                    "task \(task): \(values.count) of \(perTask) messages, first out of order at \(String(describing: firstOutOfOrder))")
        }
        try? await waitUntil("the flood was read", timeout: .seconds(30)) { busy.received.count >= 3_000 }
        #expect(busy.received.count == 3_000, "\(busy.received.count) of 3,000 flood messages read")
        await busy.shutdown()
        await flooder.shutdown()
        await subscriber.shutdown()
        await broker.stop()
    }
}
