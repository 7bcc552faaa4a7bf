#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import CurlHTTP
import GatewayCore
import GatewayModel
import VendorEmporia
import VendorKit

/// What the gateway needs of its runtime's data and libraries, checked against known answers (`lbs-gateway self-test`). Time
/// zones come from the system's time zone database (`tzdata`, read by `LocalZone`); a missing or unreadable one
/// shows as a wrong answer here, not as a vendor window that silently shifts by an hour. The answers are facts
/// about past instants, which a later time zone database does not change.
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
            ("Europe/Berlin", "UTC+02:00, daylight saving, next change 2025-10-26T01:00:00.000Z"),
            ("America/Los_Angeles", "UTC-07:00, daylight saving, next change 2025-11-02T09:00:00.000Z"),
            ("Australia/Lord_Howe", "UTC+10:30, standard time, next change 2025-10-04T15:30:00.000Z"),
            ("Asia/Kolkata", "UTC+05:30, standard time, no change ahead"),
            ("Nope/Nowhere", "unknown"),
        ] {
            check("time zone \(zone) on \(ISOTime.format(instant))", expected) { describe(LocalZone(identifier: zone), at: instant) }
        }
        // A vendor's nightly window in local time (Enphase's `nightly_outage`), across midnight.
        if let berlin = LocalZone(identifier: "Europe/Berlin"), let window = DailyWindow("22:55-00:30", timeZone: berlin) {
            let times = [(21, 0), (22, 25), (22, 40), (21, 56)].map { hour, minute in
                Date(timeIntervalSince1970: 1_749_945_600 + Double(hour * 3600 + minute * 60))
            }
            check("daily window 22:55-00:30 Europe/Berlin at 23:00, 00:25, 00:40, 23:56 local", "in, in, out, in") {
                times.map { window.contains($0) ? "in" : "out" }.joined(separator: ", ")
            }
        } else {
            check("daily window 22:55-00:30 Europe/Berlin", "parsed") { "not parsed" }
        }
        check("local date, weekday and start of day in Europe/Berlin", "2025-06-15 17:06, weekday 1, day starts 2025-06-14T22:00:00.000Z") {
            guard let berlin = LocalZone(identifier: "Europe/Berlin") else { return "no Europe/Berlin" }
            let parts = berlin.components(of: instant)
            let day = "\(parts.year.zeroPadded(4))-\(parts.month.zeroPadded(2))-\(parts.day.zeroPadded(2)) \(parts.hour.zeroPadded(2)):\(parts.minute.zeroPadded(2))"
            return "\(day), weekday \(parts.weekday), day starts \(ISOTime.format(berlin.startOfDay(for: instant)))"
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
        // HTTP vendors' libcurl, loaded on first use rather than linked: present and usable.
        check("libcurl for HTTP vendors", "loads") { HTTPClient.libraryCheck() }
        return checks
    }

    /// The local time zone and its offset now (from `TZ` or /etc/localtime).
    public static func localTimeZone(now: Date = Date()) -> String {
        let zone = LocalZone.current
        return "\(zone.identifier) (\(offset(zone.secondsFromGMT(for: now))))"
    }

    static func describe(_ zone: LocalZone?, at date: Date) -> String {
        guard let zone else { return "unknown" }
        let season = zone.isDaylightSavingTime(for: date) ? "daylight saving" : "standard time"
        let next = zone.nextTransition(after: date).map { "next change \(ISOTime.format($0))" } ?? "no change ahead"
        return "\(offset(zone.secondsFromGMT(for: date))), \(season), \(next)"
    }

    static func offset(_ seconds: Int) -> String {
        let minutes = abs(seconds) / 60
        return "UTC\(seconds < 0 ? "-" : "+")\((minutes / 60).zeroPadded(2)):\((minutes % 60).zeroPadded(2))"
    }
}
