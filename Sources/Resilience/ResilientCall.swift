import GatewayModel

/// Runs one vendor call under the vendor's breaker, retry policy and quota:
/// 1. asks the breaker (throws `breaker_open`), then the quota (throws `quota_exhausted`);
/// 2. runs `operation` and records the outcome in the breaker;
/// 3. on a failure that `requiresReauthentication`, calls `reauthenticate` ONCE and repeats the call;
/// 4. retries retryable failures after the policy's jittered delay, slept on `time`;
/// stops at the first non-retryable failure, when attempts or `maxElapsed` run out, or when the breaker opened,
/// and then throws the last real failure (not `breaker_open`), so users see the cause.
///
/// Retrying a command whose first attempt timed out can repeat it: vendor code passes idempotency keys.
nonisolated(nonsending)
public func resilientCall<T>(
    breaker: CircuitBreaker, retry: RetryPolicy, quota: QuotaScheduler? = nil, use: QuotaScheduler.Use = .command,
    time: TimeSource, reauthenticate: (() async throws(GatewayError) -> Void)? = nil,
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
        let failure: GatewayError
        do throws(GatewayError) {
            let value = try await operation()
            breaker.record(permit, error: nil)
            return value
        } catch {
            breaker.record(permit, error: error)
            failure = error
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
