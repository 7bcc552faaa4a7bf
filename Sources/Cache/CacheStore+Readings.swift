import Synchronization

extension CacheStore {
    /// Appends readings in ONE transaction; returns how many were stored.
    ///
    /// Readings with a non-finite value, a time beyond ±3,000 years, or an empty device id or key, are skipped instead of
    /// failing the batch. A second reading of the same series at the same time replaces the first.
    @discardableResult
    public func appendReadings(_ readings: [Reading]) throws(CacheError) -> Int {
        let valid = readings.filter(Self.isStorable)
        guard !valid.isEmpty else { return 0 }
        let known = seriesIDs.withLock { $0 }
        let created = try write("append readings") { db in
            try Self.insert(valid, into: db, knownSeries: known)
        }
        rememberSeries(created)
        return valid.count
    }

    /// The history of one key of one device in `[from, to)`, oldest first.
    ///
    /// `.hourly` returns one point per hour whose start lies in the range: stored roll-ups merged with
    /// raw samples that were not rolled up yet.
    public func history(
        deviceID: String, key: String, from: Double, to: Double, resolution: HistoryResolution
    ) throws(CacheError) -> [HistoryPoint] {
        guard from.isFinite, to.isFinite else { throw CacheError(.invalidInput, "history range must be finite") }
        guard from < to else { return [] }
        return try read("read history") { db in
            guard let series = try SQLiteRow.fetchOne(
                db, sql: "SELECT id, kind FROM series WHERE device_id = ? AND key = ?", arguments: [deviceID, key])
            else { return [] }
            let seriesID = try series.decode(Int64.self, atIndex: 0)
            let kind = ReadingKind(rawValue: try series.decode(String.self, atIndex: 1)) ?? .measurement

            switch resolution {
            case .raw:
                return try Self.samples(db, seriesID: seriesID, from: from, to: to).map {
                    HistoryPoint.raw(time: $0.time, value: $0.value)
                }
            case .hourly:
                let firstHour = hourStart(of: from)
                let lastHourEnd = Double(hourStart(of: to)) + (Double(hourStart(of: to)) < to ? 3600 : 0)
                let samples = try Self.samples(db, seriesID: seriesID, from: Double(firstHour), to: lastHourEnd)
                let previous = try samples.first.map { try Self.previousValue(db, seriesID: seriesID, before: $0.time) } ?? nil
                var byHour: [Int64: HourAggregate] = [:]
                for hour in try Self.storedHours(db, seriesID: seriesID, from: firstHour, to: to) {
                    byHour[hour.hourStart] = hour
                }
                for hour in HourAggregate.aggregate(samples, kind: kind, previous: previous) {
                    byHour[hour.hourStart] = byHour[hour.hourStart].map { $0.merged(with: hour) } ?? hour
                }
                return byHour.values.sorted { $0.hourStart < $1.hourStart }.map(\.point)
            }
        }
    }

    // MARK: - Internals shared with retention

    static func isStorable(_ reading: Reading) -> Bool {
        abs(reading.time) < timeLimit && reading.value.isFinite && !reading.deviceID.isEmpty && !reading.key.isEmpty
    }

    func rememberSeries(_ created: [SeriesKey: Int64]) {
        guard !created.isEmpty else { return }
        seriesIDs.withLock { $0.merge(created) { _, new in new } }
    }

    /// Inserts readings; returns the series ids it had to look up or create (to cache after commit).
    static func insert(_ readings: [Reading], into db: SQLiteConnection, knownSeries: [SeriesKey: Int64]) throws -> [SeriesKey: Int64] {
        let insertReading = try db.cachedStatement(sql: """
            INSERT INTO reading (series_id, time, value) VALUES (?, ?, ?)
            ON CONFLICT (series_id, time) DO UPDATE SET value = excluded.value
            """)
        let upsertSeries = try db.cachedStatement(sql: """
            INSERT INTO series (device_id, key, kind, category) VALUES (?, ?, ?, ?)
            ON CONFLICT (device_id, key) DO UPDATE SET kind = excluded.kind, category = excluded.category
            RETURNING id
            """)
        var created: [SeriesKey: Int64] = [:]
        for reading in readings {
            let seriesKey = SeriesKey(reading)
            let seriesID: Int64
            if let id = knownSeries[seriesKey] ?? created[seriesKey] {
                seriesID = id
            } else {
                guard let id = try Int64.fetchOne(
                    upsertSeries,
                    arguments: [reading.deviceID, reading.key, reading.kind.rawValue, reading.category.rawValue])
                else {
                    throw CacheError(.databaseError, "series upsert returned no id")
                }
                seriesID = id
                created[seriesKey] = id
            }
            try insertReading.execute(arguments: [seriesID, reading.time, reading.value])
        }
        return created
    }

    /// Raw samples of a series in `[from, to)`, oldest first.
    static func samples(_ db: SQLiteConnection, seriesID: Int64, from: Double, to: Double) throws -> [Sample] {
        let statement = try db.cachedStatement(sql: """
            SELECT time, value FROM reading WHERE series_id = ? AND time >= ? AND time < ? ORDER BY time
            """)
        var samples: [Sample] = []
        let cursor = try SQLiteRow.fetchCursor(statement, arguments: [seriesID, from, to])
        while let row = try cursor.next() {
            samples.append(Sample(time: try row.decode(Double.self, atIndex: 0), value: try row.decode(Double.self, atIndex: 1)))
        }
        return samples
    }

    /// Stored hourly aggregates of a series with `from <= hour_start < to`.
    static func storedHours(_ db: SQLiteConnection, seriesID: Int64, from: Int64, to: Double) throws -> [HourAggregate] {
        let statement = try db.cachedStatement(sql: """
            SELECT hour_start, min, max, avg, last, last_time, sum, count FROM reading_hourly
            WHERE series_id = ? AND hour_start >= ? AND hour_start < ? ORDER BY hour_start
            """)
        return try SQLiteRow.fetchAll(statement, arguments: [seriesID, from, to]).map { row in
            HourAggregate(
                hourStart: try row.decode(Int64.self, atIndex: 0),
                min: try row.decode(Double.self, atIndex: 1),
                max: try row.decode(Double.self, atIndex: 2),
                avg: try row.decode(Double.self, atIndex: 3),
                last: try row.decode(Double.self, atIndex: 4),
                lastTime: try row.decode(Double.self, atIndex: 5),
                sum: try row.decode(Double?.self, atIndex: 6),
                count: try row.decode(Int.self, atIndex: 7))
        }
    }

    /// The series' latest value before `time`: a raw sample, or the last value of an earlier roll-up.
    static func previousValue(_ db: SQLiteConnection, seriesID: Int64, before time: Double) throws -> Double? {
        let raw = try SQLiteRow.fetchOne(
            db.cachedStatement(sql: "SELECT time, value FROM reading WHERE series_id = ? AND time < ? ORDER BY time DESC LIMIT 1"),
            arguments: [seriesID, time])
        let rolled = try SQLiteRow.fetchOne(
            db.cachedStatement(sql: """
                SELECT last_time, last FROM reading_hourly WHERE series_id = ? AND hour_start < ?
                ORDER BY hour_start DESC LIMIT 1
                """),
            arguments: [seriesID, hourStart(of: time)])
        let candidates = try [raw, rolled].compactMap { row in
            try row.map { Sample(time: try $0.decode(Double.self, atIndex: 0), value: try $0.decode(Double.self, atIndex: 1)) }
        }
        return candidates.filter { $0.time < time }.max { $0.time < $1.time }?.value
    }
}
