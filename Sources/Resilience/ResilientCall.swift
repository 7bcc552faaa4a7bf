import GatewayModel

/// Runs one vendor call under the vendor's breaker, retry policy and quota:
/// 1. asks the breaker (throws `breaker_open`), then the quota (throws `quota_exhausted`);
/// 2. runs `operation` and records the outcome in the breaker;
/// 3. on a failure that `requiresReauthentication`, calls `reauthenticate` ONCE and repeats the call;
/// 4. retries retryable failures after the policy's jittered delay, slept on `time`;
/// stops at the first non-retryable failure, when attempts or `maxElapsed` run out, or when the breaker opened,
/// and then throws the last real failure (not `breaker_open`), so users see the cause.
///
/// A `.command` failure with `outcomeUnknown` (timeout or reset after the request was sent, 500/502/504,
/// an unreadable 2xx) is never retried here: the first request may still be carried out, and repeating it
/// could apply a stale command after a newer one. It is thrown non-retryable, saying the outcome is unknown;
/// the controller settles it by reading the device back. Reads (poll, refresh) are repeated as before.
///
/// `deadline` (an instant of `time`) bounds every retry: no attempt starts after it and no wait (retry delay,
/// `Retry-After`) reaches past it, so a lock command with a 10 s deadline never goes out at second 11.
/// The last real failure is thrown, marked not retryable.
nonisolated(nonsending)
public func resilientCall<T>(
    breaker: CircuitBreaker, retry: RetryPolicy, quota: QuotaScheduler? = nil, use: QuotaScheduler.Use = .command,
    time: TimeSource, deadline: Duration? = nil, reauthenticate: (() async throws(GatewayError) -> Void)? = nil,
    operation: () async throws(GatewayError) -> T
) async throws(GatewayError) -> T {
    let started = time.now()
    var attempts = 0
    var reauthenticated = false
    while true {
        let permit = try breaker.acquire()
        if let quota, case .denied(let window, let retryIn) = quota.acquire(use) {
            breaker.release(permit)
            throw quota.exhaustedError(window: window, retryIn: retryIn)
        }
        attempts += 1
        var failure: GatewayError
        do throws(GatewayError) {
            let value = try await operation()
            breaker.record(permit, error: nil)
            return value
        } catch {
            breaker.record(permit, error: error)
            failure = error
        }
        if failure.outcomeUnknown {
            // A command may still be carried out: never send it again from here.
            guard use != .command else { throw failure.asUnknownCommandOutcome() }
            // A read has no side effect: repeating it is safe, and nothing about its outcome is unknown.
            failure.outcomeUnknown = false
        }

        if failure.requiresReauthentication {
            guard let reauthenticate else { throw failure }
            guard !reauthenticated else { throw failure.afterReauthentication() }
            reauthenticated = true
            do throws(GatewayError) {
                try await reauthenticate()
            } catch {
                throw error.requiresReauthentication ? error.afterReauthentication() : error
            }
            // The repeated call is part of the same attempt, not a retry.
            attempts -= 1
            continue
        }
        guard retry.shouldRetry(failure, attemptsMade: attempts), breaker.state != .open else { throw failure }
        let delay = retry.delay(forRetry: attempts - 1, after: failure)
        if let maxElapsed = retry.maxElapsed, time.now() - started + delay > maxElapsed { throw failure }
        if let deadline, time.now() + delay >= deadline {
            // The next try would start after the command's deadline: report why it failed, final.
            var final = failure
            final.retryable = false
            final.message += " The command's deadline passed before it could be tried again; it was not sent again."
            throw final
        }
        do {
            try await time.sleep(for: delay)
        } catch {
            // Cancelled while waiting: stop retrying and report what actually went wrong.
            throw failure
        }
    }
}

/// `resilientCall` with any `Clock<Duration>`.
nonisolated(nonsending)
public func resilientCall<T, C: Clock>(
    breaker: CircuitBreaker, retry: RetryPolicy, quota: QuotaScheduler? = nil, use: QuotaScheduler.Use = .command,
    clock: C, reauthenticate: (() async throws(GatewayError) -> Void)? = nil,
    operation: () async throws(GatewayError) -> T
) async throws(GatewayError) -> T where C.Duration == Duration {
    try await resilientCall(
        breaker: breaker, retry: retry, quota: quota, use: use, time: TimeSource(clock),
        reauthenticate: reauthenticate, operation: operation
    )
}

/// A vendor instance's resilience kit bundled once, so each call site says only what it does.
public struct ResilientCaller: Sendable {
    public let breaker: CircuitBreaker
    public let retry: RetryPolicy
    public let quota: QuotaScheduler?
    public let time: TimeSource

    public init(breaker: CircuitBreaker, retry: RetryPolicy, quota: QuotaScheduler? = nil, time: TimeSource) {
        self.breaker = breaker
        self.retry = retry
        self.quota = quota
        self.time = time
    }

    /// Runs `operation` through `resilientCall` with this vendor's breaker, retry policy and quota.
    nonisolated(nonsending)
    public func call<T>(
        _ use: QuotaScheduler.Use, reauthenticate: (() async throws(GatewayError) -> Void)? = nil,
        operation: () async throws(GatewayError) -> T
    ) async throws(GatewayError) -> T {
        try await resilientCall(
            breaker: breaker, retry: retry, quota: quota, use: use, time: time,
            reauthenticate: reauthenticate, operation: operation
        )
    }
}

extension GatewayError {
    /// Sentence appended to a command failure whose request may have been carried out.
    public static let unknownOutcomeNote = "The request had reached the vendor, so the command may still be carried out: its outcome is unknown and it was not sent again."

    /// This failure as the final answer to a command that may have been carried out: not retryable
    /// (neither here nor by the outbox), `outcomeUnknown`, and saying so.
    public func asUnknownCommandOutcome() -> GatewayError {
        var copy = self
        copy.outcomeUnknown = true
        copy.retryable = false
        copy.retryAfter = nil
        if !copy.message.hasSuffix(Self.unknownOutcomeNote) { copy.message += " " + Self.unknownOutcomeNote }
        copy.suggestion = "Check the device's state before sending the command again; the gateway reads it back to settle the outcome."
        return copy
    }
}
