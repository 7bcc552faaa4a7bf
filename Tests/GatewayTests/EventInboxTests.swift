import Foundation
import GatewayCore
import GatewayModel
import GatewayTesting
import TestTraits
import Testing

@Suite(.integration) struct EventInboxTests {
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
        // Let the consumer run and park (the element must reach it either way).
        for _ in 0..<100 { await Task.yield() }
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

    @Test func aRecycledBacklogTakesTheNextOneWithoutGrowingAnew() async throws {
        let inbox = EventInbox<Int>(capacity: 100_000)
        for value in 0..<1_000 { inbox.send(value) }
        let first = try #require(await inbox.next())
        let grown = first.capacity
        inbox.recycle(first)
        inbox.send(1_000)
        let second = try #require(await inbox.next())
        #expect(second == [1_000], "nothing of the recycled backlog comes back")
        #expect(second.capacity >= grown, "appended into the recycled storage")
        inbox.recycle(second)

        // A burst's buffer is not kept: memory stays at one poll's worth.
        for value in 0...EventInbox<Int>.recycledCapacity { inbox.send(value) }
        let burst = try #require(await inbox.next())
        #expect(burst.capacity > EventInbox<Int>.recycledCapacity)
        inbox.recycle(burst)
        inbox.send(1)
        let after = try #require(await inbox.next())
        #expect(after == [1])
        #expect(after.capacity <= EventInbox<Int>.recycledCapacity)
    }

    @Test func cancellingAWaitingConsumerEndsIt() async throws {
        let inbox = EventInbox<Int>(capacity: 10)
        let consumer = Task { await inbox.next() }
        for _ in 0..<100 { await Task.yield() }
        consumer.cancel()
        #expect(await consumer.value == nil)
    }
}

@Suite(.integration) struct CoalescingInboxTests {
    static let a = DeviceID(vendorInstance: "v", vendorDeviceID: "a")
    static let b = DeviceID(vendorInstance: "v", vendorDeviceID: "b")

    func describe(_ events: [VendorEvent]?) -> [String] {
        (events ?? []).map { event in
            switch event {
            case .state(let id, let values, _):
                "\(id.rawValue):" + values.keys.sorted().map { "\($0)=\(values[$0]?.number ?? -1)" }.joined(separator: ",")
            case .inventory: "inventory"
            case .health: "health"
            case .availability(let id, let online): "\(id.rawValue) \(online ? "online" : "offline")"
            case .deviceAdded(let device): "added \(device.id.rawValue)"
            case .deviceRemoved(let id): "removed \(id.rawValue)"
            case .deviceEvent(let id, let type, _, _): "\(id.rawValue) event \(type)"
            case .history(let id, let readings): "\(id.rawValue) history \(readings.count)"
            }
        }
    }

    @Test func aDevicesWaitingUpdatesMergeLatestWinsAndMemoryIsBoundedByDevices() async {
        let inbox = EventInbox<VendorEvent>(capacity: 10, coalescing: .deviceStates)
        for watts in 1...10_000 {
            #expect(inbox.send(.state(Self.a, ["power": .number(Double(watts))], observedAt: Date())))
            #expect(inbox.send(.state(Self.b, ["power": .number(Double(-watts))], observedAt: Date())))
        }
        inbox.send(.state(Self.a, ["energy": .number(5)], observedAt: Date()))
        #expect(inbox.count == 2, "one entry per device, whatever the rate")
        #expect(inbox.droppedCount == 0)
        #expect(inbox.coalescedCount == 19_999)
        #expect(describe(await inbox.next()) == ["v_a:energy=5.0,power=10000.0", "v_b:power=-10000.0"])
    }

    @Test func eventsWithoutAKeySealWhatWaitsSoOrderIsKept() async {
        let inbox = EventInbox<VendorEvent>(capacity: 10, coalescing: .deviceStates)
        inbox.send(.state(Self.a, ["power": .number(1)], observedAt: Date()))
        inbox.send(.inventory(vendorID: "v", devices: []))
        inbox.send(.state(Self.a, ["power": .number(2)], observedAt: Date()))
        inbox.send(.state(Self.a, ["power": .number(3)], observedAt: Date()))
        inbox.send(.availability(Self.a, online: false))
        #expect(describe(await inbox.next()) == ["v_a:power=1.0", "inventory", "v_a:power=3.0", "v_a offline"])
    }

    @Test func oneOffEventsAndPartialInventoryAreNeverMergedAndKeepTheirPlace() async {
        let inbox = EventInbox<VendorEvent>(capacity: 10, coalescing: .deviceStates)
        inbox.send(.deviceAdded(Device(vendorID: "v", vendorDeviceID: "a", name: "A", type: .button, keys: [], eventTypes: ["press"])))
        inbox.send(.deviceEvent(Self.a, type: "press", data: [:], at: Date()))
        inbox.send(.state(Self.a, ["power": .number(1)], observedAt: Date()))
        inbox.send(.deviceEvent(Self.a, type: "press", data: [:], at: Date()))
        inbox.send(.state(Self.a, ["power": .number(2)], observedAt: Date()))
        inbox.send(.deviceRemoved(Self.a))
        #expect(describe(await inbox.next()) == ["added v_a", "v_a event press", "v_a:power=1.0", "v_a event press", "v_a:power=2.0", "removed v_a"])
    }

    @Test func aFullInboxStillMergesIntoWaitingEntriesButDropsNewOnes() async {
        let inbox = EventInbox<VendorEvent>(capacity: 1, coalescing: .deviceStates)
        inbox.send(.state(Self.a, ["power": .number(1)], observedAt: Date()))
        #expect(inbox.send(.state(Self.b, ["power": .number(1)], observedAt: Date())) == false)
        #expect(inbox.send(.state(Self.a, ["power": .number(2)], observedAt: Date())))
        #expect(inbox.droppedCount == 1)
        #expect(describe(await inbox.next()) == ["v_a:power=2.0"])
    }
}
