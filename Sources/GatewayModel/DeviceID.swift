/// A device's stable identity in topics: `<vendor_id>_<vendor's device id>`, lower-cased,
/// every character outside `[a-z0-9_-]` replaced by `_`. Never derived from a display name,
/// so renaming a device in the vendor's app never moves its topics.
public struct DeviceID: Hashable, Sendable, Comparable, Codable, CustomStringConvertible {
    public let rawValue: String
    /// The id's hash, computed once. Ids key a dozen per-device tables that every state update reads, and hashing
    /// the string again on each lookup (a Hasher seeded, fed and finalized) was a fifth of the gateway's time per
    /// state (perf over `lbs-bench logic`). Seeded per process like any `Hasher`, so it stays unpredictable.
    private let storedHash: Int

    private init(unchecked raw: String) {
        rawValue = raw
        var hasher = Hasher()
        hasher.combine(raw)
        storedHash = hasher.finalize()
    }

    public init(vendorInstance: String, vendorDeviceID: String) {
        self.init(unchecked: Slug.make("\(vendorInstance)_\(vendorDeviceID)"))
    }

    /// Accepts an id as it appears in a topic; nil when it is not a valid slug.
    public init?(validating raw: String) {
        guard Slug.isValid(raw) else { return nil }
        self.init(unchecked: raw)
    }

    public static func == (lhs: DeviceID, rhs: DeviceID) -> Bool {
        lhs.storedHash == rhs.storedHash && lhs.rawValue == rhs.rawValue
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(storedHash)
    }

    /// What `Dictionary` and `Set` ask for: the stored hash mixed with the table's seed (splitmix64's finalizer, a
    /// bijection), without running a `Hasher` per lookup.
    public func _rawHashValue(seed: Int) -> Int {
        var mixed = UInt64(bitPattern: Int64(storedHash ^ seed))
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return Int(Int64(bitPattern: mixed ^ (mixed >> 31)))
    }

    public var description: String { rawValue }

    public static func < (lhs: DeviceID, rhs: DeviceID) -> Bool { lhs.rawValue < rhs.rawValue }

    public init(from decoder: any Decoder) throws {
        let raw = try decoder.singleValueContainer().decode(String.self)
        guard Slug.isValid(raw) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not a device id slug: \(raw)"))
        }
        self.init(unchecked: raw)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

public enum Slug {
    public static let maxLength = 128

    /// Lower-cases and replaces every character outside `[a-z0-9_-]` with `_`.
    public static func make(_ text: String) -> String {
        var out = ""
        out.unicodeScalars.reserveCapacity(text.unicodeScalars.count)
        for scalar in text.lowercased().unicodeScalars {
            out.unicodeScalars.append(isAllowed(scalar) ? scalar : "_")
        }
        return out.isEmpty ? "_" : String(out.prefix(maxLength))
    }

    public static func isValid(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= maxLength && text.unicodeScalars.allSatisfy(isAllowed)
    }

    static func isAllowed(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar {
        case "a"..."z", "0"..."9", "_", "-": true
        default: false
        }
    }
}
