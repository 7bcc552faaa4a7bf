/// A device's stable identity in topics: `<vendor_id>_<vendor's device id>`, lower-cased,
/// every character outside `[a-z0-9_-]` replaced by `_`. Never derived from a display name,
/// so renaming a device in the vendor's app never moves its topics.
public struct DeviceID: Hashable, Sendable, Comparable, Codable, CustomStringConvertible {
    public let rawValue: String

    public init(vendorInstance: String, vendorDeviceID: String) {
        rawValue = Slug.make("\(vendorInstance)_\(vendorDeviceID)")
    }

    /// Accepts an id as it appears in a topic; nil when it is not a valid slug.
    public init?(validating raw: String) {
        guard Slug.isValid(raw) else { return nil }
        rawValue = raw
    }

    public var description: String { rawValue }

    public static func < (lhs: DeviceID, rhs: DeviceID) -> Bool { lhs.rawValue < rhs.rawValue }

    public init(from decoder: any Decoder) throws {
        let raw = try decoder.singleValueContainer().decode(String.self)
        guard Slug.isValid(raw) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not a device id slug: \(raw)"))
        }
        rawValue = raw
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
