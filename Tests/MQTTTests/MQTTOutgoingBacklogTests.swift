import GatewayTesting
import MQTT
import TestTraits
import Testing

/// `outgoingBacklog` counts publishes libmosquitto holds, so telemetry can hold back before its unbounded
/// queue grows: it rises with a burst and falls back to zero once every QoS 0 and QoS 1 message went out.
@Suite("MQTTClient outgoing backlog", .integration, .timeLimit(.minutes(3)))
struct MQTTOutgoingBacklogTests {
    @Test func aBurstIsCountedUntilItIsOnTheWire() async throws {
        let broker = try await MosquittoBroker.started()
        let publisher = try await TestMQTTClient.connect(to: broker.url)
        #expect(publisher.client.outgoingBacklog == 0)
        let payload = String(repeating: "x", count: 2_000)
        var highest = 0
        for index in 0..<20_000 {
            _ = publisher.client.publish("lbs/burst/\(index % 100)", payload, qos: index.isMultiple(of: 10) ? .atLeastOnce : .atMostOnce)
            highest = max(highest, publisher.client.outgoingBacklog)
        }
        #expect(highest > 0, "40 MB handed over in a loop cannot all be on the wire at once")
        try await waitUntil("the backlog drained", timeout: .seconds(120)) { publisher.client.outgoingBacklog == 0 }
        await publisher.shutdown()
        await broker.stop()
    }
}
