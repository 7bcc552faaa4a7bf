#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// A time zone read from the system's time zone database (`/usr/share/zoneinfo`, Debian's `tzdata`; `TZDIR`
/// overrides), in the TZif format of RFC 8536, versions 1 to 4.
///
/// Why not Foundation's `TimeZone`: on Linux its zones come from ICU (FoundationInternationalization), which is
/// the bulk of full Foundation's size in the installed binary, and whose built-in zone data ages with the binary.
/// The system's tzdata is updated by the distribution.
public struct LocalZone: Sendable, Hashable, CustomStringConvertible {
    /// The zone's name (`Europe/Berlin`), `UTC`, or the rule it was made from.
    public let identifier: String
    private let transitions: [Int64]
    /// The local time type that starts at each transition.
    private let transitionTypes: [UInt8]
    private let types: [LocalTimeType]
    /// The footer's rule: what holds after the last transition (all there is in a "slim" file).
    private let rule: POSIXZoneRule?

    struct LocalTimeType: Sendable, Equatable {
        var offset: Int
        var isDaylight: Bool
    }

    public var description: String { identifier }

    public func hash(into hasher: inout Hasher) { hasher.combine(identifier) }

    public static let utc = LocalZone(identifier: "UTC", transitions: [], transitionTypes: [], types: [LocalTimeType(offset: 0, isDaylight: false)], rule: nil)

    private init(identifier: String, transitions: [Int64], transitionTypes: [UInt8], types: [LocalTimeType], rule: POSIXZoneRule?) {
        self.identifier = identifier
        self.transitions = transitions
        self.transitionTypes = transitionTypes
        self.types = types
        self.rule = rule
    }

    // MARK: looking zones up

    /// The zone named `identifier` (`Europe/Berlin`, `UTC`), or nil when the database has no such zone. Names come
    /// from vendors too, so only a plain relative name is looked up (no `..`, no absolute path).
    public init?(identifier: String) {
        if identifier == "UTC" || identifier == "GMT" {
            self = .utc
            return
        }
        guard Self.isPlainName(identifier) else { return nil }
        if let cached = Self.cache.withLock({ $0[identifier] }) {
            self = cached
            return
        }
        guard let bytes = Self.read(Self.databaseDirectory + "/" + identifier),
              let zone = LocalZone(tzif: bytes, identifier: identifier) else { return nil }
        Self.cache.withLock { cache in
            // Bounded: names come from vendors.
            if cache.count >= 64 { cache.removeAll() }
            cache[identifier] = zone
        }
        self = zone
    }

    /// A zone from a POSIX `TZ` rule (`EST5EDT,M3.2.0,M11.1.0`); nil when `rule` is not one.
    public init?(rule text: String) {
        guard let rule = POSIXZoneRule(text) else { return nil }
        self.init(identifier: text, transitions: [], transitionTypes: [], types: [LocalTimeType(offset: rule.standardOffset, isDaylight: false)], rule: rule)
    }

    /// The zone of this machine: `TZ` when set (a name, a file, or a rule), else `/etc/localtime`, else UTC.
    public static var current: LocalZone { currentZone }

    private static let currentZone: LocalZone = {
        let environment = ProcessInfo.processInfo.environment
        if let tz = environment["TZ"], !tz.isEmpty {
            let name = tz.hasPrefix(":") ? String(tz.dropFirst()) : tz
            if name.hasPrefix("/") {
                if let bytes = read(name), let zone = LocalZone(tzif: bytes, identifier: zoneName(fromPath: name) ?? name) { return zone }
            } else if let zone = LocalZone(identifier: name) ?? LocalZone(rule: name) {
                return zone
            }
            return .utc
        }
        guard let bytes = read("/etc/localtime") else { return .utc }
        let name = resolvedLink("/etc/localtime").flatMap(zoneName(fromPath:))
            ?? (read("/etc/timezone").map { String(decoding: $0, as: UTF8.self).trimmingWhitespace() }.flatMap { $0.isEmpty ? nil : $0 })
            ?? "localtime"
        return LocalZone(tzif: bytes, identifier: name) ?? .utc
    }()

    private static let cache = Mutex<[String: LocalZone]>([:])

    static var databaseDirectory: String {
        ProcessInfo.processInfo.environment["TZDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/usr/share/zoneinfo"
    }

    static func isPlainName(_ name: String) -> Bool {
        !name.isEmpty && !name.hasPrefix("/") && name.utf8.count <= 255
            && name.split(separator: "/", omittingEmptySubsequences: false).allSatisfy { part in
                !part.isEmpty && part != "." && part != ".."
                    && part.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "_-+".unicodeScalars.contains($0)) }
            }
    }

    /// `…/zoneinfo/Europe/Berlin` → `Europe/Berlin`.
    static func zoneName(fromPath path: String) -> String? {
        guard let range = path.firstRange(of: "zoneinfo/") else { return nil }
        let name = String(path[range.upperBound...])
        return name.isEmpty ? nil : name
    }

    private static func resolvedLink(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink(path, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// A small file's bytes (a TZif file is a few KB; more than 1 MB is not one).
    private static func read(_ path: String) -> [UInt8]? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 8192)
        while bytes.count <= 1 << 20 {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return count == 0 ? bytes : nil }
            bytes += chunk[0..<count]
        }
        return nil
    }

    // MARK: the TZif format

    /// Parses a TZif file; nil when it is not one.
    init?(tzif bytes: [UInt8], identifier: String) {
        var reader = TZifReader(bytes: bytes)
        guard let first = reader.header() else { return nil }
        var header = first
        var timeSize = 4
        if first.version >= 2 {
            // Skip the 32-bit block; the 64-bit one follows with its own header.
            guard reader.skip(first.blockSize(timeSize: 4)), let second = reader.header() else { return nil }
            header = second
            timeSize = 8
        }
        guard header.typeCount > 0, header.typeCount <= 256, header.timeCount <= 100_000 else { return nil }
        var transitions: [Int64] = []
        transitions.reserveCapacity(header.timeCount)
        for _ in 0..<header.timeCount {
            guard let time = timeSize == 8 ? reader.int64() : reader.int32().map(Int64.init) else { return nil }
            transitions.append(time)
        }
        var transitionTypes: [UInt8] = []
        for _ in 0..<header.timeCount {
            guard let type = reader.byte(), Int(type) < header.typeCount else { return nil }
            transitionTypes.append(type)
        }
        var types: [LocalTimeType] = []
        for _ in 0..<header.typeCount {
            guard let offset = reader.int32(), let isDaylight = reader.byte(), reader.byte() != nil else { return nil }
            types.append(LocalTimeType(offset: Int(offset), isDaylight: isDaylight != 0))
        }
        guard reader.skip(header.characterCount + header.leapCount * (timeSize + 4) + header.standardCount + header.universalCount) else { return nil }
        var rule: POSIXZoneRule?
        if header.version >= 2, reader.byte() == UInt8(ascii: "\n"), let footer = reader.line() {
            rule = footer.isEmpty ? nil : POSIXZoneRule(footer)
        }
        self.init(identifier: identifier, transitions: transitions, transitionTypes: transitionTypes, types: types, rule: rule)
    }

    // MARK: answers

    /// Seconds east of UTC at `date`.
    public func secondsFromGMT(for date: Date) -> Int { localTimeType(at: Self.seconds(date)).offset }

    public func isDaylightSavingTime(for date: Date) -> Bool { localTimeType(at: Self.seconds(date)).isDaylight }

    /// The next instant after `date` at which the offset or daylight saving time changes; nil when none is known.
    public func nextTransition(after date: Date) -> Date? {
        let instant = Self.seconds(date)
        var current = localTimeType(at: instant)
        // Explicit transitions first (some only rename the zone's abbreviation: those are not changes).
        var index = transitions.partitionPoint { $0 <= instant }
        while index < transitions.count {
            let type = types[Int(transitionTypes[index])]
            if type != current { return Date(timeIntervalSince1970: Double(transitions[index])) }
            current = type
            index += 1
        }
        guard let rule else { return nil }
        var from = max(instant, transitions.last ?? instant)
        // A rule's change can leave the type as it was (the first change after a file's last transition): skip those.
        for _ in 0..<4 {
            guard let next = rule.nextChange(after: from) else { return nil }
            let after = rule.offset(at: next)
            if LocalTimeType(offset: after.offset, isDaylight: after.isDaylight) != current {
                return Date(timeIntervalSince1970: Double(next))
            }
            from = next
        }
        return nil
    }

    /// The local calendar date and time at `date`.
    public func components(of date: Date) -> LocalDateTime {
        let instant = Self.seconds(date)
        let local = instant + Int64(localTimeType(at: instant).offset)
        let days = CivilDate.floorDivide(local, 86_400)
        let civil = CivilDate(days: days)
        let second = Int(local - days * 86_400)
        return LocalDateTime(year: civil.year, month: civil.month, day: civil.day, hour: second / 3600, minute: second / 60 % 60,
                             second: second % 60, weekday: CivilDate.weekday(days) + 1)
    }

    /// The first instant of `date`'s local day (midnight, or the end of a gap that swallowed midnight).
    public func startOfDay(for date: Date) -> Date {
        let instant = Self.seconds(date)
        let local = instant + Int64(localTimeType(at: instant).offset)
        let midnight = CivilDate.floorDivide(local, 86_400) * 86_400
        // Midnight at the offsets in force a day either side: the one that maps back to midnight is it.
        let candidates = [instant, instant - 86_400, instant + 86_400].map { midnight - Int64(localTimeType(at: $0).offset) }
        let exact = candidates.filter { $0 + Int64(localTimeType(at: $0).offset) == midnight }
        if let first = exact.min() { return Date(timeIntervalSince1970: Double(first)) }
        // No local midnight that day: the day starts at the transition that skipped it.
        let transition = nextTransition(after: Date(timeIntervalSince1970: Double((candidates.min() ?? instant) - 1)))
        return transition ?? Date(timeIntervalSince1970: Double(candidates.min() ?? instant))
    }

    func localTimeType(at instant: Int64) -> LocalTimeType {
        guard let last = transitions.last, instant >= transitions[0] else {
            // Before the first transition: RFC 8536 says type 0; with no transitions at all the footer rules.
            if transitions.isEmpty, let rule {
                let answer = rule.offset(at: instant)
                return LocalTimeType(offset: answer.offset, isDaylight: answer.isDaylight)
            }
            return types[0]
        }
        if instant >= last, let rule {
            let answer = rule.offset(at: instant)
            return LocalTimeType(offset: answer.offset, isDaylight: answer.isDaylight)
        }
        let index = transitions.partitionPoint { $0 <= instant } - 1
        return types[Int(transitionTypes[index])]
    }

    static func seconds(_ date: Date) -> Int64 {
        let value = date.timeIntervalSince1970.rounded(.down)
        guard value.isFinite else { return 0 }
        return Int64(max(-1e17, min(1e17, value)))
    }
}

/// A local calendar date and time (Gregorian), as `LocalZone.components(of:)` gives it.
public struct LocalDateTime: Sendable, Equatable {
    public var year: Int
    public var month: Int
    public var day: Int
    public var hour: Int
    public var minute: Int
    public var second: Int
    /// 1 Sunday … 7 Saturday, as Foundation's `Calendar` counts.
    public var weekday: Int
}

extension Array where Element == Int64 {
    /// The index of the first element for which `belongs` is false (the array is partitioned by it).
    fileprivate func partitionPoint(_ belongs: (Int64) -> Bool) -> Int {
        var low = 0, high = count
        while low < high {
            let middle = (low + high) / 2
            if belongs(self[middle]) { low = middle + 1 } else { high = middle }
        }
        return low
    }
}

/// Reads a TZif file's big-endian fields.
private struct TZifReader {
    let bytes: [UInt8]
    var index = 0

    struct Header {
        var version: Int
        var universalCount: Int
        var standardCount: Int
        var leapCount: Int
        var timeCount: Int
        var typeCount: Int
        var characterCount: Int

        func blockSize(timeSize: Int) -> Int {
            timeCount * timeSize + timeCount + typeCount * 6 + characterCount + leapCount * (timeSize + 4) + standardCount + universalCount
        }
    }

    mutating func header() -> Header? {
        guard index + 44 <= bytes.count, bytes[index..<index + 4].elementsEqual("TZif".utf8) else { return nil }
        let versionByte = bytes[index + 4]
        let version = versionByte == 0 ? 1 : Int(versionByte) - Int(UInt8(ascii: "0"))
        guard (1...9).contains(version) else { return nil }
        index += 20
        var counts: [Int] = []
        for _ in 0..<6 {
            guard let count = int32(), count >= 0 else { return nil }
            counts.append(Int(count))
        }
        return Header(version: version, universalCount: counts[0], standardCount: counts[1], leapCount: counts[2],
                      timeCount: counts[3], typeCount: counts[4], characterCount: counts[5])
    }

    mutating func skip(_ count: Int) -> Bool {
        guard count >= 0, index + count <= bytes.count else { return false }
        index += count
        return true
    }

    mutating func byte() -> UInt8? {
        guard index < bytes.count else { return nil }
        defer { index += 1 }
        return bytes[index]
    }

    mutating func int32() -> Int32? {
        guard index + 4 <= bytes.count else { return nil }
        defer { index += 4 }
        return bytes[index..<index + 4].reduce(Int32(0)) { ($0 << 8) | Int32($1) }
    }

    mutating func int64() -> Int64? {
        guard index + 8 <= bytes.count else { return nil }
        defer { index += 8 }
        return bytes[index..<index + 8].reduce(Int64(0)) { ($0 << 8) | Int64($1) }
    }

    /// The bytes up to the next newline (the footer); nil when there is none.
    mutating func line() -> String? {
        guard let end = bytes[index...].firstIndex(of: UInt8(ascii: "\n")) else { return nil }
        defer { index = end + 1 }
        return String(decoding: bytes[index..<end], as: UTF8.self)
    }
}
