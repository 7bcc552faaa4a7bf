/// A type-erased view of any `Clock<Duration>`: elapsed time since creation and sleeping.
/// The breaker, quota scheduler and retry loop keep time as offsets from their own start, so they are
/// not generic over the clock and tests inject `ManualClock` while production uses `ContinuousClock`.
public struct TimeSource: Sendable {
    private let elapsedNow: @Sendable () -> Duration
    private let sleeper: @Sendable (Duration) async throws -> Void

    public init<C: Clock>(_ clock: C) where C.Duration == Duration {
        let start = clock.now
        elapsedNow = { start.duration(to: clock.now) }
        sleeper = { duration in try await clock.sleep(until: clock.now.advanced(by: duration), tolerance: nil) }
    }

    /// Time elapsed since this source was created.
    public func now() -> Duration { elapsedNow() }

    /// Suspends for `duration` of the underlying clock's time (throws on cancellation).
    public func sleep(for duration: Duration) async throws {
        guard duration > .zero else { return }
        try await sleeper(duration)
    }
}
