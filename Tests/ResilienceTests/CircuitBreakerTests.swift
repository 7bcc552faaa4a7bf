import GatewayModel
import GatewayTesting
import Resilience
import Testing

@Suite("CircuitBreaker")
struct CircuitBreakerTests {
    let clock = ManualClock()
    let timeout = GatewayError.vendorTimeout(vendor: "v")

    func makeBreaker(_ settings: CircuitBreaker.Settings = .init()) -> CircuitBreaker {
        CircuitBreaker(vendor: "v", settings: settings, clock: clock)
    }

    func call(_ breaker: CircuitBreaker, failing error: GatewayError?) throws {
        let permit = try breaker.acquire()
        breaker.record(permit, error: error)
    }

    func trip(_ breaker: CircuitBreaker) throws {
        while breaker.state == .closed { try call(breaker, failing: timeout) }
    }

    func httpError(_ status: Int) -> GatewayError {
        ErrorClassifier(vendor: "v").classify(status: status, body: [UInt8]()) ?? .internal("no error for \(status)")
    }

    @Test func staysClosedBelowMinimumCalls() throws {
        let breaker = makeBreaker()
        for _ in 0..<4 { try call(breaker, failing: timeout) }
        #expect(breaker.state == .closed)
        #expect(breaker.snapshot.failuresInWindow == 4)
        try call(breaker, failing: timeout)
        #expect(breaker.state == .open)
    }

    @Test func opensAtTheFailureRatio() throws {
        let breaker = makeBreaker()
        for _ in 0..<3 { try call(breaker, failing: nil) }
        for _ in 0..<2 { try call(breaker, failing: timeout) }
        #expect(breaker.state == .closed) // 2 of 5 = 40 %
        try call(breaker, failing: timeout)
        #expect(breaker.state == .open) // 3 of 6 = 50 %
        #expect(breaker.nextAttemptIn == .seconds(5))
        #expect(breaker.snapshot.lastFailure?.code == .vendorTimeout)
    }

    @Test func failuresOlderThanTheWindowAreForgotten() throws {
        let breaker = makeBreaker()
        for _ in 0..<4 { try call(breaker, failing: timeout) }
        clock.advance(by: .seconds(61))
        #expect(breaker.snapshot.callsInWindow == 0)
        try call(breaker, failing: timeout)
        #expect(breaker.state == .closed)

        // The same five failures inside one window do open it.
        let other = makeBreaker()
        for _ in 0..<4 { try call(other, failing: timeout) }
        clock.advance(by: .seconds(30))
        try call(other, failing: timeout)
        #expect(other.state == .open)
    }

    @Test func openRejectsUntilTheOpenDurationThenHalfOpens() throws {
        let breaker = makeBreaker()
        try trip(breaker)
        let rejection = try #require(throws: GatewayError.self) { try breaker.acquire() }
        #expect(rejection.code == .breakerOpen)
        #expect(rejection.retryAfter == .seconds(5))
        #expect(breaker.nextAttemptIn == .seconds(5))
        clock.advance(by: .seconds(4))
        #expect(breaker.state == .open)
        #expect(breaker.nextAttemptIn == .seconds(1))
        clock.advance(by: .seconds(1))
        #expect(breaker.state == .halfOpen)
        #expect(breaker.state.rawValue == "half_open")
        #expect(breaker.nextAttemptIn == nil)
    }

    @Test func halfOpenLetsExactlyOneProbeThrough() throws {
        let breaker = makeBreaker()
        try trip(breaker)
        clock.advance(by: .seconds(30))
        let probe = try breaker.acquire()
        #expect(probe.isProbe)
        for _ in 0..<3 {
            let rejection = try #require(throws: GatewayError.self) { try breaker.acquire() }
            #expect(rejection.code == .breakerOpen)
        }
        // A probe that never reported back frees the slot after probeTimeout.
        clock.advance(by: .seconds(120))
        #expect(try breaker.acquire().isProbe)
    }

    @Test func probeSuccessClosesAndResetsTheOpenDuration() throws {
        let breaker = makeBreaker()
        try trip(breaker)
        clock.advance(by: .seconds(5))
        try call(breaker, failing: timeout) // probe fails → 10 s
        #expect(breaker.nextAttemptIn == .seconds(10))
        clock.advance(by: .seconds(10))
        try call(breaker, failing: nil) // probe succeeds
        #expect(breaker.state == .closed)
        #expect(breaker.snapshot.consecutiveTrips == 0)
        #expect(breaker.snapshot.totalTrips == 2)
        try trip(breaker)
        #expect(breaker.nextAttemptIn == .seconds(5), "a close starts the waits at 5 s again")
    }

    /// One failed probe cost the whole configured wait (devices came back 38–58 s after the backend).
    /// The wait starts at 5 s and doubles with each failed probe up to the configured `open_duration`.
    @Test func probeFailureReopensForLongerUpToTheConfiguredWait() throws {
        let breaker = makeBreaker()
        try trip(breaker)
        var durations: [Duration] = []
        for _ in 0..<7 {
            let open = try #require(breaker.nextAttemptIn)
            durations.append(open)
            clock.advance(by: open)
            #expect(breaker.state == .halfOpen)
            try call(breaker, failing: timeout)
            #expect(breaker.state == .open)
        }
        #expect(durations == [5, 10, 20, 30, 30, 30, 30].map { Duration.seconds($0) })

        let slow = makeBreaker(.init(openDuration: .seconds(60)))
        try trip(slow)
        var waits: [Duration] = []
        for _ in 0..<6 {
            let open = try #require(slow.nextAttemptIn)
            waits.append(open)
            clock.advance(by: open)
            try call(slow, failing: timeout)
        }
        #expect(waits == [5, 10, 20, 40, 60, 60].map { Duration.seconds($0) })
    }

    @Test func aConfiguredWaitBelowFiveSecondsIsTheFirstWaitToo() throws {
        let breaker = makeBreaker(.init(openDuration: .seconds(2)))
        try trip(breaker)
        #expect(breaker.nextAttemptIn == .seconds(2))
    }

    @Test func eachVendorHasItsOwnWaits() throws {
        let down = CircuitBreaker(vendor: "down", clock: clock)
        let other = CircuitBreaker(vendor: "other", clock: clock)
        try trip(down)
        clock.advance(by: .seconds(5))
        try call(down, failing: timeout) // down's probe fails: 10 s
        try trip(other)
        #expect(down.nextAttemptIn == .seconds(10))
        #expect(other.nextAttemptIn == .seconds(5), "another vendor's failed probes do not lengthen this one's wait")
    }

    @Test func clientErrorsAndAuthFailuresDoNotTrip() throws {
        let breaker = makeBreaker()
        for status in [400, 401, 403, 404, 405, 409, 422, 401, 404, 400] {
            try call(breaker, failing: httpError(status))
        }
        #expect(breaker.state == .closed)
        // They are answers from a healthy vendor: they dilute the failure ratio.
        #expect(breaker.snapshot.callsInWindow == 10)
        for _ in 0..<9 { try call(breaker, failing: timeout) }
        #expect(breaker.state == .closed) // 9 of 19
        try call(breaker, failing: httpError(503))
        #expect(breaker.state == .open) // 10 of 20
    }

    @Test func errorsThatNeverReachedTheVendorAreIgnored() throws {
        let breaker = makeBreaker()
        for _ in 0..<10 { try call(breaker, failing: .invalidPayload("x")) }
        try call(breaker, failing: ErrorClassifier(vendor: "v").classify(.cancelled))
        #expect(breaker.snapshot.callsInWindow == 0)
        #expect(breaker.state == .closed)
    }

    @Test func lateResultsFromBeforeATripAreIgnored() throws {
        let breaker = makeBreaker()
        let slow = try breaker.acquire()
        try trip(breaker)
        clock.advance(by: .seconds(30))
        let probe = try breaker.acquire()
        breaker.record(slow, error: nil) // must not close the breaker
        #expect(breaker.state == .halfOpen)
        breaker.record(probe, error: nil)
        #expect(breaker.state == .closed)
    }

    @Test func releasedProbeFreesTheSlot() throws {
        let breaker = makeBreaker()
        try trip(breaker)
        clock.advance(by: .seconds(30))
        breaker.release(try breaker.acquire())
        #expect(try breaker.acquire().isProbe)
    }

    @Test func goesThroughTheWholeCycle() throws {
        let breaker = makeBreaker(.init(minimumCalls: 1, failureRatio: 1))
        var seen = [breaker.state]
        try call(breaker, failing: timeout)
        seen.append(breaker.state)
        clock.advance(by: .seconds(30))
        seen.append(breaker.state)
        try call(breaker, failing: nil)
        seen.append(breaker.state)
        #expect(seen == [.closed, .open, .halfOpen, .closed])
        #expect(breaker.snapshot.consecutiveTrips == 0 && breaker.snapshot.totalTrips == 1)
    }
}
