import Foundation
import GatewayModel
import GatewayTesting
import Synchronization
import Testing
import VendorKit
import VendorTesting

/// The push-vendor helper: reconnects with growing delays, reports health without a breaker, and never
/// loops on a wrong password.
@Suite struct ReconnectingStreamTests {
    enum Step: Sendable {
        case fail(GatewayError)
        /// Connects, stays up for this long (on the manual clock), then drops.
        case connectFor(Duration)
    }

    final class Script: Sendable {
        private let steps: Mutex<[Step]>
        private let started = Mutex(0)
        init(_ steps: [Step]) { self.steps = Mutex(steps) }
        var sessions: Int { started.withLock { $0 } }

        func session(clock: ManualClock) -> @Sendable (@escaping ReconnectingStream.Connected) async throws -> Void {
            { connected in
                self.started.withLock { $0 += 1 }
                let step = self.steps.withLock { $0.isEmpty ? Step.connectFor(.seconds(86_400)) : $0.removeFirst() }
                switch step {
                case .fail(let error): throw error
                case .connectFor(let time):
                    connected()
                    try await clock.sleep(for: time)
                    throw GatewayError(.vendorUnreachable, message: "dropped")
                }
            }
        }
    }

    static let unreachable = GatewayError(.vendorUnreachable, message: "connection refused")
    static let policy = ReconnectingStream.Policy(minDelay: .seconds(1), maxDelay: .seconds(8), downAfter: 3, stableAfter: .seconds(30), authRetryDelay: .seconds(900))

    /// Starts the stream; returns its task.
    func start(_ script: Script, clock: ManualClock, log: EventLog) -> Task<Void, Never> {
        let stream = ReconnectingStream(vendorID: "sense", sink: log.sink, clock: clock, policy: Self.policy, jitter: { $0 })
        let session = script.session(clock: clock)
        return Task { await stream.run(session) }
    }

    /// Waits until the stream sleeps (between attempts or inside a connected session), then returns the sleep's length.
    func nextSleep(_ clock: ManualClock) async throws -> Duration {
        #expect(await clock.waitForSleepers(1))
        let deadline = try #require(clock.nextDeadline)
        return clock.now.duration(to: deadline)
    }

    @Test func failuresBackOffDegradedThenDownAndAConnectionIsOK() async throws {
        let clock = ManualClock(), log = EventLog()
        let script = Script([.fail(Self.unreachable), .fail(Self.unreachable), .fail(Self.unreachable), .fail(Self.unreachable)])
        let task = start(script, clock: clock, log: log)
        var delays: [Duration] = []
        var reported: [VendorHealth] = []
        for _ in 0..<4 {
            let delay = try await nextSleep(clock)
            delays.append(delay)
            // Read before advancing: the next session may already report.
            if let last = log.health.last { reported.append(last) }
            clock.advance(by: delay)
        }
        #expect(delays == [.seconds(1), .seconds(2), .seconds(4), .seconds(8)], "doubling, capped at maxDelay")
        #expect(reported.map(\.state) == [.degraded, .degraded, .down, .down])
        #expect(reported.allSatisfy { $0.breaker == nil && $0.lastError?.code == .vendorUnreachable && $0.nextAttempt != nil })

        // The fifth session connects: ok, reported once.
        _ = try await nextSleep(clock)
        #expect(script.sessions == 5)
        #expect(log.health.last?.state == .ok && log.health.last?.lastSuccess != nil && log.health.last?.breaker == nil)
        task.cancel()
        await task.value
    }

    @Test func aStableStreamThatDropsReconnectsFastAndStaysDegraded() async throws {
        let clock = ManualClock(), log = EventLog()
        let script = Script([.fail(Self.unreachable), .fail(Self.unreachable), .connectFor(.seconds(60)), .connectFor(.seconds(5))])
        let task = start(script, clock: clock, log: log)
        clock.advance(by: try await nextSleep(clock)) // 1 s
        clock.advance(by: try await nextSleep(clock)) // 2 s
        #expect(try await nextSleep(clock) == .seconds(60), "connected, reading")
        clock.advance(by: .seconds(60))
        #expect(try await nextSleep(clock) == .seconds(1), "up for 60 s: the delay starts over")
        #expect(log.health.map(\.state) == [.degraded, .degraded, .ok, .degraded])
        clock.advance(by: .seconds(1))
        #expect(try await nextSleep(clock) == .seconds(5))
        clock.advance(by: .seconds(5))
        #expect(try await nextSleep(clock) == .seconds(2), "a short connection does not reset the delay")
        #expect(log.health.last?.state == .degraded, "it did connect, so it is not down")
        task.cancel()
        await task.value
    }

    @Test func aWrongPasswordIsDownAtOnceAndRetriedOnlyEveryAuthRetryDelay() async throws {
        let clock = ManualClock(), log = EventLog()
        let script = Script([.fail(GatewayError(.authFailed, message: "bad password")), .fail(GatewayError(.authFailed, message: "bad password"))])
        let task = start(script, clock: clock, log: log)
        #expect(try await nextSleep(clock) == .seconds(900))
        #expect(log.health.last?.state == .down && log.health.last?.lastError?.code == .authFailed)
        clock.advance(by: .seconds(899))
        #expect(script.sessions == 1)
        clock.advance(by: .seconds(1))
        #expect(try await nextSleep(clock) == .seconds(900))
        #expect(script.sessions == 2)
        task.cancel()
        await task.value
    }

    @Test func aRetryAfterFromTheVendorLengthensTheDelayAndCancelStopsIt() async throws {
        let clock = ManualClock(), log = EventLog()
        var limited = GatewayError(.rateLimited, message: "429")
        limited.retryAfter = .seconds(120)
        let task = start(Script([.fail(limited)]), clock: clock, log: log)
        #expect(try await nextSleep(clock) == .seconds(120))
        task.cancel()
        await task.value
        #expect(clock.sleeperCount == 0)
    }
}
