extension Double {
    private static let powersOfTen: [Double] = [1, 10, 100, 1000, 10_000, 100_000, 1_000_000]

    /// Rounded to `places` decimals (0…6). Scaling a number near the largest Double overflows to infinity; such
    /// a number has no fraction left to round (above 2⁵² every Double is whole), so it comes back unchanged:
    /// rounding a finite reading from a vendor never turns it into infinity.
    public func rounded(places: Int) -> Double {
        let scale = Self.powersOfTen[Swift.min(Swift.max(places, 0), Self.powersOfTen.count - 1)]
        let scaled = self * scale
        guard scaled.isFinite else { return self }
        return scaled.rounded() / scale
    }
}

extension StateValue {
    /// `.number(value)` when it is finite, else nil: a reading computed from vendor input (a product that
    /// overflows, 1/x of a tiny x) is left out rather than published as infinity.
    public static func finite(_ value: Double) -> StateValue? {
        value.isFinite ? .number(value) : nil
    }
}
