/// A POSIX `TZ` rule, as in a TZif file's footer (`CET-1CEST,M3.5.0,M10.5.0/3`): the standard offset, and when
/// there is daylight saving time its offset and the two yearly changes. RFC 8536 §3.3 and POSIX.1 §8.3, with
/// TZif version 3's extension (change times from -167 to 167 hours).
struct POSIXZoneRule: Sendable, Equatable {
    /// Seconds east of UTC (POSIX writes them west: `CET-1` is UTC+1).
    var standardOffset: Int
    var daylight: Daylight?

    struct Daylight: Sendable, Equatable {
        var offset: Int
        var start: Change
        var end: Change
    }

    /// A yearly change: a day of the year and the local time (seconds after midnight; the start counts in standard
    /// time, the end in daylight time).
    struct Change: Sendable, Equatable {
        enum Day: Sendable, Equatable {
            /// `Jn`: 1…365, February 29 never counted.
            case julianNoLeap(Int)
            /// `n`: 0…365, February 29 counted.
            case zeroBased(Int)
            /// `Mm.w.d`: weekday `d` (0 Sunday) of week `w` (5: the last) of month `m`.
            case monthWeekDay(month: Int, week: Int, weekday: Int)
        }

        var day: Day
        var time: Int

        /// The change's instant in `year`, with the local time counted at `offset`.
        func instant(year: Int, offset: Int) -> Int64 {
            let days: Int64
            switch day {
            case .julianNoLeap(let n):
                // Day n of a 365-day year: after February in a leap year, one day later in the calendar.
                let base = CivilDate.days(year: year, month: 1, day: 1) + Int64(n - 1)
                days = base + (CivilDate.isLeap(year) && n >= 60 ? 1 : 0)
            case .zeroBased(let n):
                days = CivilDate.days(year: year, month: 1, day: 1) + Int64(n)
            case .monthWeekDay(let month, let week, let weekday):
                let first = CivilDate.days(year: year, month: month, day: 1)
                var day = first + Int64((weekday - CivilDate.weekday(first) + 7) % 7)
                day += Int64(7 * (week - 1))
                let length = Int64(CivilDate.daysIn(month: month, year: year))
                while day >= first + length { day -= 7 }
                days = day
            }
            return days * 86_400 + Int64(time - offset)
        }
    }

    /// The offset and whether it is daylight saving time at `instant` (seconds since 1970, UTC).
    func offset(at instant: Int64) -> (offset: Int, isDaylight: Bool) {
        guard let daylight else { return (standardOffset, false) }
        let year = CivilDate(days: CivilDate.floorDivide(instant + Int64(standardOffset), 86_400)).year
        let start = daylight.start.instant(year: year, offset: standardOffset)
        let end = daylight.end.instant(year: year, offset: daylight.offset)
        let inDaylight = start < end ? (start <= instant && instant < end) : !(end <= instant && instant < start)
        return inDaylight ? (daylight.offset, true) : (standardOffset, false)
    }

    /// The first change strictly after `instant`; nil without daylight saving time.
    func nextChange(after instant: Int64) -> Int64? {
        guard let daylight else { return nil }
        let year = CivilDate(days: CivilDate.floorDivide(instant + Int64(standardOffset), 86_400)).year
        var candidates: [Int64] = []
        for candidateYear in (year - 1)...(year + 1) {
            candidates.append(daylight.start.instant(year: candidateYear, offset: standardOffset))
            candidates.append(daylight.end.instant(year: candidateYear, offset: daylight.offset))
        }
        return candidates.filter { $0 > instant }.min()
    }

    // MARK: reading

    /// Parses a rule; nil when `text` is not one.
    init?(_ text: String) {
        var scanner = RuleScanner(Array(text.utf8))
        guard scanner.name() != nil, let standard = scanner.offset() else { return nil }
        standardOffset = -standard
        if scanner.atEnd {
            daylight = nil
            return
        }
        guard scanner.name() != nil else { return nil }
        var daylightOffset = standardOffset + 3600
        if let explicit = scanner.offset() { daylightOffset = -explicit }
        // No rule given: POSIX leaves it to the implementation; tzcode uses the US rules (M3.2.0,M11.1.0).
        guard !scanner.atEnd else {
            daylight = Daylight(offset: daylightOffset,
                                start: Change(day: .monthWeekDay(month: 3, week: 2, weekday: 0), time: 7200),
                                end: Change(day: .monthWeekDay(month: 11, week: 1, weekday: 0), time: 7200))
            return
        }
        guard scanner.take(UInt8(ascii: ",")), let start = scanner.change(), scanner.take(UInt8(ascii: ",")),
              let end = scanner.change(), scanner.atEnd else { return nil }
        daylight = Daylight(offset: daylightOffset, start: start, end: end)
    }
}

/// Reads the parts of a POSIX `TZ` rule.
private struct RuleScanner {
    let bytes: [UInt8]
    var index = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var atEnd: Bool { index == bytes.count }

    mutating func take(_ byte: UInt8) -> Bool {
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    /// `CET`, or a quoted `<+0530>`.
    mutating func name() -> String? {
        let start = index
        if take(UInt8(ascii: "<")) {
            while index < bytes.count, bytes[index] != UInt8(ascii: ">") { index += 1 }
            guard take(UInt8(ascii: ">")), index - start >= 5 else { return nil }
        } else {
            while index < bytes.count, (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(bytes[index] & 0xDF) { index += 1 }
            guard index - start >= 3 else { return nil }
        }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    /// `[+-]hh[:mm[:ss]]` in seconds; nil (nothing consumed) when there is none.
    mutating func offset() -> Int? {
        let start = index
        var sign = 1
        if take(UInt8(ascii: "-")) { sign = -1 } else { _ = take(UInt8(ascii: "+")) }
        guard let seconds = time() else {
            index = start
            return nil
        }
        return sign * seconds
    }

    /// `hh[:mm[:ss]]` in seconds.
    mutating func time() -> Int? {
        guard let hours = number(maxDigits: 3), hours <= 167 else { return nil }
        var seconds = hours * 3600
        if take(UInt8(ascii: ":")) {
            guard let minutes = number(maxDigits: 2), minutes < 60 else { return nil }
            seconds += minutes * 60
            if take(UInt8(ascii: ":")) {
                guard let rest = number(maxDigits: 2), rest < 60 else { return nil }
                seconds += rest
            }
        }
        return seconds
    }

    mutating func number(maxDigits: Int) -> Int? {
        var value = 0, digits = 0
        while index < bytes.count, digits < maxDigits, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
            value = value * 10 + Int(bytes[index] - UInt8(ascii: "0"))
            index += 1
            digits += 1
        }
        return digits == 0 ? nil : value
    }

    /// `Jn`, `n` or `Mm.w.d`, then an optional `/time` (02:00 when absent; TZif v3 allows a sign and up to 167 h).
    mutating func change() -> POSIXZoneRule.Change? {
        let day: POSIXZoneRule.Change.Day
        if take(UInt8(ascii: "M")) {
            guard let month = number(maxDigits: 2), (1...12).contains(month), take(UInt8(ascii: ".")),
                  let week = number(maxDigits: 1), (1...5).contains(week), take(UInt8(ascii: ".")),
                  let weekday = number(maxDigits: 1), (0...6).contains(weekday) else { return nil }
            day = .monthWeekDay(month: month, week: week, weekday: weekday)
        } else if take(UInt8(ascii: "J")) {
            guard let n = number(maxDigits: 3), (1...365).contains(n) else { return nil }
            day = .julianNoLeap(n)
        } else {
            guard let n = number(maxDigits: 3), (0...365).contains(n) else { return nil }
            day = .zeroBased(n)
        }
        var time = 7200
        if take(UInt8(ascii: "/")) {
            guard let explicit = offset() else { return nil }
            time = explicit
        }
        return POSIXZoneRule.Change(day: day, time: time)
    }
}
