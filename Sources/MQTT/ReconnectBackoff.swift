/// Decorrelated-jitter back-off ("sleep = min(max, random(min, previous * 3))"), so a fleet of
/// gateways does not reconnect to a restarted broker in lock-step.
public struct ReconnectBackoff: Sendable {
    /// The bounds in use.
    public let policy: MQTTReconnectPolicy
    private var previous: Duration

    /// Starts at `policy.minDelay`.
    public init(policy: MQTTReconnectPolicy) {
        self.policy = policy
        self.previous = policy.minDelay
    }

    /// Forgets earlier failures; call after a successful connect.
    public mutating func reset() {
        previous = policy.minDelay
    }

    /// The delay before the next attempt, always within `minDelay...maxDelay`.
    public mutating func nextDelay<G: RandomNumberGenerator>(using generator: inout G) -> Duration {
        let low = policy.minDelay.totalNanoseconds
        let high = min(policy.maxDelay.totalNanoseconds, previous.totalNanoseconds.multipliedReportingOverflow(by: 3).partialValue)
        let nanoseconds = high > low ? Int64.random(in: low...high, using: &generator) : low
        let delay = min(Duration.nanoseconds(nanoseconds), policy.maxDelay)
        previous = delay
        return delay
    }

    /// The delay before the next attempt, using the system random generator.
    public mutating func nextDelay() -> Duration {
        var generator = SystemRandomNumberGenerator()
        return nextDelay(using: &generator)
    }
}
