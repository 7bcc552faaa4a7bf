import GatewayTesting
@testable import MQTT
import TestTraits
import Testing

@Suite("QoS 0 publishes the client encodes itself (DirectPublishes)")
struct DirectPublishEncodingTests {
    private func encoded(topic: String, payload: [UInt8], retain: Bool, isV5: Bool) -> [UInt8] {
        var buffer = DirectPublishes()
        Array(topic.utf8).withUnsafeBytes { topicBytes in
            payload.withUnsafeBytes { buffer.append(topic: topicBytes, payload: $0, retain: retain, isV5: isV5) }
        }
        return buffer.bytes
    }

    /// MQTT 5 §3.3: fixed header 0x30 (| 0x01 retained), remaining length, topic with its 16-bit length, property
    /// length 0, payload. MQTT 3.1.1 has no property length.
    @Test func encodesPublishPacketsAsTheSpecificationSays() {
        #expect(encoded(topic: "a/b", payload: Array("hi".utf8), retain: false, isV5: true)
            == [0x30, 8, 0, 3, 0x61, 0x2F, 0x62, 0, 0x68, 0x69])
        #expect(encoded(topic: "a/b", payload: Array("hi".utf8), retain: true, isV5: false)
            == [0x31, 7, 0, 3, 0x61, 0x2F, 0x62, 0x68, 0x69])
        #expect(encoded(topic: "t", payload: [], retain: false, isV5: true) == [0x30, 4, 0, 1, 0x74, 0])
    }

    /// The remaining length is a variable-length integer: 127 fits one byte, 128 takes two (0x80 0x01).
    @Test func remainingLengthsCrossTheirByteBoundaries() {
        let one = encoded(topic: "t", payload: [UInt8](repeating: 7, count: 123), retain: false, isV5: true)
        #expect(Array(one.prefix(2)) == [0x30, 127])
        #expect(one.count == 2 + 127)
        let two = encoded(topic: "t", payload: [UInt8](repeating: 7, count: 124), retain: false, isV5: true)
        #expect(Array(two.prefix(3)) == [0x30, 0x80, 0x01])
        #expect(two.count == 3 + 128)
        #expect(DirectPublishes.packetSize(topicCount: 1, payloadCount: 124, isV5: true) == 131)
        #expect(DirectPublishes.packetSize(topicCount: 1, payloadCount: DirectPublishes.largestPacket, isV5: true) == nil)
    }
}

@Suite("Direct QoS 0 publishes against a real mosquitto broker", .integration, .timeLimit(.minutes(1)))
struct MQTTDirectPublishTests {
    /// A burst of QoS 0 messages goes the direct way (all but the one that wakes the network thread, give or take a
    /// few), and arrives complete, in order, with its retained flags kept.
    @Test func aQoS0BurstIsSentDirectlyCompleteAndInOrder() async throws {
        let broker = try await MosquittoBroker.started()
        let subscriber = try await TestMQTTClient.connect(to: broker.url)
        let publisher = try await TestMQTTClient.connect(to: broker.url)
        try await subscriber.subscribe("lbs/direct/#", qos: .atMostOnce)

        publisher.client.coalescingWrites {
            for number in 0..<200 {
                publisher.client.publish("lbs/direct/\(number % 7)", "\(number)", qos: .atMostOnce, retain: number % 2 == 0)
            }
        }
        try await waitUntil("all 200 received", timeout: .seconds(10)) { subscriber.received.count >= 200 }

        #expect(subscriber.received.map(\.payloadString) == (0..<200).map { "\($0)" })
        #expect(publisher.client.directlySent >= 100, "only \(publisher.client.directlySent) of 200 sent directly")
        try await waitUntil("nothing left to send", timeout: .seconds(5)) { publisher.client.outgoingBacklog == 0 }
        // The broker kept the retained ones as retained: the last even number per topic.
        let retained = try await TestMQTTClient.retainedSnapshot(url: broker.url, filter: "lbs/direct/#")
        let expected = Dictionary((0..<200).filter { $0 % 2 == 0 }.map { ("lbs/direct/\($0 % 7)", "\($0)") },
                                  uniquingKeysWith: { $1 })
        #expect(retained.mapValues(\.payloadString) == expected)
        await publisher.shutdown()
        await subscriber.shutdown()
        await broker.stop()
    }

    /// QoS 1 messages and subscriptions go through libmosquitto; the direct messages waiting when
    /// they come go first, so nothing overtakes an older message. (Fewer QoS 1 messages than mosquitto's receive
    /// maximum of 20: beyond it libmosquitto holds QoS 1 back while QoS 0 goes on, with or without this path.)
    @Test func whatGoesThroughLibmosquittoKeepsItsPlaceAmongDirectMessages() async throws {
        let broker = try await MosquittoBroker.started()
        let subscriber = try await TestMQTTClient.connect(to: broker.url)
        let publisher = try await TestMQTTClient.connect(to: broker.url)
        try await subscriber.subscribe("lbs/mixed/#", qos: .atMostOnce)

        let count = 600
        for round in 0..<3 {
            publisher.client.coalescingWrites {
                for index in 0..<200 {
                    let number = round * 200 + index
                    let qos: MQTTQoS = number % 60 == 5 ? .atLeastOnce : .atMostOnce
                    publisher.client.publish("lbs/mixed/\(number % 7)", "\(number)", qos: qos, retain: number % 2 == 0)
                    if number % 150 == 75 { try? publisher.client.subscribe(["lbs/elsewhere/\(number)"], qos: .atMostOnce) }
                }
            }
        }
        try await waitUntil("all \(count) received", timeout: .seconds(10)) { subscriber.received.count >= count }
        #expect(subscriber.received.map(\.payloadString) == (0..<count).map { "\($0)" })
        #expect(publisher.client.directlySent > 0)
        await publisher.shutdown()
        await subscriber.shutdown()
        await broker.stop()
    }

    /// A packet over the broker's maximum size (from its CONNACK) is refused by the client, as libmosquitto refuses
    /// it, instead of being sent directly and costing the connection. (Retain Available is obeyed the same way;
    /// mosquitto 2.0 keeps accepting retained messages when it says 0, so this broker cannot show it.)
    @Test func theBrokersLimitsHoldForDirectPublishes() async throws {
        let broker = try await MosquittoBroker.started(extraConfiguration: "max_packet_size 300\n")
        let subscriber = try await TestMQTTClient.connect(to: broker.url)
        let publisher = try await TestMQTTClient.connect(to: broker.url)
        try await subscriber.subscribe("lbs/limits/#", qos: .atLeastOnce)

        var results: [MQTTPublishResult] = []
        publisher.client.coalescingWrites {
            results.append(publisher.client.publish("lbs/limits/first", "wakes the network thread", qos: .atMostOnce))
            results.append(publisher.client.publish("lbs/limits/large", String(repeating: "x", count: 400), qos: .atMostOnce))
            results.append(publisher.client.publish("lbs/limits/small", "fits", qos: .atMostOnce))
        }
        #expect(results[0] == .sent)
        #expect(results[2] == .sent)
        if case .failed = results[1] {} else { Issue.record("publish over the broker's maximum packet size: \(results[1])") }
        try await publisher.client.publishAndWait("lbs/limits/after", Array("still connected".utf8), qos: .atLeastOnce,
                                                  timeout: .seconds(5))
        _ = try await subscriber.waitForMessage(topic: "lbs/limits/after")
        #expect(subscriber.received.map(\.topic) == ["lbs/limits/first", "lbs/limits/small", "lbs/limits/after"])
        #expect(publisher.connectCount == 1)
        await publisher.shutdown()
        await subscriber.shutdown()
        await broker.stop()
    }
}
