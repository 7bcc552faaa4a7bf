extension Duration {
    /// Seconds as a floating-point number (ratios, jitter, JSON).
    public var inSeconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// A duration from floating-point seconds read from config, JSON or a header: non-finite or negative
    /// values give zero and huge ones are capped at 100 years, so arithmetic on it can never trap.
    public static func clampedSeconds(_ seconds: Double) -> Duration {
        guard seconds.isFinite, seconds > 0 else { return .zero }
        return .milliseconds(Int64((min(seconds, 3_153_600_000) * 1000).rounded()))
    }
}
