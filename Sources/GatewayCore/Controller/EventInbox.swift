import Synchronization
import GatewayModel

/// How an inbox merges elements that only the latest of counts (a device's state updates).
public struct Coalescing<Element>: Sendable {
    /// The device an element may merge for with a waiting one; nil: never merged. A `DeviceID` rather than its
    /// text: it keeps its hash, and this runs for every element sent.
    package let key: @Sendable (Element) -> DeviceID?
    /// Folds a newer element into the waiting one.
    package let merge: @Sendable (inout Element, Element) -> Void

    public init(key: @escaping @Sendable (Element) -> DeviceID?, merge: @escaping @Sendable (inout Element, Element) -> Void) {
        self.key = key
        self.merge = merge
    }
}

/// A bounded multi-producer, single-consumer queue that hands the consumer everything waiting at once.
///
/// Vendors report one event per device per poll; an `AsyncStream` would suspend and resume the
/// consumer for each of them. Here the consumer takes the whole backlog in one step and handles it
/// inside the actor without further hops.
///
/// With `coalescing`, an element whose key matches one still waiting is merged into it (latest wins)
/// instead of queued, so while the consumer falls behind the inbox holds one entry per device, not one
/// per update: memory is bounded by devices, not by the rate. Order is kept: an element without a key
/// (an inventory, a health change) seals the waiting ones, so later updates queue after it.
public final class EventInbox<Element: Sendable>: Sendable {
    private struct State {
        package var buffer: [Element] = []
        /// An emptied buffer the consumer gave back (`recycle`): the next backlog fills it without growing anew.
        package var spare: [Element] = []
        /// Where each key's waiting element is in `buffer` (only since the last element without a key).
        package var pending: [DeviceID: Int] = [:]
        package var waiter: CheckedContinuation<[Element]?, Never>?
        package var finished = false
        package var dropped = 0
        package var coalesced = 0

        /// The whole backlog, leaving the buffer empty; nil when nothing waits.
        package mutating func takeAll() -> [Element]? {
            guard !buffer.isEmpty else { return nil }
            pending.removeAll(keepingCapacity: true)
            defer {
                buffer = spare
                spare = []
            }
            return buffer
        }
    }

    private let state = Mutex(State())
    private let coalescing: Coalescing<Element>?
    /// Elements beyond this many waiting are dropped (the newest), as with `.bufferingOldest`;
    /// an element merged into a waiting one never counts against it.
    public let capacity: Int

    public init(capacity: Int, coalescing: Coalescing<Element>? = nil) {
        self.capacity = max(1, capacity)
        self.coalescing = coalescing
    }

    /// Adds one element; false when it was dropped (the inbox is full or finished).
    @discardableResult
    public func send(_ element: Element) -> Bool {
        let key = coalescing?.key(element)
        let (accepted, waiter): (Bool, CheckedContinuation<[Element]?, Never>?) = state.withLock { state in
            guard !state.finished else {
                state.dropped += 1
                return (false, nil)
            }
            if let key, let index = state.pending[key], let coalescing {
                coalescing.merge(&state.buffer[index], element)
                state.coalesced += 1
                return (true, nil)
            }
            guard state.buffer.count < capacity else {
                state.dropped += 1
                return (false, nil)
            }
            if let waiter = state.waiter {
                state.waiter = nil
                return (true, waiter)
            }
            if let key {
                state.pending[key] = state.buffer.count
            } else {
                state.pending.removeAll(keepingCapacity: true)
            }
            state.buffer.append(element)
            return (true, nil)
        }
        waiter?.resume(returning: [element])
        return accepted
    }

    /// Everything waiting, or (when nothing is) the next element as soon as it arrives;
    /// nil once finished and drained, or when the consumer is cancelled.
    public func next() async -> [Element]? {
        if let ready = state.withLock({ $0.takeAll() }) { return ready }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<[Element]?, Never>) in
                let immediate: [Element]?? = state.withLock { state in
                    // Elements may have arrived since the check above.
                    if let ready = state.takeAll() { return .some(ready) }
                    if state.finished || Task.isCancelled { return .some(nil) }
                    state.waiter = continuation
                    return .none
                }
                if let immediate { continuation.resume(returning: immediate) }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: nil)
        }
    }

    /// Gives a handled backlog back, so the next one is appended into its storage instead of a buffer that starts
    /// empty and reallocates as it doubles (each time on fresh pages). Kept only up to `recycledCapacity` elements:
    /// one poll's worth, not the peak of a burst.
    public func recycle(_ handled: consuming [Element]) {
        guard handled.capacity <= Self.recycledCapacity else { return }
        // Outside the lock: this releases the elements.
        handled.removeAll(keepingCapacity: true)
        state.withLock { state in
            // Into the buffer being filled when nothing arrived since the take, else for the next take.
            if state.buffer.isEmpty, state.buffer.capacity < handled.capacity {
                swap(&state.buffer, &handled)
            } else if state.spare.capacity < handled.capacity {
                swap(&state.spare, &handled)
            }
        }
    }

    /// The largest buffer `recycle` keeps (elements).
    public static var recycledCapacity: Int { 16_384 }

    /// No more elements are accepted; the consumer drains what is waiting and then gets nil.
    public func finish() {
        let waiter = state.withLock { state in
            state.finished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }

    /// Elements waiting now.
    public var count: Int { state.withLock { $0.buffer.count } }

    /// How many elements were dropped so far.
    public var droppedCount: Int { state.withLock { $0.dropped } }

    /// How many elements were merged into a waiting one so far.
    public var coalescedCount: Int { state.withLock { $0.coalesced } }
}

extension EventInbox where Element == VendorEvent {
    /// The sink vendors report into. Made here, where `send` is specialized for `VendorEvent`: a closure built in
    /// another module would call the generic `send`, which looks its type's metadata up on every event.
    public var sink: VendorEventSink {
        VendorEventSink { self.send($0) }
    }
}

extension Coalescing where Element == VendorEvent {
    /// A device's state updates merge while they wait: the newer values win, the latest observation time stays.
    public static var deviceStates: Coalescing<VendorEvent> {
        Coalescing(
            key: { event in
                if case .state(let id, _, _) = event { return id }
                return nil
            },
            merge: { waiting, newer in
                guard case .state(let id, var values, let observedAt) = waiting, case .state(_, let update, let newerAt) = newer else { return }
                values.merge(update) { _, new in new }
                waiting = .state(id, values, observedAt: max(observedAt, newerAt))
            }
        )
    }
}
