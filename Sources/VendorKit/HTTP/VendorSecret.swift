/// A credential (a vendor's password or API key, the broker's password). Every textual form is redacted, so it cannot leak
/// through logs, errors, `dump` or string interpolation; only `reveal()` hands out the value.
public struct VendorSecret: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    private let value: String

    public init(_ value: String) {
        self.value = value
    }

    /// The secret itself, for the one place that sends it to the vendor.
    public func reveal() -> String { value }

    /// True when the secret is empty.
    public var isEmpty: Bool { value.isEmpty }

    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
