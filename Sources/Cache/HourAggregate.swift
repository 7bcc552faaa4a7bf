/// The identity of one time series in the `series` table.
struct SeriesKey: Hashable, Sendable {
    var deviceID: String
    var key: String
    var kind: ReadingKind
    var category: ReadingCategory

    init(_ reading: Reading) {
        deviceID = reading.deviceID
        key = reading.key
        kind = reading.kind
        category = reading.category
    }
}

/// A sample from the database: time and value.
struct Sample: Sendable, Equatable {
    var time: Double
    var value: Double
}

/// Stored times must lie within ±`timeLimit` seconds of 1970 (about ±3,000 years), so hour
/// arithmetic on `Int64` can never overflow.
let timeLimit = 1e11

/// The start (Unix seconds, UTC) of the hour that contains `time`, with `time` clamped to ±`timeLimit`.
func hourStart(of time: Double) -> Int64 {
    let bounded = time.isNaN ? 0 : Swift.min(Swift.max(time, -timeLimit), timeLimit)
    return Int64((bounded / 3600).rounded(.down)) * 3600
}

/// Running aggregate of one hour of one series. Roll-up and hourly history use this one type, so a
/// point reads the same whether it was served from raw samples or from the stored roll-up.
struct HourAggregate: Sendable, Equatable {
    var hourStart: Int64
    var min: Double
    var max: Double
    var total: Double
    var count: Int
    var last: Double
    var lastTime: Double
    /// Sum of positive increases (counters only), `nil` for measurements.
    var increase: Double?

    /// Starts an hour with its first sample; `previous` is the series' sample before it, if known.
    init(first sample: Sample, kind: ReadingKind, previous: Double?) {
        hourStart = Cache.hourStart(of: sample.time)
        min = sample.value
        max = sample.value
        total = sample.value
        count = 1
        last = sample.value
        lastTime = sample.time
        if kind == .counter {
            // The step from the previous hour's last sample belongs to the hour in which it shows up.
            increase = previous.map { Swift.max(0, sample.value - $0) } ?? 0
        }
    }

    /// Creates an aggregate from stored columns.
    init(hourStart: Int64, min: Double, max: Double, avg: Double, last: Double, lastTime: Double, sum: Double?, count: Int) {
        self.hourStart = hourStart
        self.min = min
        self.max = max
        self.total = avg * Double(count)
        self.count = count
        self.last = last
        self.lastTime = lastTime
        self.increase = sum
    }

    var avg: Double { count > 0 ? total / Double(count) : last }

    /// Adds a later sample of the same hour.
    mutating func add(_ sample: Sample) {
        if increase != nil {
            // A decrease is a meter reset or a glitch: it adds nothing rather than a negative step.
            increase = (increase ?? 0) + Swift.max(0, sample.value - last)
        }
        min = Swift.min(min, sample.value)
        max = Swift.max(max, sample.value)
        total += sample.value
        count += 1
        last = sample.value
        lastTime = sample.time
    }

    /// Combines two aggregates of the same hour (a roll-up and samples that arrived late).
    func merged(with other: HourAggregate) -> HourAggregate {
        var result = self
        result.min = Swift.min(min, other.min)
        result.max = Swift.max(max, other.max)
        result.total = total + other.total
        result.count = count + other.count
        if other.lastTime >= lastTime {
            result.last = other.last
            result.lastTime = other.lastTime
        }
        switch (increase, other.increase) {
        case let (mine?, theirs?): result.increase = mine + theirs
        case (nil, let theirs): result.increase = theirs
        case (let mine, nil): result.increase = mine
        }
        return result
    }

    var point: HistoryPoint {
        HistoryPoint(time: Double(hourStart), min: min, max: max, avg: avg, last: last, sum: increase, count: count)
    }

    /// Folds time-ordered samples into hourly aggregates, chaining counter increases across hours.
    static func aggregate(_ samples: [Sample], kind: ReadingKind, previous: Double?) -> [HourAggregate] {
        var hours: [HourAggregate] = []
        var previousValue = previous
        for sample in samples {
            if var current = hours.last, current.hourStart == Cache.hourStart(of: sample.time) {
                current.add(sample)
                hours[hours.count - 1] = current
            } else {
                hours.append(HourAggregate(first: sample, kind: kind, previous: previousValue))
            }
            previousValue = sample.value
        }
        return hours
    }
}
