import Foundation
import GatewayCore
import GatewayModel
import VendorEmporia
import VendorKit

/// What the gateway needs of its runtime's data, checked against known answers (`lbs-gateway self-test`). The
/// static build carries only part of ICU's data (deploy/build-release.sh, Sources/ICUDataFilter), and Foundation
/// answers from that data for time zones, calendars and date formats; a missing item shows as a wrong answer here,
/// not as a vendor window that silently shifts by an hour. The answers are facts about past instants, which a later
/// time zone database does not change.
public enum RuntimeSelfTest {
    public struct Check: Sendable, Equatable {
        public var name: String
        public var expected: String
        public var actual: String
        public var passed: Bool { expected == actual }
    }

    /// 2025-06-15T15:06:40Z.
    static let instant = Date(timeIntervalSince1970: 1_750_000_000)

    public static func run() -> [Check] {
        var checks: [Check] = []
        func check(_ name: String, _ expected: String, _ actual: () -> String) {
            checks.append(Check(name: name, expected: expected, actual: actual()))
        }
        // Zones with and without daylight saving, a half-hour offset, a 30-minute DST shift (Lord Howe), one unknown.
        for (zone, expected) in [
            ("Europe/Berlin", "UTC+02:00, daylight saving, next change 2025-10-26T01:00:00Z"),
            ("America/Los_Angeles", "UTC-07:00, daylight saving, next change 2025-11-02T09:00:00Z"),
            ("Australia/Lord_Howe", "UTC+10:30, standard time, next change 2025-10-04T15:30:00Z"),
            ("Asia/Kolkata", "UTC+05:30, standard time, no change ahead"),
            ("Nope/Nowhere", "unknown"),
        ] {
            check("time zone \(zone) on \(instant.formatted(.iso8601))", expected) { describe(TimeZone(identifier: zone), at: instant) }
        }
        // A vendor's nightly window in local time (Enphase's `nightly_outage`), across midnight.
        if let berlin = TimeZone(identifier: "Europe/Berlin"), let window = DailyWindow("22:55-00:30", timeZone: berlin) {
            let times = [(21, 0), (22, 25), (22, 40), (21, 56)].map { hour, minute in
                Date(timeIntervalSince1970: 1_749_945_600 + Double(hour * 3600 + minute * 60))
            }
            check("daily window 22:55-00:30 Europe/Berlin at 23:00, 00:25, 00:40, 23:56 local", "in, in, out, in") {
                times.map { window.contains($0) ? "in" : "out" }.joined(separator: ", ")
            }
        } else {
            check("daily window 22:55-00:30 Europe/Berlin", "parsed") { "not parsed" }
        }
        check("Gregorian calendar in Europe/Berlin", "2025-06-15 17:06, weekday 1, day starts 2025-06-14T22:00:00Z") {
            var calendar = Calendar(identifier: .gregorian)
            guard let berlin = TimeZone(identifier: "Europe/Berlin") else { return "no Europe/Berlin" }
            calendar.timeZone = berlin
            let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .weekday], from: instant)
            let day = String(format: "%04d-%02d-%02d %02d:%02d", parts.year ?? 0, parts.month ?? 0, parts.day ?? 0, parts.hour ?? 0, parts.minute ?? 0)
            return "\(day), weekday \(parts.weekday ?? 0), day starts \(calendar.startOfDay(for: instant).formatted(.iso8601))"
        }
        // Cognito's sign-in timestamp (Emporia): English names, UTC, the day not zero-padded.
        check("Cognito timestamp (en_US_POSIX)", "Thu Jun 5 05:06:40 UTC 2025") {
            CognitoSRP.timestamp(Date(timeIntervalSince1970: 1_749_100_000))
        }
        // The config reader's YAML (its scalar types are resolved by regular expressions).
        check("YAML config", "demo every 2.5 s; keepalive 30; retain_state false; homeassistant on") {
            let yaml = """
                mqtt: {url: 'mqtt://127.0.0.1:1883', keepalive: 30, retain_state: no}
                homeassistant: {enabled: true}
                vendors:
                  - {type: demo, id: demo, poll_interval: 2.5}
                """
            switch ConfigLoader.parse(yaml: yaml) {
            case .success(let config):
                let vendor = config.vendors.first
                return "\(vendor?.id ?? "none") every \(vendor?.pollInterval.map { "\($0)" } ?? "?") s; keepalive \(config.mqtt.keepAlive); "
                    + "retain_state \(config.mqtt.retainState); homeassistant \(config.homeAssistant.enabled ? "on" : "off")"
            case .failure(let failure):
                return failure.description
            }
        }
        return checks
    }

    /// The local time zone and its offset now (where Foundation found it: `TZ` or /etc/localtime).
    public static func localTimeZone(now: Date = Date()) -> String {
        let zone = TimeZone.current
        return "\(zone.identifier) (\(offset(zone.secondsFromGMT(for: now))))"
    }

    static func describe(_ zone: TimeZone?, at date: Date) -> String {
        guard let zone else { return "unknown" }
        let season = zone.isDaylightSavingTime(for: date) ? "daylight saving" : "standard time"
        let next = zone.nextDaylightSavingTimeTransition(after: date).map { "next change \($0.formatted(.iso8601))" } ?? "no change ahead"
        return "\(offset(zone.secondsFromGMT(for: date))), \(season), \(next)"
    }

    static func offset(_ seconds: Int) -> String {
        let minutes = abs(seconds) / 60
        return String(format: "UTC%@%02d:%02d", seconds < 0 ? "-" : "+", minutes / 60, minutes % 60)
    }
}
