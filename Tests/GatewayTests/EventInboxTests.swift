import Gateway
import GatewayTesting
import Testing

@Suite struct EventInboxTests {
    @Test func theConsumerTakesTheWholeBacklogInOneStep() async {
        let inbox = EventInbox<Int>(capacity: 10)
        for value in 1...4 { #expect(inbox.send(value)) }
        #expect(await inbox.next() == [1, 2, 3, 4])
        inbox.send(5)
        #expect(await inbox.next() == [5])
    }

    @Test func aFullInboxDropsTheNewestAndCountsThem() async {
        let inbox = EventInbox<Int>(capacity: 3)
        let accepted = (1...5).map { inbox.send($0) }
        #expect(accepted == [true, true, true, false, false])
        #expect(inbox.droppedCount == 2)
        #expect(await inbox.next() == [1, 2, 3])
    }

    @Test func aWaitingConsumerWakesForTheNextElement() async throws {
        let inbox = EventInbox<Int>(capacity: 10)
        let consumer = Task { await inbox.next() }
        // Give the consumer time to park; the element must reach it either way.
        try await Task.sleep(for: .milliseconds(20))
        inbox.send(7)
        #expect(await consumer.value == [7])
    }

    @Test func finishDrainsWhatIsWaitingThenEnds() async {
        let inbox = EventInbox<Int>(capacity: 10)
        inbox.send(1)
        inbox.finish()
        #expect(inbox.send(2) == false)
        #expect(await inbox.next() == [1])
        #expect(await inbox.next() == nil)
    }

    @Test func cancellingAWaitingConsumerEndsIt() async throws {
        let inbox = EventInbox<Int>(capacity: 10)
        let consumer = Task { await inbox.next() }
        try await Task.sleep(for: .milliseconds(20))
        consumer.cancel()
        #expect(await consumer.value == nil)
    }
}
