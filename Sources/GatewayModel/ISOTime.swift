#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// ISO 8601 UTC with milliseconds (`2026-11-21T12:00:00.123Z`), formatted without Foundation's
/// locale machinery: it is called for every published state.
public enum ISOTime {
    /// Seconds since 1970 of 0000-01-01T00:00:00Z and 9999-12-31T23:59:59Z: the dates four-digit years can show.
    public static let representable: ClosedRange<Double> = -62_167_219_200...253_402_300_799

    /// A date from a vendor can be anything (an epoch of 1e300, NaN): it is written as the nearest representable
    /// date (NaN as 1970) instead of overflowing the integer arithmetic below.
    public static func format(_ date: Date) -> String {
        let raw = date.timeIntervalSince1970
        let clamped = raw.isNaN ? 0 : min(max(raw, representable.lowerBound), representable.upperBound + 0.999)
        let millis = Int64((clamped * 1000).rounded(.down))
        var seconds = millis / 1000
        let ms = Int(millis - seconds * 1000)
        if ms < 0 { seconds -= 1 }
        let days = CivilDate.floorDivide(seconds, 86_400)
        let secOfDay = Int(seconds - days * 86_400)
        let date = CivilDate(days: days)
        return "\(date.year.zeroPadded(4))-\(date.month.zeroPadded(2))-\(date.day.zeroPadded(2))T\((secOfDay / 3600).zeroPadded(2)):"
            + "\((secOfDay % 3600 / 60).zeroPadded(2)):\((secOfDay % 60).zeroPadded(2)).\(((ms + 1000) % 1000).zeroPadded(3))Z"
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fff][Z|±HH:MM]`. Without a zone, `assumeUTC` decides.
    public static func parse(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        func int(_ from: Int, _ count: Int) -> Int? {
            guard from + count <= bytes.count else { return nil }
            var value = 0
            for b in bytes[from..<from + count] {
                guard b >= 48, b <= 57 else { return nil }
                value = value * 10 + Int(b - 48)
            }
            return value
        }
        guard bytes.count >= 19, let y = int(0, 4), let mo = int(5, 2), let d = int(8, 2),
              let h = int(11, 2), let mi = int(14, 2), let s = int(17, 2),
              bytes[4] == 45, bytes[7] == 45, bytes[10] == 84 || bytes[10] == 32,
              (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, s < 61
        else { return nil }
        var index = 19
        var fraction = 0.0
        if index < bytes.count, bytes[index] == 46 {
            index += 1
            var scale = 0.1
            while index < bytes.count, bytes[index] >= 48, bytes[index] <= 57 {
                fraction += Double(bytes[index] - 48) * scale
                scale /= 10
                index += 1
            }
        }
        var offset = 0
        if index < bytes.count {
            switch bytes[index] {
            case 90, 122: index += 1
            case 43, 45:
                guard let oh = int(index + 1, 2) else { return nil }
                let om = int(index + 4, 2) ?? int(index + 3, 2) ?? 0
                offset = (oh * 3600 + om * 60) * (bytes[index] == 45 ? -1 : 1)
                index = bytes.count
            default: return nil
            }
        }
        let days = CivilDate.days(year: y, month: mo, day: d)
        let total = Double(days) * 86_400 + Double(h * 3600 + mi * 60 + s) - Double(offset) + fraction
        return Date(timeIntervalSince1970: total)
    }
}
