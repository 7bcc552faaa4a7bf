import GatewayModel
import Synchronization

/// A thread-safe source of random numbers for jitter; seeded in tests so schedules are reproducible.
public final class RandomSource: Sendable {
    private let generator: Mutex<any RandomNumberGenerator & Sendable>

    public init(_ generator: some RandomNumberGenerator & Sendable) {
        self.generator = Mutex(generator)
    }

    /// The system's cryptographic generator.
    public static let system = RandomSource(SystemRandomNumberGenerator())

    /// A reproducible sequence (SplitMix64) for tests.
    public static func seeded(_ seed: UInt64) -> RandomSource { RandomSource(SplitMix64(seed: seed)) }

    /// A uniformly distributed value in `0...1`.
    public func unit() -> Double {
        generator.withLock { generator in Double.random(in: 0...1, using: &generator) }
    }
}

/// A small, fast, seedable generator (Steele, Lea, Flood 2014); not for cryptography.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) {
        state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Capped exponential backoff with full jitter: the wait before retry n (n = 0 after the first failure)
/// is uniform in `0 … min(maxDelay, baseDelay · 2ⁿ)`, so many clients that failed together do not
/// retry together. A vendor's `Retry-After` is a floor, itself capped by `retryAfterCap`.
public struct RetryPolicy: Sendable {
    /// Total attempts including the first one (1 = never retry).
    public var maxAttempts: Int
    public var baseDelay: Duration
    /// Upper bound of the jittered delay.
    public var maxDelay: Duration
    /// Upper bound when honouring a vendor's `Retry-After`.
    public var retryAfterCap: Duration
    /// Attempts for malformed answers: a broken response rarely fixes itself, so retry once at most.
    public var malformedMaxAttempts: Int
    /// Give up when the next wait would end later than this after the first attempt started (nil: no limit).
    public var maxElapsed: Duration?
    public var random: RandomSource

    public init(
        maxAttempts: Int = 4, baseDelay: Duration = .seconds(1), maxDelay: Duration = .seconds(30),
        retryAfterCap: Duration = .seconds(300), malformedMaxAttempts: Int = 2, maxElapsed: Duration? = nil,
        random: RandomSource = .system
    ) {
        self.maxAttempts = max(1, maxAttempts)
        self.baseDelay = max(.zero, baseDelay)
        self.maxDelay = max(.zero, maxDelay)
        self.retryAfterCap = max(.zero, retryAfterCap)
        self.malformedMaxAttempts = max(1, malformedMaxAttempts)
        self.maxElapsed = maxElapsed
        self.random = random
    }

    /// Never retries.
    public static let none = RetryPolicy(maxAttempts: 1)

    /// The attempt limit that applies to this error.
    public func attemptLimit(for error: GatewayError) -> Int {
        error.code == .malformedResponse ? min(maxAttempts, malformedMaxAttempts) : maxAttempts
    }

    /// Whether to try again after `attemptsMade` attempts, the last of which failed with `error`.
    public func shouldRetry(_ error: GatewayError, attemptsMade: Int) -> Bool {
        error.retryable && !error.requiresReauthentication && attemptsMade < attemptLimit(for: error)
    }

    /// The jitter ceiling before retry `retry` (0-based): `min(maxDelay, baseDelay · 2^retry)`.
    public func ceiling(forRetry retry: Int) -> Duration {
        let growth = Double(sign: .plus, exponent: min(max(retry, 0), 62), significand: 1)
        return min(maxDelay, .clampedSeconds(baseDelay.inSeconds * growth))
    }

    /// The wait before retry `retry` (0-based) after `error`: full jitter, raised to the vendor's
    /// `Retry-After` when it asked for longer, never above `retryAfterCap` in that case.
    public func delay(forRetry retry: Int, after error: GatewayError? = nil) -> Duration {
        let jittered = Duration.clampedSeconds(ceiling(forRetry: retry).inSeconds * random.unit())
        guard let retryAfter = error?.retryAfter else { return jittered }
        return min(max(retryAfter, jittered), retryAfterCap)
    }
}
