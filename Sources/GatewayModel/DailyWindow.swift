#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A stretch of local time that comes back every day, like `22:55-00:30` (crossing midnight when `end` < `start`).
public struct DailyWindow: Sendable, Equatable {
    /// Minutes after local midnight.
    public var start: Int
    public var end: Int
    public var timeZone: LocalZone

    public init(start: Int, end: Int, timeZone: LocalZone = .current) {
        self.start = start
        self.end = end
        self.timeZone = timeZone
    }

    /// `"22:55-00:30"`; nil unless both times are valid `HH:MM` and differ.
    public init?(_ text: String, timeZone: LocalZone = .current) {
        let parts = text.split(separator: "-").map { $0.trimmingWhitespace() }
        guard parts.count == 2, let start = Self.minutes(parts[0]), let end = Self.minutes(parts[1]), start != end else { return nil }
        self.init(start: start, end: end, timeZone: timeZone)
    }

    static func minutes(_ text: String) -> Int? {
        let fields = text.split(separator: ":")
        guard fields.count == 2, fields.allSatisfy({ $0.count == 2 && $0.allSatisfy { $0.isASCII && $0.isNumber } }),
              let hours = Int(fields[0]), let minutes = Int(fields[1]), (0..<24).contains(hours), (0..<60).contains(minutes) else { return nil }
        return hours * 60 + minutes
    }

    /// `"22:55-00:30"`.
    public var text: String {
        func format(_ minutes: Int) -> String {
            let hours = minutes / 60, rest = minutes % 60
            return (hours < 10 ? "0" : "") + "\(hours):" + (rest < 10 ? "0" : "") + "\(rest)"
        }
        return "\(format(start))-\(format(end))"
    }

    public func contains(_ date: Date) -> Bool {
        let local = timeZone.components(of: date)
        let minute = local.hour * 60 + local.minute
        return start < end ? (start..<end).contains(minute) : (minute >= start || minute < end)
    }
}
