import GatewayTesting
import MQTT
import Synchronization
import TestTraits
import Testing

/// Fast reconnects so broker restarts are noticed within tests' deadlines.
private let fastReconnect = MQTTReconnectPolicy(minDelay: .milliseconds(50), maxDelay: .milliseconds(300))

@Suite("MQTT will, reconnect, back-pressure", .integration, .timeLimit(.minutes(1)))
struct MQTTReliabilityTests {
    private func willClient(_ url: String, willTopic: String) async throws -> TestMQTTClient {
        try await TestMQTTClient.connect(to: url) { configuration in
            configuration.will = MQTTWill(topic: willTopic, payload: "{\"state\":\"offline\"}", qos: .atLeastOnce, retain: true)
            configuration.reconnect = fastReconnect
        }
    }

    @Test func cleanShutdownDoesNotPublishTheWill() async throws {
        let broker = try await MosquittoBroker.started()
        let observer = try await TestMQTTClient.connect(to: broker.url)
        try await observer.subscribe("gw/bridge/state")
        let gateway = try await willClient(broker.url, willTopic: "gw/bridge/state")
        try await gateway.publish("gw/bridge/state", "{\"state\":\"online\"}", retain: true)
        try await observer.waitForMessage(topic: "gw/bridge/state") { $0.payloadString.contains("online") }

        await gateway.shutdown()
        #expect(!gateway.client.isConnected)

        // The snapshot client's SUBSCRIBE is handled after the gateway's DISCONNECT, so a will would show here.
        let snapshot = try await TestMQTTClient.retainedSnapshot(url: broker.url, filter: "gw/bridge/state")
        #expect(snapshot["gw/bridge/state"]?.payloadString == "{\"state\":\"online\"}")
        #expect(!observer.messages(on: "gw/bridge/state").contains { $0.payloadString.contains("offline") })
        await observer.shutdown()
    }

    @Test func willIsPublishedWhenTheConnectionVanishesAndTheClientReconnects() async throws {
        let broker = try await MosquittoBroker.started()
        let observer = try await TestMQTTClient.connect(to: broker.url)
        try await observer.subscribe("gw2/bridge/state")
        let proxy = try TCPProxy(upstreamPort: broker.port)
        let gateway = try await willClient(proxy.url, willTopic: "gw2/bridge/state")

        proxy.dropConnections()

        let will = try await observer.waitForMessage(topic: "gw2/bridge/state")
        #expect(will.payloadString == "{\"state\":\"offline\"}")
        #expect(will.qos == .atLeastOnce)
        try await gateway.waitForConnects(2)
        #expect(gateway.connectionEvents.contains { if case .disconnected = $0 { true } else { false } })
        try await gateway.publish("gw2/bridge/state", "{\"state\":\"online\"}", retain: true)
        try await observer.waitForMessage(topic: "gw2/bridge/state") { $0.payloadString.contains("online") }
        await gateway.shutdown()
        await observer.shutdown()
    }

    /// mosquitto drops every packet to a client whose queue is past `max_queued_messages`, PUBACKs included: the
    /// client's in-flight window then stays full for good and no QoS 1 message goes out again. A connection on
    /// which nothing is acknowledged for `acknowledgementTimeout` is ended cleanly (no will) and made again, and
    /// libmosquitto sends the unacknowledged messages again.
    @Test func aConnectionWhoseAcknowledgementsAreLostIsMadeAgainAndNothingIsLost() async throws {
        let broker = try await MosquittoBroker.started()
        let observer = try await TestMQTTClient.connect(to: broker.url)
        try await observer.subscribe("acks/#")
        let proxy = try TCPProxy(upstreamPort: broker.port)
        let gateway = try await TestMQTTClient.connect(to: proxy.url) { configuration in
            configuration.will = MQTTWill(topic: "acks/will", payload: "offline", qos: .atLeastOnce, retain: false)
            configuration.reconnect = fastReconnect
            configuration.acknowledgementTimeout = .milliseconds(800)
        }
        proxy.setDroppingAcknowledgements(true)
        // QoS 0 traffic goes on meanwhile (written, so "completed"): it must not hide the missing acknowledgements.
        let client = gateway.client
        let noise = Task {
            while !Task.isCancelled {
                client.publish("noise", "n", qos: .atMostOnce)
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
        defer { noise.cancel() }
        // More than mosquitto's default in-flight window (20) for this client: afterwards nothing could go out.
        for index in 0 ..< 30 { gateway.client.publish("acks/\(index)", "m\(index)", qos: .atLeastOnce) }
        // The broker lets 20 in at once (its receive maximum); their acknowledgements are lost, the rest wait.
        try await waitUntil("acknowledgements dropped", timeout: .seconds(5)) { proxy.droppedAcknowledgements >= 20 }
        try await quietPeriod(.milliseconds(100))
        #expect((0 ..< 30).filter { !observer.messages(on: "acks/\($0)").isEmpty }.count == 20)
        proxy.setDroppingAcknowledgements(false)

        // This one waits behind the full window until the connection is made again.
        try await gateway.client.publishAndWait("acks/after", "after", timeout: .seconds(10))
        try await gateway.waitForConnects(2)
        let ended = gateway.connectionEvents.compactMap { event -> String? in
            if case .disconnected(let error) = event { return error.message } else { return nil }
        }
        #expect(ended.contains { $0.contains("nothing acknowledged by the broker") }, "\(ended)")
        // The reconnect's own QoS 1 messages may still await their PUBACK at this instant: nothing stays queued.
        try await waitUntil("nothing left in the outgoing queue", timeout: .seconds(5)) { gateway.client.outgoingBacklog == 0 }
        // Every message reached the broker (the unacknowledged ones were sent again).
        try await waitUntil("all 30 passed on", timeout: .seconds(5)) { (0 ..< 30).allSatisfy { !observer.messages(on: "acks/\($0)").isEmpty } }
        // Ended with a DISCONNECT: the broker kept the will.
        try await quietPeriod(.milliseconds(200))
        #expect(observer.messages(on: "acks/will").isEmpty)
        await gateway.shutdown()
        await observer.shutdown()
    }

    /// The stall check counts from when a message began to wait, not from the last acknowledgement: after a quiet
    /// spell longer than `acknowledgementTimeout`, a message whose PUBACK is merely slow (mosquitto's Nagle holds it
    /// ~40 ms) is no stall. Before, such a message ended a healthy connection, and a `/set` sent meanwhile was lost.
    @Test func aSlowAcknowledgementAfterAQuietSpellIsNoStall() async throws {
        let broker = try await MosquittoBroker.started()
        let proxy = try TCPProxy(upstreamPort: broker.port)
        let gateway = try await TestMQTTClient.connect(to: proxy.url) { configuration in
            configuration.reconnect = fastReconnect
            configuration.acknowledgementTimeout = .seconds(2)
        }
        try await gateway.client.publishAndWait("quiet/first", "1", timeout: .seconds(5))
        // Longer than the timeout without any QoS 1 message, then acknowledgements that take longer than the network
        // thread's wait (500 ms), so it checks while one is owed, but well within the timeout.
        try await quietPeriod(.milliseconds(2_300))
        proxy.setAcknowledgementDelay(.milliseconds(1_200))
        for index in 0 ..< 2 { try await gateway.client.publishAndWait("quiet/\(index)", "m", timeout: .seconds(5)) }
        try await quietPeriod(.milliseconds(200))
        let ended = gateway.connectionEvents.compactMap { event -> String? in
            if case .disconnected(let error) = event { return error.message } else { return nil }
        }
        #expect(ended.isEmpty, "\(ended)")
        await gateway.shutdown()
        proxy.close()
    }

    /// The state publisher's ordering rests on these marks: a QoS 1 message counts as acknowledged only after its PUBACK,
    /// and only when every QoS 1 message before it was acknowledged too.
    @Test func acknowledgementMarksFollowThePUBACKs() async throws {
        let broker = try await MosquittoBroker.started()
        let proxy = try TCPProxy(upstreamPort: broker.port)
        let gateway = try await TestMQTTClient.connect(to: proxy.url)
        let start = gateway.client.acknowledgementMarks
        #expect(start.handedOver == start.acknowledged)
        proxy.setAcknowledgementDelay(.milliseconds(800))
        gateway.client.publish("marks/a", "1", qos: .atLeastOnce)
        gateway.client.publish("marks/b", "2", qos: .atMostOnce)
        gateway.client.publish("marks/c", "3", qos: .atLeastOnce)
        let sent = gateway.client.acknowledgementMarks
        #expect(sent.handedOver == start.handedOver + 2, "QoS 0 is not counted")
        #expect(sent.acknowledged == start.acknowledged, "nothing is acknowledged before its PUBACK")
        try await waitUntil("both acknowledged", timeout: .seconds(10)) { gateway.client.acknowledgementMarks.acknowledged == sent.handedOver }
        await gateway.shutdown()
        proxy.close()
    }

    /// A connection lost with QoS 1 messages unacknowledged: libmosquitto sends them again on the new connection. The
    /// marks start level there (nothing waits on the old connection's debts) and then follow the new messages only.
    /// (A resent message's mid matching a new one's needs 65,535 messages in between; `InFlight.leftOver` covers it.)
    @Test func acknowledgementMarksStayTrueAcrossAReconnect() async throws {
        let broker = try await MosquittoBroker.started()
        let proxy = try TCPProxy(upstreamPort: broker.port)
        let gateway = try await TestMQTTClient.connect(to: proxy.url) { $0.reconnect = fastReconnect }
        proxy.setDroppingAcknowledgements(true)
        for index in 0 ..< 5 { gateway.client.publish("marks/lost/\(index)", "m", qos: .atLeastOnce) }
        try await quietPeriod(.milliseconds(300))
        #expect(gateway.client.acknowledgementMarks.acknowledged < gateway.client.acknowledgementMarks.handedOver)
        proxy.setDroppingAcknowledgements(false)
        proxy.dropConnections()
        try await gateway.waitForConnects(2, timeout: .seconds(10))
        let level = gateway.client.acknowledgementMarks
        #expect(level.acknowledged == level.handedOver, "what the old connection owed is no longer waited for")
        try await quietPeriod(.milliseconds(300))
        proxy.setAcknowledgementDelay(.milliseconds(600))
        gateway.client.publish("marks/new", "n", qos: .atLeastOnce)
        let sent = gateway.client.acknowledgementMarks
        #expect(sent.handedOver == level.handedOver + 1)
        #expect(sent.acknowledged == level.handedOver, "the resent messages' acknowledgements do not acknowledge the new one")
        try await waitUntil("the new message acknowledged", timeout: .seconds(10)) { gateway.client.acknowledgementMarks.acknowledged == sent.handedOver }
        await gateway.shutdown()
        proxy.close()
    }

    @Test func reconnectsAfterTheBrokerIsKilledAndRestartedOnTheSamePort() async throws {
        let broker = try await MosquittoBroker.started()
        let port = broker.port
        let client = try await TestMQTTClient.connect(to: broker.url) { $0.reconnect = fastReconnect }

        await broker.kill()
        try await waitUntil("disconnect noticed") { !client.client.isConnected }
        #expect(client.client.publish("x/qos0", "lost", qos: .atMostOnce) == .droppedNotConnected)
        #expect(client.client.publish("x/qos1", "kept", qos: .atLeastOnce) == .queued)
        #expect(throws: MQTTError.self) { try client.client.subscribe(["x/#"]) }

        try await broker.start()
        #expect(broker.port == port)
        try await client.waitForConnects(2, timeout: .seconds(10))
        #expect(client.client.isConnected)
        try await client.subscribe("x/after")
        try await client.publish("x/after", "works again", qos: .atLeastOnce)
        #expect(try await client.waitForMessage(topic: "x/after").payloadString == "works again")
        await client.shutdown()
    }

    @Test func queuedQoS1PublishIsAcknowledgedAfterReconnect() async throws {
        let broker = try await MosquittoBroker.started()
        let client = try await TestMQTTClient.connect(to: broker.url) { $0.reconnect = fastReconnect }
        await broker.kill()
        try await waitUntil("disconnect noticed") { !client.client.isConnected }

        async let acknowledged: Void = client.client.publishAndWait("q/state", "queued", qos: .atLeastOnce,
                                                                    timeout: .seconds(20))
        try await broker.start()
        try await acknowledged
        await client.shutdown()
    }

    @Test func connectsOnceTheBrokerComesUpLater() async throws {
        let broker = try MosquittoBroker()
        var configuration = try MQTTConfiguration(url: broker.url, clientID: TestMQTTClient.uniqueClientID())
        configuration.reconnect = fastReconnect
        let client = try MQTTClient(configuration: configuration)
        client.start()

        var events = client.connectionEvents.makeAsyncIterator()
        let first = await events.next()
        guard case .connectFailed(let error, let retryIn) = first else {
            Issue.record("expected connectFailed first, got \(String(describing: first))")
            return
        }
        #expect(error.kind == .library)
        #expect(retryIn >= fastReconnect.minDelay && retryIn <= fastReconnect.maxDelay)

        try await broker.start()
        while let event = await events.next() {
            if event == .connected { break }
        }
        #expect(client.isConnected)
        await client.shutdown()
        #expect(await events.next() == .disconnected(MQTTError(kind: .library, message: "disconnected cleanly")))
        #expect(await events.next() == nil)
    }

    @Test func boundedInboundBufferDropsAndCountsWhenTheConsumerIsSlow() async throws {
        let broker = try await MosquittoBroker.started()
        var configuration = try MQTTConfiguration(url: broker.url, clientID: TestMQTTClient.uniqueClientID("slow"))
        configuration.inboundBufferSize = 10
        let slow = try MQTTClient(configuration: configuration)
        slow.start()
        for await event in slow.connectionEvents where event == .connected { break }
        try await slow.subscribeAndWait(["flood/#"], qos: .atLeastOnce)

        let publisher = try await TestMQTTClient.connect(to: broker.url)
        let total = 200
        for index in 0..<total {
            #expect(publisher.client.publish("flood/\(index)", "\(index)", qos: .atLeastOnce).isAccepted)
        }
        try await waitUntil("drops counted: \(slow.droppedInboundMessages)", timeout: .seconds(10)) {
            slow.droppedInboundMessages == total - 10
        }

        var kept: [String] = []
        for await message in slow.messages {
            kept.append(message.payloadString)
            if kept.count == 10 { break }
        }
        #expect(kept == (0..<10).map(String.init))
        await publisher.shutdown()
        await slow.shutdown()
    }

    /// With priority filters, a flood on other topics fills only the bulk buffer: a command sent behind it
    /// still reaches `messages` (before this, the gateway's own echoed retained topics dropped commands).
    @Test func aFloodOnOtherTopicsNeverDropsAPriorityMessage() async throws {
        let broker = try await MosquittoBroker.started()
        var configuration = try MQTTConfiguration(url: broker.url, clientID: TestMQTTClient.uniqueClientID("lanes"))
        configuration.inboundBufferSize = 10
        configuration.priorityFilters = ["lbs/device/+/set"]
        let client = try MQTTClient(configuration: configuration)
        client.start()
        for await event in client.connectionEvents where event == .connected { break }
        try await client.subscribeAndWait(["lbs/#"], qos: .atLeastOnce)

        let publisher = try await TestMQTTClient.connect(to: broker.url)
        for index in 0..<200 {
            #expect(publisher.client.publish("lbs/device/d\(index)/availability", "online", qos: .atLeastOnce).isAccepted)
        }
        try await publisher.client.publishAndWait("lbs/device/lock/set", Array("UNLOCK".utf8), qos: .atLeastOnce, timeout: .seconds(10))
        try await waitUntil("bulk drops counted: \(client.droppedInboundMessages)", timeout: .seconds(10)) {
            client.droppedInboundMessages == 190
        }
        var priority: MQTTMessage?
        for await message in client.messages {
            priority = message
            break
        }
        #expect(priority?.topic == "lbs/device/lock/set" && priority?.payloadString == "UNLOCK")
        var bulk: [String] = []
        for await message in client.bulkMessages {
            bulk.append(message.topic)
            if bulk.count == 10 { break }
        }
        #expect(bulk == (0..<10).map { "lbs/device/d\($0)/availability" })
        await publisher.shutdown()
        await client.shutdown()
    }
}
