import Synchronization

/// A bounded multi-producer, single-consumer queue that hands the consumer everything waiting at once.
///
/// Vendors report one event per device per poll; an `AsyncStream` would suspend and resume the
/// consumer for each of them. Here the consumer takes the whole backlog in one step and handles it
/// inside the actor without further hops.
public final class EventInbox<Element: Sendable>: Sendable {
    private struct State {
        var buffer: [Element] = []
        var waiter: CheckedContinuation<[Element]?, Never>?
        var finished = false
        var dropped = 0

        /// The whole backlog, leaving the buffer empty; nil when nothing waits.
        mutating func takeAll() -> [Element]? {
            guard !buffer.isEmpty else { return nil }
            defer { buffer = [] }
            return buffer
        }
    }

    private let state = Mutex(State())
    /// Elements beyond this many waiting are dropped (the newest), as with `.bufferingOldest`.
    public let capacity: Int

    public init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// Adds one element; false when it was dropped (the inbox is full or finished).
    @discardableResult
    public func send(_ element: Element) -> Bool {
        let (accepted, waiter): (Bool, CheckedContinuation<[Element]?, Never>?) = state.withLock { state in
            guard !state.finished, state.buffer.count < capacity else {
                state.dropped += 1
                return (false, nil)
            }
            if let waiter = state.waiter {
                state.waiter = nil
                return (true, waiter)
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
}
