#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel

/// Parses `Retry-After` (RFC 9110 §10.2.3): delta-seconds or an HTTP-date.
public enum RetryAfter {
    /// The wait the header asks for, capped at `cap`; nil when the value is invalid.
    /// A date in the past means "now" (zero).
    public static func parse(_ value: String, now: Date, cap: Duration) -> Duration? {
        let isBlank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        let trimmed = String(value.drop(while: isBlank).reversed().drop(while: isBlank).reversed())
        guard !trimmed.isEmpty else { return nil }
        let wait: Duration
        if trimmed.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) {
            // Huge numbers do not fit an Int; they are simply "longer than the cap".
            guard trimmed.utf8.count <= 12, let seconds = Int64(trimmed) else { return cap }
            wait = .seconds(seconds)
        } else if let date = HTTPDate.parse(trimmed) {
            wait = .clampedSeconds(date.timeIntervalSince(now))
        } else {
            return nil
        }
        return min(wait, cap)
    }
}

/// HTTP-date parsing (RFC 9110 §5.6.7): IMF-fixdate plus the obsolete RFC 850 and asctime forms,
/// which recipients must still accept. Without DateFormatter, so it works with FoundationEssentials.
public enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    /// `Sun, 06 Nov 1994 08:49:37 GMT`, `Sunday, 06-Nov-94 08:49:37 GMT` or `Sun Nov  6 08:49:37 1994`.
    public static func parse(_ text: String) -> Date? {
        let tokens = text.split(separator: " ").map { String($0) }
        guard tokens.count >= 4, let weekday = tokens.first, weekday.count >= 3 else { return nil }
        let day: Int, month: Int, year: Int, time: String
        if weekday.hasSuffix(",") {
            if tokens.count == 6, tokens[5] == "GMT" {
                // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
                guard let d = Int(tokens[1]), let m = monthNumber(tokens[2]), tokens[3].count == 4, let y = Int(tokens[3]) else { return nil }
                (day, month, year, time) = (d, m, y, tokens[4])
            } else if tokens.count == 4, tokens[3] == "GMT" {
                // RFC 850: Sunday, 06-Nov-94 08:49:37 GMT
                let parts = tokens[1].split(separator: "-").map { String($0) }
                guard parts.count == 3, let d = Int(parts[0]), let m = monthNumber(parts[1]), parts[2].count == 2,
                      let yy = Int(parts[2]) else { return nil }
                // Two-digit years: RFC 9110 says pick the most recent matching year; 70 is the usual pivot.
                (day, month, year, time) = (d, m, yy < 70 ? 2000 + yy : 1900 + yy, tokens[2])
            } else {
                return nil
            }
        } else if tokens.count == 5 {
            // asctime: Sun Nov  6 08:49:37 1994 (split drops the double space)
            guard let m = monthNumber(tokens[1]), let d = Int(tokens[2]), tokens[4].count == 4, let y = Int(tokens[4]) else { return nil }
            (day, month, year, time) = (d, m, y, tokens[3])
        } else {
            return nil
        }
        let clock = time.split(separator: ":").map { Int($0) }
        guard clock.count == 3, let hour = clock[0], let minute = clock[1], let second = clock[2],
              (1...31).contains(day), (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second),
              (1000...9999).contains(year) else { return nil }
        func pad(_ value: Int, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        // ISOTime does the calendar arithmetic; one implementation of it is enough.
        return ISOTime.parse("\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(hour, 2)):\(pad(minute, 2)):\(pad(second, 2))Z")
    }

    private static func monthNumber(_ name: String) -> Int? {
        guard name.count == 3 else { return nil }
        return months.firstIndex(of: name.lowercased()).map { $0 + 1 }
    }
}
