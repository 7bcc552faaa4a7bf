import Foundation
import GatewayTesting
@testable import MQTT
import Synchronization
import TestTraits
import Testing

@Suite("MQTT offline queue (unit)", .integration)
struct OfflineQueueUnitTests {
    private func message(_ topic: String, _ payload: String, qos: MQTTQoS = .atLeastOnce, retain: Bool = false,
                         token: UInt64? = nil) -> OfflineMessage {
        OfflineMessage(topic: topic, payload: Array(payload.utf8), qos: qos, retain: retain, properties: .init(),
                       token: token)
    }

    private func contents(_ messages: [OfflineMessage]) -> [String] {
        messages.map { "\($0.topic)=\(String(decoding: $0.payload, as: UTF8.self))" }
    }

    @Test func retainedMessagesAreCoalescedPerTopicAndTakeTheNewestPlace() {
        var queue = OfflineQueue(limit: 10)
        _ = queue.enqueue(message("state/a", "1", retain: true, token: 1))
        _ = queue.enqueue(message("event", "e1"))
        _ = queue.enqueue(message("state/b", "1", retain: true))
        let displaced = queue.enqueue(message("state/a", "2", retain: true))
        #expect(displaced.replaced?.token == 1)
        #expect(displaced.dropped.isEmpty)
        // An empty retained payload is a value (it clears the retained message), not "nothing".
        _ = queue.enqueue(message("state/b", "", retain: true))
        _ = queue.enqueue(message("event", "e2"))
        #expect(queue.count == 4)
        #expect(contents(queue.drain()) == ["event=e1", "state/a=2", "state/b=", "event=e2"])
        #expect(queue.isEmpty)
    }

    @Test func nonRetainedMessagesStayInOrderAndTheOldestIsDroppedWhenFull() {
        var queue = OfflineQueue(limit: 3)
        var dropped: [OfflineMessage] = []
        for index in 1...5 {
            dropped += queue.enqueue(message("cmd", "\(index)", token: UInt64(index))).dropped
        }
        #expect(dropped.map(\.token) == [1, 2])
        #expect(queue.count == 3)
        #expect(contents(queue.drain()) == ["cmd=3", "cmd=4", "cmd=5"])
    }

    @Test func aFullQueueDropsTheOldestMessageOfAnyKindAndForgetsItsRetainedSlot() {
        var queue = OfflineQueue(limit: 2)
        _ = queue.enqueue(message("state/a", "1", retain: true))
        _ = queue.enqueue(message("cmd", "x"))
        #expect(contents(queue.enqueue(message("state/b", "1", retain: true)).dropped) == ["state/a=1"])
        // state/a is no longer queued, so a new value is an addition, not a replacement.
        let displaced = queue.enqueue(message("state/a", "2", retain: true))
        #expect(displaced.replaced == nil)
        #expect(contents(displaced.dropped) == ["cmd=x"])
        #expect(contents(queue.drain()) == ["state/b=1", "state/a=2"])
    }

    @Test func manyReplacementsKeepTheQueueCompactAndCorrect() {
        var queue = OfflineQueue(limit: 50)
        for round in 0..<1_000 {
            _ = queue.enqueue(message("state/\(round % 20)", "\(round)", retain: true))
        }
        #expect(queue.count == 20)
        let drained = queue.drain()
        #expect(contents(drained) == (980..<1_000).map { "state/\($0 % 20)=\($0)" })
    }

    @Test func limitZeroKeepsNothing() {
        var queue = OfflineQueue(limit: 0)
        #expect(queue.enqueue(message("state/a", "1", retain: true)).dropped.count == 1)
        #expect(queue.isEmpty)
    }
}

private final class StopFlag: Sendable {
    let value = Atomic<Bool>(false)
    let started = Atomic<Int>(0)
}

private final class EventLog: Sendable {
    let entries = Mutex<[MQTTConnectionEvent]>([])
}

/// Fast reconnects so outages end quickly in tests.
private let fastReconnect = MQTTReconnectPolicy(minDelay: .milliseconds(20), maxDelay: .milliseconds(100))

@Suite("MQTT offline queue and CONNECT ordering", .integration, .timeLimit(.minutes(2)))
struct MQTTConnectOrderingTests {
    /// Publishes racing with connect must never reach the socket before CONNECT.
    @Test func nothingIsWrittenBeforeConnectWhilePublishersRaceTheConnect() async throws {
        let listener = try FirstPacketListener()
        var configuration = try MQTTConfiguration(url: listener.url, clientID: TestMQTTClient.uniqueClientID("race"))
        configuration.reconnect = MQTTReconnectPolicy(minDelay: .milliseconds(5), maxDelay: .milliseconds(10))
        configuration.offlineQueueLimit = 100
        let client = try MQTTClient(configuration: configuration)
        let stop = StopFlag()
        // Publishers in tight loops on their own threads (not the cooperative pool) from before start():
        // retained state, QoS 1 events and QoS 0 events.
        let running = StopFlag()
        for worker in 0..<2 {
            running.started.add(1, ordering: .relaxed)
            Thread.detachNewThread {
                var index = 0
                while !stop.value.load(ordering: .relaxed) {
                    index += 1
                    client.publish("lbs/device/d\(index % 50)", "{\"n\":\(index)}", qos: .atLeastOnce, retain: true)
                    client.publish("lbs/bridge/event", "e\(worker)-\(index)", qos: .atLeastOnce)
                    client.publish("lbs/bridge/noise", "n\(index)", qos: .atMostOnce)
                }
                running.started.subtract(1, ordering: .relaxed)
            }
        }
        client.start()
        try await waitUntil("40 connection attempts (\(listener.firstBytes.count) so far)", timeout: .seconds(60)) {
            listener.firstBytes.count >= 40
        }
        stop.value.store(true, ordering: .relaxed)
        try await waitUntil("publisher threads ended") { running.started.load(ordering: .relaxed) == 0 }
        let firstBytes = listener.firstBytes
        let notConnect = firstBytes.filter { $0 != 0x10 }
        #expect(notConnect.isEmpty, "first packets that were not CONNECT: \(notConnect.map { String($0, radix: 16) })")
        // Never connected: the queue holds at most its bound, everything beyond it was dropped and counted.
        #expect(client.offlineQueueDepth <= 100)
        #expect(client.droppedOfflineMessages > 0)
        #expect(!client.isConnected)
        await client.shutdown()
        listener.stop()
    }

    /// The same against a real mosquitto (the `mosquitto -v` check of the issue): reconnects while publishers
    /// race them never make the broker log a protocol error.
    @Test func aRealBrokerSeesNoProtocolErrorAcrossReconnectsWhilePublishersRace() async throws {
        let broker = try await MosquittoBroker.started()
        let proxy = try TCPProxy(upstreamPort: broker.port)
        let client = try await TestMQTTClient.connect(to: proxy.url) {
            $0.reconnect = MQTTReconnectPolicy(minDelay: .milliseconds(5), maxDelay: .milliseconds(20))
        }
        let stop = StopFlag()
        let running = StopFlag()
        for worker in 0..<2 {
            running.started.add(1, ordering: .relaxed)
            let mqtt = client.client
            Thread.detachNewThread {
                var index = 0
                while !stop.value.load(ordering: .relaxed) {
                    index += 1
                    mqtt.publish("race/state/d\(index % 50)", "{\"n\":\(index)}", qos: .atLeastOnce, retain: true)
                    mqtt.publish("race/event", "e\(worker)-\(index)", qos: .atMostOnce)
                    if index % 64 == 0 { usleep(100) }  // leave the broker some CPU on two cores
                }
                running.started.subtract(1, ordering: .relaxed)
            }
        }
        for round in 1...20 {
            try await waitUntil("connected before drop \(round)", timeout: .seconds(20)) { client.client.isConnected }
            proxy.dropConnections()
            try await client.waitForConnects(round + 1, timeout: .seconds(20))
        }
        stop.value.store(true, ordering: .relaxed)
        try await waitUntil("publisher threads ended") { running.started.load(ordering: .relaxed) == 0 }
        await client.shutdown()
        #expect(!broker.log().contains("protocol error"), "\(broker.log().split(separator: "\n").filter { $0.contains("protocol error") }.prefix(3))")
    }

    /// Messages published while the broker is unreachable arrive after it comes back: retained state coalesced
    /// per topic, QoS 1 events in order, QoS 0 events dropped and counted; all before `.connected` is announced.
    @Test func messagesPublishedWhileOfflineArriveAfterReconnectCoalescedAndInOrder() async throws {
        let broker = try await MosquittoBroker.started()
        let observer = try await TestMQTTClient.connect(to: broker.url)
        try await observer.subscribe("oq/#")
        let proxy = try TCPProxy(upstreamPort: broker.port)
        var configuration = try MQTTConfiguration(url: proxy.url, clientID: TestMQTTClient.uniqueClientID("oq"))
        configuration.reconnect = fastReconnect
        let client = try MQTTClient(configuration: configuration)
        let events = EventLog()
        let watcher = Task {
            var connects = 0
            for await event in client.connectionEvents {
                events.entries.withLock { $0.append(event) }
                if event == .connected {
                    connects += 1
                    // What the gateway does on `.connected`: its own full republish, after the queue.
                    if connects == 2 { client.publish("oq/marker", "after connected", qos: .atLeastOnce) }
                }
            }
        }
        client.start()
        try await waitUntil("first connect") { client.isConnected }

        // The broker becomes unreachable.
        proxy.setAccepting(false)
        proxy.dropConnections()
        try await waitUntil("disconnect noticed") { !client.isConnected }

        #expect(client.publish("oq/state", "v1", qos: .atLeastOnce, retain: true) == .queued)
        #expect(client.publish("oq/event", "e1", qos: .atLeastOnce) == .queued)
        #expect(client.publish("oq/state", "v2", qos: .atLeastOnce, retain: true) == .queued)
        #expect(client.publish("oq/noise", "lost", qos: .atMostOnce) == .droppedNotConnected)
        #expect(client.publish("oq/event", "e2", qos: .atLeastOnce) == .queued)
        #expect(client.publish("oq/state", "v3", qos: .atMostOnce, retain: true) == .queued)
        #expect(client.publish("oq/cleared", "", qos: .atLeastOnce, retain: true) == .queued)
        #expect(client.offlineQueueDepth == 4)
        #expect(client.droppedOfflineMessages == 1)
        // A waiter on a queued message is answered only by the broker's PUBACK after the reconnect.
        async let acknowledged: Void = client.publishAndWait("oq/event", "e3", qos: .atLeastOnce, timeout: .seconds(30))
        // The child task publishes concurrently: let it reach the queue before the broker comes back.
        try await waitUntil("e3 queued") { client.offlineQueueDepth == 5 }

        proxy.setAccepting(true)
        try await acknowledged
        let received = try await waitForTopics(observer, count: 6)
        #expect(received == ["oq/event=e1", "oq/event=e2", "oq/state=v3", "oq/cleared=", "oq/event=e3",
                             "oq/marker=after connected"])
        #expect(client.offlineQueueDepth == 0)
        let snapshot = try await TestMQTTClient.retainedSnapshot(url: broker.url, filter: "oq/#")
        #expect(snapshot["oq/state"]?.payloadString == "v3")
        #expect(snapshot["oq/cleared"] == nil)
        #expect(events.entries.withLock { $0.filter { $0 == .connected }.count } == 2)
        await client.shutdown()
        watcher.cancel()
        await observer.shutdown()
    }

    /// The observer's `oq/*` messages as `topic=payload`, once `count` have arrived (plus a short settle check).
    private func waitForTopics(_ observer: TestMQTTClient, count: Int) async throws -> [String] {
        func current() -> [String] {
            observer.received.filter { $0.topic.hasPrefix("oq/") }.map { "\($0.topic)=\($0.payloadString)" }
        }
        try await waitUntil("\(count) messages: \(current())", timeout: .seconds(20)) { current().count >= count }
        return current()
    }

    @Test func aWaiterOnAReplacedRetainedMessageFailsAndATimeoutLeavesTheMessageQueued() async throws {
        let listener = try FirstPacketListener()  // never answers: the client stays offline
        var configuration = try MQTTConfiguration(url: listener.url, clientID: TestMQTTClient.uniqueClientID("oqw"))
        configuration.reconnect = fastReconnect
        let client = try MQTTClient(configuration: configuration)
        client.start()

        async let replaced: Void = client.publishAndWait("w/state", "old", qos: .atLeastOnce, retain: true,
                                                         timeout: .seconds(20))
        try await waitUntil("old value queued") { client.offlineQueueDepth == 1 }
        client.publish("w/state", "new", qos: .atLeastOnce, retain: true)
        do {
            try await replaced
            Issue.record("a replaced message must not count as acknowledged")
        } catch {
            #expect((error as? MQTTError)?.kind == .dropped, "\(error)")
        }

        let timedOut = await #expect(throws: MQTTError.self) {
            try await client.publishAndWait("w/event", "e", qos: .atLeastOnce, timeout: .milliseconds(300))
        }
        #expect(timedOut?.kind == .timeout)
        #expect(client.offlineQueueDepth == 2)
        await client.shutdown()
        listener.stop()
    }
}

@Suite("MQTT offline queue refuses bad topics at once", .integration)
struct OfflineQueueTopicCheckTests {
    @Test func aWildcardTopicIsRefusedWhileOfflineInsteadOfFailingAfterTheReconnect() throws {
        let listener = try FirstPacketListener()
        let client = try MQTTClient(configuration: MQTTConfiguration(url: listener.url, clientID: TestMQTTClient.uniqueClientID("oqt")))
        let result = client.publish("lbs/device/+/state", "x", qos: .atLeastOnce, retain: true)
        guard case .failed(let error) = result else {
            Issue.record("expected a refusal, got \(result)")
            return
        }
        #expect(error.kind == .library)
        #expect(client.offlineQueueDepth == 0)
        listener.stop()
    }
}
