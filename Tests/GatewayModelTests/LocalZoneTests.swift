import Foundation
@testable import GatewayModel
import Testing

/// `LocalZone` reads the system's tzdata itself (Foundation's zones need ICU, which the installed binary leaves
/// out). The tests' Foundation still has ICU's zones: every answer is compared with it, zone by zone.
@Suite struct LocalZoneTests {
    /// Zones with DST in either hemisphere, half- and quarter-hour offsets, a 30-minute DST shift, DST at midnight,
    /// and zones without DST; none changed its rules between ICU 76's data and Debian 12's tzdata.
    static let zones = [
        "Europe/Berlin", "Europe/London", "America/New_York", "America/Los_Angeles", "America/St_Johns", "America/Havana",
        "America/Santiago", "America/Sao_Paulo", "Australia/Sydney", "Australia/Lord_Howe", "Australia/Adelaide",
        "Pacific/Auckland", "Pacific/Chatham", "Asia/Kolkata", "Asia/Kathmandu", "Asia/Tokyo", "Asia/Tehran",
        "Africa/Johannesburg", "America/Phoenix", "Pacific/Honolulu", "Atlantic/Azores", "UTC", "Etc/GMT+5",
    ]

    /// Instants from 1990 to 2035: every 5 days and 7 hours, so every hour of the day and every weekday come up.
    static let instants: [Date] = stride(from: 631_152_000.0, to: 2_051_222_400, by: 5 * 86_400 + 7 * 3600 + 17).map(Date.init(timeIntervalSince1970:))

    @Test(arguments: zones) func offsetsAndLocalTimesAgreeWithICU(_ name: String) throws {
        let zone = try #require(LocalZone(identifier: name), "\(name) not in /usr/share/zoneinfo")
        let reference = try #require(TimeZone(identifier: name))
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = reference
        for instant in Self.instants {
            #expect(zone.secondsFromGMT(for: instant) == reference.secondsFromGMT(for: instant), "\(name) at \(instant)")
            let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second, .weekday], from: instant)
            let local = zone.components(of: instant)
            #expect([local.year, local.month, local.day, local.hour, local.minute, local.second, local.weekday]
                    == [parts.year, parts.month, parts.day, parts.hour, parts.minute, parts.second, parts.weekday].map { $0 ?? -1 },
                    "\(name) at \(instant)")
            #expect(zone.startOfDay(for: instant) == calendar.startOfDay(for: instant), "\(name) start of day of \(instant)")
        }
    }

    @Test(arguments: zones) func daylightSavingAndNextChangeAgreeWithICU(_ name: String) throws {
        let zone = try #require(LocalZone(identifier: name))
        let reference = try #require(TimeZone(identifier: name))
        // From 2000: ICU's answers before that follow older rules for some zones' DST flags.
        for instant in Self.instants where instant.timeIntervalSince1970 > 946_684_800 && instant.timeIntervalSince1970 < 2_000_000_000 {
            #expect(zone.isDaylightSavingTime(for: instant) == reference.isDaylightSavingTime(for: instant), "\(name) at \(instant)")
            #expect(zone.nextTransition(after: instant) == reference.nextDaylightSavingTimeTransition(after: instant), "\(name) after \(instant)")
        }
    }

    @Test func aSlimFileIsReadFromItsFooterAlone() throws {
        // RFC 8536 v2, no transitions, one type (CET), and the rule: what `zic -b slim` writes for a zone like Berlin's.
        let slim = try #require(LocalZone(tzif: Self.slimFile(footer: "CET-1CEST,M3.5.0,M10.5.0/3"), identifier: "Slim/Berlin"))
        let berlin = try #require(LocalZone(identifier: "Europe/Berlin"))
        for instant in Self.instants where instant.timeIntervalSince1970 > 852_076_800 {  // Berlin's rule holds since 1997
            #expect(slim.secondsFromGMT(for: instant) == berlin.secondsFromGMT(for: instant))
            #expect(slim.isDaylightSavingTime(for: instant) == berlin.isDaylightSavingTime(for: instant))
            #expect(slim.nextTransition(after: instant) == berlin.nextTransition(after: instant))
        }
    }

    @Test func rulesInTheirVariousForms() throws {
        // Offsets only, quoted names, minutes, Julian days, zero-based days, a TZif v3 change time past 24 h.
        #expect(try #require(LocalZone(rule: "<+0530>-5:30")).secondsFromGMT(for: Date(timeIntervalSince1970: 0)) == 19_800)
        let newYork = try #require(LocalZone(rule: "EST5EDT,M3.2.0,M11.1.0"))
        #expect(newYork.secondsFromGMT(for: Date(timeIntervalSince1970: 1_750_000_000)) == -14_400)
        #expect(newYork.secondsFromGMT(for: Date(timeIntervalSince1970: 1_767_225_600)) == -18_000)
        // J60 is March 1 in every year; 59 (zero-based) is February 29 in a leap year, March 1 otherwise.
        let julian = try #require(LocalZone(rule: "AAA0BBB,J60/0,J300/0"))
        #expect(julian.nextTransition(after: Date(timeIntervalSince1970: 1_709_164_800)) == Date(timeIntervalSince1970: 1_709_251_200))  // 2024-03-01
        let zeroBased = try #require(LocalZone(rule: "AAA0BBB,59/0,300/0"))
        #expect(zeroBased.nextTransition(after: Date(timeIntervalSince1970: 1_709_078_400)) == Date(timeIntervalSince1970: 1_709_164_800))  // 2024-02-29
        // Greenland's rule (TZif v3): DST from the last Saturday of March at 22:00 (-2 h) to the next day's 23:00 (-1 h).
        #expect(LocalZone(rule: "<-02>2<-01>,M3.5.0/-1,M10.5.0/0") != nil)
        #expect(LocalZone(rule: "<-03>3<-02>,M3.5.0/25,M10.5.0/24") != nil)
        for broken in ["", "X", "CET", "CET-1CEST,M13.5.0,M10.5.0", "CET-1CEST,M3.5.0", "CET-1CEST,M3.5.0,M10.5.0/168", "<+05", "CET-1CEST,M3.5.7,M10.5.0"] {
            #expect(LocalZone(rule: broken) == nil, "\(broken)")
        }
    }

    @Test func namesFromVendorsNeverLeaveTheDatabase() {
        for name in ["../../etc/passwd", "/etc/localtime", "Europe/../../../etc/passwd", "Europe//Berlin", "./UTC", "", "Europe/Berlin\0", "Nope/Nowhere"] {
            #expect(LocalZone(identifier: name) == nil, "\(name)")
        }
        #expect(LocalZone.isPlainName("America/Argentina/Buenos_Aires") && LocalZone.isPlainName("Etc/GMT+5"))
    }

    @Test func aDamagedFileIsNoZone() throws {
        let bytes = try #require(FileManager.default.contents(atPath: "/usr/share/zoneinfo/Europe/Berlin")).map { $0 }
        #expect(LocalZone(tzif: bytes, identifier: "x") != nil)
        for length in [0, 4, 43, 44, 100, bytes.count / 2] {
            #expect(LocalZone(tzif: Array(bytes.prefix(length)), identifier: "x") == nil, "cut at \(length)")
        }
        #expect(LocalZone(tzif: Array("not a zone file at all, but long enough to have a header of 44 bytes".utf8), identifier: "x") == nil)
        // The first transition's type index in the 64-bit block, set beyond the type count.
        func count(_ header: Int, _ field: Int) -> Int { bytes[header + 20 + field * 4 ..< header + 24 + field * 4].reduce(0) { $0 << 8 | Int($1) } }
        let v1Size = count(0, 3) * 5 + count(0, 4) * 6 + count(0, 5) + count(0, 2) * 8 + count(0, 1) + count(0, 0)
        let second = 44 + v1Size
        #expect(bytes[second..<second + 4].elementsEqual("TZif".utf8))
        var wrongType = bytes
        wrongType[second + 44 + count(second, 3) * 8] = 255
        #expect(count(second, 3) > 0 && LocalZone(tzif: wrongType, identifier: "x") == nil)
    }

    @Test func aDailyWindowAcrossMidnightInBerlin() throws {
        let berlin = try #require(LocalZone(identifier: "Europe/Berlin"))
        let window = try #require(DailyWindow("22:55-00:30", timeZone: berlin))
        // 2025-01-15: Berlin is UTC+1. 21:56Z = 22:56 in, 23:29Z = 00:29 in, 23:31Z = 00:31 out, 21:54Z = 22:54 out.
        let day = 1_736_899_200.0
        let minutes: [Double] = [21 * 60 + 56, 23 * 60 + 29, 23 * 60 + 31, 21 * 60 + 54]
        let inside = minutes.map { window.contains(Date(timeIntervalSince1970: day + $0 * 60)) }
        #expect(inside == [true, true, false, false])
    }

    /// A TZif v2 file with no transitions, one local time type (UTC+1, "CET") and `footer`.
    static func slimFile(footer: String) -> [UInt8] {
        func be32(_ value: Int32) -> [UInt8] { withUnsafeBytes(of: value.bigEndian, Array.init) }
        // Magic, version, 15 reserved bytes, then the counts: UT/local and standard/wall indicators, leap seconds,
        // transitions, local time types, designation characters.
        var header: [UInt8] = Array("TZif2".utf8) + [UInt8](repeating: 0, count: 15)
        for count: Int32 in [0, 0, 0, 0, 1, 4] { header += be32(count) }
        let block: [UInt8] = be32(3600) + [0, 0] + Array("CET\0".utf8)
        var file = header + block
        file += header + block
        return file + Array("\n\(footer)\n".utf8)
    }
}
