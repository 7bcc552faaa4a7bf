import Synchronization

/// A `Clock` that only moves when a test calls `advance`, so time-based logic is tested without sleeping.
/// Sleepers suspend until `advance` moves `now` to or past their deadline; cancellation wakes them with
/// `CancellationError`. Safe to use from any task or thread.
public final class ManualClock: Clock, Sendable {
    /// An offset from the clock's creation.
    public struct Instant: InstantProtocol, Sendable, Hashable, CustomStringConvertible {
        public var offset: Duration

        public init(offset: Duration) {
            self.offset = offset
        }

        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
        public var description: String { "ManualClock.Instant(\(offset))" }
    }

    private struct Sleeper {
        let deadline: Instant
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now: Instant
        var nextID: UInt64 = 0
        var sleepers: [UInt64: Sleeper] = [:]
    }

    private let state: Mutex<State>

    public init(now: Instant = Instant(offset: .zero)) {
        state = Mutex(State(now: now))
    }

    public var now: Instant { state.withLock { $0.now } }
    public var minimumResolution: Duration { .zero }

    /// How many tasks are suspended in `sleep` right now.
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    /// The earliest deadline any sleeper waits for.
    public var nextDeadline: Instant? { state.withLock { $0.sleepers.values.map(\.deadline).min() } }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Action { case wait, resume, cancel }
                let action: Action = state.withLock { state in
                    // Checked under the lock: a cancel handler that ran before registration found nothing to wake.
                    if Task.isCancelled { return .cancel }
                    if deadline <= state.now { return .resume }
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return .wait
                }
                switch action {
                case .wait: break
                case .resume: continuation.resume()
                case .cancel: continuation.resume(throwing: CancellationError())
                }
            }
        } onCancel: {
            let sleeper = state.withLock { $0.sleepers.removeValue(forKey: id) }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves time forward and wakes every sleeper whose deadline has been reached, earliest first.
    public func advance(by duration: Duration) {
        advance(to: now.advanced(by: duration))
    }

    /// Moves time to `instant` (never backwards) and wakes the due sleepers.
    public func advance(to instant: Instant) {
        let due: [Sleeper] = state.withLock { state in
            if instant > state.now { state.now = instant }
            let now = state.now
            let dueIDs = state.sleepers.filter { $0.value.deadline <= now }.keys
            return dueIDs.compactMap { state.sleepers.removeValue(forKey: $0) }.sorted { $0.deadline < $1.deadline }
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// Moves time to the earliest sleeper's deadline; returns false when nobody sleeps.
    @discardableResult
    public func advanceToNextDeadline() -> Bool {
        guard let deadline = nextDeadline else { return false }
        advance(to: deadline)
        return true
    }

    /// Waits (in real time, bounded by `timeout`) until at least `count` tasks sleep on this clock.
    /// For tests that must let another task reach its `sleep` before advancing time.
    public func waitForSleepers(_ count: Int = 1, timeout: Duration = .seconds(10)) async -> Bool {
        let realClock = ContinuousClock()
        let deadline = realClock.now.advanced(by: timeout)
        while sleeperCount < count {
            if realClock.now >= deadline || Task.isCancelled { return false }
            await Task.yield()
            try? await realClock.sleep(for: .milliseconds(1))
        }
        return true
    }
}
