#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import Resilience
import Synchronization

/// Keeps a push vendor's stream up (a WebSocket feed, a controller connection): connects, lets the
/// vendor read until the stream ends, reconnects with growing jittered delays, and reports the vendor's
/// health on the way, without a circuit breaker (`breaker` is nil in what it reports):
/// - `ok` once a session says it is connected;
/// - `degraded` while reconnecting after a drop (devices stay available, their last state holds);
/// - `down` after `downAfter` failed attempts in a row (a session that dropped before `stableAfter` counts as
///   failed, so a flapping stream ends up down), or at once on `auth_failed` (devices go offline).
/// A session that stayed up for `stableAfter` resets the delay, so a long-lived stream that drops
/// reconnects quickly; a wrong password is retried only every `authRetryDelay`, never in a tight loop.
public struct ReconnectingStream: Sendable {
    public struct Policy: Sendable {
        public var minDelay: Duration
        public var maxDelay: Duration
        public var downAfter: Int
        public var stableAfter: Duration
        public var authRetryDelay: Duration

        public init(
            minDelay: Duration = .seconds(1), maxDelay: Duration = .seconds(60), downAfter: Int = 3,
            stableAfter: Duration = .seconds(30), authRetryDelay: Duration = .seconds(900)
        ) {
            self.minDelay = minDelay
            self.maxDelay = max(minDelay, maxDelay)
            self.downAfter = max(1, downAfter)
            self.stableAfter = stableAfter
            self.authRetryDelay = authRetryDelay
        }
    }

    /// What a session calls once its stream is up (after the handshake and any login).
    public typealias Connected = @Sendable () -> Void

    private let vendorID: String
    private let sink: VendorEventSink
    private let time: TimeSource
    private let now: @Sendable () -> Date
    private let policy: Policy
    /// Spreads reconnects of many gateways after an outage; tests pass `{ $0 }`.
    private let jitter: @Sendable (Duration) -> Duration

    public init(
        vendorID: String, sink: VendorEventSink, clock: any Clock<Duration>, now: @escaping @Sendable () -> Date = { Date() },
        policy: Policy = Policy(), jitter: @escaping @Sendable (Duration) -> Duration = ReconnectingStream.halfToFull
    ) {
        self.vendorID = vendorID
        self.sink = sink
        self.time = TimeSource(clock)
        self.now = now
        self.policy = policy
        self.jitter = jitter
    }

    /// A delay between half and all of `delay`.
    public static func halfToFull(_ delay: Duration) -> Duration {
        delay / 2 + .clampedSeconds(delay.inSeconds / 2 * Double.random(in: 0...1))
    }

    /// Runs sessions until the task is cancelled. `session` opens the stream, calls `connected` when it is up,
    /// and reads it; it returns or throws when the stream ends (a `GatewayError` names why).
    public func run(_ session: @Sendable (_ connected: @escaping Connected) async throws -> Void) async {
        let health = Mutex(Tracker())
        var failures = 0
        while !Task.isCancelled {
            let opened = Mutex<Duration?>(nil)
            var ending: GatewayError
            do {
                try await session { [time, now, sink, vendorID] in
                    opened.withLock { $0 = time.now() }
                    if let update = health.withLock({ $0.connected(vendorID: vendorID, at: now()) }) { sink.send(.health(update)) }
                }
                ending = GatewayError(.vendorUnreachable, message: "The \(vendorID) stream was closed by the other side.")
            } catch is CancellationError {
                return
            } catch let error as GatewayError {
                ending = error
            } catch {
                ending = GatewayError(.vendorUnreachable, message: "The \(vendorID) stream failed: \(error)")
            }
            if Task.isCancelled { return }
            let upFor = opened.withLock { $0 }.map { time.now() - $0 }
            if let upFor, upFor >= policy.stableAfter { failures = 0 }
            failures += 1
            var delay = ending.code == .authFailed ? policy.authRetryDelay : backoff(afterFailures: failures)
            if let asked = ending.retryAfter { delay = max(delay, asked) }
            let down = ending.code == .authFailed || failures >= policy.downAfter
            let next = now().addingTimeInterval(delay.inSeconds)
            let update = health.withLock { $0.failed(vendorID: vendorID, error: ending, down: down, nextAttempt: next) }
            sink.send(.health(update))
            do { try await time.sleep(for: delay) } catch { return }
        }
    }

    func backoff(afterFailures failures: Int) -> Duration {
        let growth = Double(sign: .plus, exponent: min(failures - 1, 30), significand: 1)
        return min(policy.maxDelay, jitter(.clampedSeconds(policy.minDelay.inSeconds * growth)))
    }

    /// The last health reported, so only changes go out.
    private struct Tracker {
        var lastSuccess: Date?
        var reported: VendorHealth?

        mutating func connected(vendorID: String, at date: Date) -> VendorHealth? {
            lastSuccess = date
            guard reported?.state != .ok else { return nil }
            let health = VendorHealth(vendorID: vendorID, state: .ok, breaker: nil, lastSuccess: date)
            reported = health
            return health
        }

        mutating func failed(vendorID: String, error: GatewayError, down: Bool, nextAttempt: Date) -> VendorHealth {
            let health = VendorHealth(
                vendorID: vendorID, state: down ? .down : .degraded, breaker: nil, lastSuccess: lastSuccess,
                lastError: error, nextAttempt: nextAttempt
            )
            reported = health
            return health
        }
    }
}
