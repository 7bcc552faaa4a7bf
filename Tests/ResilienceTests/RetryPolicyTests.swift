import GatewayModel
import Resilience
import Testing

@Suite("RetryPolicy")
struct RetryPolicyTests {
    let timeout = GatewayError.vendorTimeout(vendor: "v")

    @Test func ceilingsGrowExponentiallyUpToTheCap() {
        let policy = RetryPolicy(baseDelay: .seconds(1), maxDelay: .seconds(30))
        let ceilings = (0..<8).map { policy.ceiling(forRetry: $0) }
        #expect(ceilings == [.seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(16), .seconds(30), .seconds(30), .seconds(30)])
        #expect(policy.ceiling(forRetry: 10_000) == .seconds(30))
    }

    @Test func delaysAreFullyJitteredWithinZeroAndTheCeiling() {
        let policy = RetryPolicy(baseDelay: .seconds(1), maxDelay: .seconds(30), random: .seeded(7))
        for retry in 0..<8 {
            let ceiling = policy.ceiling(forRetry: retry)
            let samples = (0..<400).map { _ in policy.delay(forRetry: retry, after: timeout) }
            #expect(samples.allSatisfy { $0 >= .zero && $0 <= ceiling })
            // Full jitter: the whole range is used, not just the top (no "equal jitter").
            #expect(samples.contains { $0 < ceiling * 0.2 })
            #expect(samples.contains { $0 > ceiling * 0.8 })
        }
    }

    @Test func delaysGrowWithAttemptsOnAverage() {
        let policy = RetryPolicy(baseDelay: .milliseconds(500), maxDelay: .seconds(60), random: .seeded(42))
        let means = (0..<6).map { retry in
            (0..<500).map { _ in policy.delay(forRetry: retry) }.reduce(Duration.zero, +) / 500
        }
        for (earlier, later) in zip(means, means.dropFirst()) { #expect(later > earlier) }
    }

    @Test func seededSchedulesAreReproducible() {
        func schedule(_ seed: UInt64) -> [Duration] {
            let policy = RetryPolicy(random: .seeded(seed))
            return (0..<6).map { policy.delay(forRetry: $0) }
        }
        #expect(schedule(1) == schedule(1))
        #expect(schedule(1) != schedule(2))
    }

    @Test func retryAfterIsAFloorAndIsCapped() {
        let policy = RetryPolicy(maxDelay: .seconds(30), retryAfterCap: .seconds(300), random: .seeded(3))
        var limited = GatewayError(.rateLimited, message: "429", retryAfter: .seconds(45))
        for retry in 0..<5 { #expect(policy.delay(forRetry: retry, after: limited) == .seconds(45)) }
        limited.retryAfter = .seconds(3600)
        #expect(policy.delay(forRetry: 0, after: limited) == .seconds(300))
        // A tiny Retry-After does not shorten the backoff below the jittered value.
        limited.retryAfter = .zero
        let jittered = RetryPolicy(maxDelay: .seconds(30), random: .seeded(5)).delay(forRetry: 4)
        let withTinyRetryAfter = RetryPolicy(maxDelay: .seconds(30), random: .seeded(5)).delay(forRetry: 4, after: limited)
        #expect(withTinyRetryAfter == jittered)
        #expect(jittered > .zero)
    }

    @Test func retryDecisions() {
        let policy = RetryPolicy(maxAttempts: 4, malformedMaxAttempts: 2)
        #expect(policy.shouldRetry(timeout, attemptsMade: 1))
        #expect(policy.shouldRetry(timeout, attemptsMade: 3))
        #expect(!policy.shouldRetry(timeout, attemptsMade: 4))
        #expect(!policy.shouldRetry(GatewayError(.badRequest, message: "400", httpStatus: 400), attemptsMade: 1))
        #expect(!policy.shouldRetry(.invalidJSON("x"), attemptsMade: 1))
        let malformed = GatewayError(.malformedResponse, message: "html")
        #expect(policy.shouldRetry(malformed, attemptsMade: 1))
        #expect(!policy.shouldRetry(malformed, attemptsMade: 2))
        let unauthorized = GatewayError(.authFailed, message: "401", httpStatus: 401, requiresReauthentication: true)
        #expect(!policy.shouldRetry(unauthorized, attemptsMade: 1))
        #expect(!RetryPolicy.none.shouldRetry(timeout, attemptsMade: 1))
    }
}
