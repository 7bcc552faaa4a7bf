extension CacheStore {
    /// One bounded step of retention (seeds 004 §6), in one short write transaction.
    ///
    /// In order, while the budget of `maxRows` lasts: rolls complete hours of raw readings older than
    /// `policy.rawReadings` into `reading_hourly` and deletes those raw rows; deletes hourly aggregates
    /// older than their category's age; deletes finished outbox rows older than `policy.completedOutbox`.
    /// Call it periodically (or until `finished`); roll-up and deletion commit together, so a repeated or
    /// interrupted run never counts a sample twice. One hour of one series is never split: only when a
    /// single hour holds more than `maxRows` samples does a step exceed the budget, by taking that hour alone.
    public func runRetention(now: Double, policy: RetentionPolicy = .standard, maxRows: Int = 50_000) throws(CacheError) -> RetentionReport {
        guard abs(now) < timeLimit else { throw CacheError(.invalidInput, "retention time is out of range") }
        let ages = [policy.rawReadings, policy.energyAggregates, policy.environmentAggregates, policy.completedOutbox]
        guard ages.allSatisfy({ $0.isFinite && $0 >= 0 && $0 < timeLimit }) else {
            throw CacheError(.invalidInput, "retention ages must be finite, non-negative durations")
        }
        guard maxRows > 0 else { throw CacheError(.invalidInput, "retention budget must be positive") }
        return try write("run retention") { db in
            var report = RetentionReport()
            var budget = maxRows
            let allSeries = try SQLiteRow.fetchAll(db, sql: "SELECT id, kind, category FROM series ORDER BY id").map { row in
                (id: try row.decode(Int64.self, atIndex: 0),
                 kind: ReadingKind(rawValue: try row.decode(String.self, atIndex: 1)) ?? .measurement,
                 category: ReadingCategory(rawValue: try row.decode(String.self, atIndex: 2)) ?? .energy)
            }

            // 1. Roll up complete hours that lie entirely before the raw window.
            let rawCutoff = Double(hourStart(of: now - policy.rawReadings))
            for series in allSeries where budget > 0 {
                let rolled = try Self.rollUp(
                    db, seriesID: series.id, kind: series.kind, before: rawCutoff, budget: budget,
                    mayTakeOversizedHour: budget == maxRows)
                report.rawRowsRolledUp += rolled.rows
                report.hourlyRowsWritten += rolled.hours
                budget = rolled.blocked ? 0 : budget - rolled.rows
            }

            // 2. Expire aggregates past their category's age.
            let deleteAggregates = try db.cachedStatement(sql: """
                DELETE FROM reading_hourly WHERE series_id = ?1 AND hour_start IN (
                    SELECT hour_start FROM reading_hourly WHERE series_id = ?1 AND hour_start < ?2
                    ORDER BY hour_start LIMIT ?3)
                """)
            for series in allSeries where budget > 0 {
                let age = series.category == .energy ? policy.energyAggregates : policy.environmentAggregates
                try deleteAggregates.execute(arguments: [series.id, now - age, budget])
                report.aggregatesDeleted += db.changesCount
                budget -= db.changesCount
            }

            // 3. Prune finished commands.
            if budget > 0 {
                try db.execute(
                    sql: """
                        DELETE FROM outbox WHERE seq IN (
                            SELECT seq FROM outbox WHERE state IN ('acked', 'failed', 'expired') AND updated_at < ?
                            ORDER BY seq LIMIT ?)
                        """,
                    arguments: [now - policy.completedOutbox, budget])
                report.outboxRowsDeleted = db.changesCount
                budget -= db.changesCount
            }
            report.finished = budget > 0
            return report
        }
    }

    /// Rolls up whole hours of one series before `cutoff`, up to `budget` raw rows.
    ///
    /// An hour with more samples than the budget is taken whole only when `mayTakeOversizedHour`
    /// (nothing else was done in this step); otherwise the step ends and the next one takes it.
    /// `blocked` says that rows of this series remain, so the step must end.
    private static func rollUp(
        _ db: SQLiteConnection, seriesID: Int64, kind: ReadingKind, before cutoff: Double, budget: Int,
        mayTakeOversizedHour: Bool
    ) throws -> (rows: Int, hours: Int, blocked: Bool) {
        let oldest = try db.cachedStatement(sql: """
            SELECT time, value FROM reading WHERE series_id = ? AND time < ? ORDER BY time LIMIT ?
            """)
        var samples: [Sample] = []
        let cursor = try SQLiteRow.fetchCursor(oldest, arguments: [seriesID, cutoff, budget + 1])
        while let row = try cursor.next() {
            samples.append(Sample(time: try row.decode(Double.self, atIndex: 0), value: try row.decode(Double.self, atIndex: 1)))
        }
        guard let first = samples.first else { return (0, 0, false) }

        var end = cutoff
        let moreRemain = samples.count > budget
        if moreRemain {
            // More rows wait: stop before the hour the budget ends in, so no hour is split.
            let openHour = hourStart(of: samples[budget].time)
            samples.removeSubrange(budget...)
            samples.removeAll { hourStart(of: $0.time) >= openHour }
            end = Double(openHour)
            if samples.isEmpty {
                guard mayTakeOversizedHour else { return (0, 0, true) }
                // A single hour is larger than the whole budget: take that hour alone.
                end = Double(openHour) + 3600
                samples = try CacheStore.samples(db, seriesID: seriesID, from: first.time, to: end)
            }
        }

        let previous = try previousValue(db, seriesID: seriesID, before: first.time)
        let hours = HourAggregate.aggregate(samples, kind: kind, previous: previous)
        let upsert = try db.cachedStatement(sql: """
            INSERT INTO reading_hourly (series_id, hour_start, min, max, avg, last, last_time, sum, count)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (series_id, hour_start) DO UPDATE SET
                min = min(min, excluded.min),
                max = max(max, excluded.max),
                avg = (avg * count + excluded.avg * excluded.count) / (count + excluded.count),
                last = CASE WHEN excluded.last_time >= last_time THEN excluded.last ELSE last END,
                last_time = max(last_time, excluded.last_time),
                sum = CASE WHEN sum IS NULL THEN excluded.sum WHEN excluded.sum IS NULL THEN sum
                           ELSE sum + excluded.sum END,
                count = count + excluded.count
            """)
        for hour in hours {
            try upsert.execute(arguments: [
                seriesID, hour.hourStart, hour.min, hour.max, hour.avg, hour.last, hour.lastTime, hour.increase, hour.count,
            ])
        }
        try db.execute(sql: "DELETE FROM reading WHERE series_id = ? AND time < ?", arguments: [seriesID, end])
        let deleted = db.changesCount
        guard deleted == samples.count else {
            // Cannot happen inside one transaction; refuse to commit a roll-up that missed rows.
            throw CacheError(.databaseError, "retention rolled up \(samples.count) rows but would delete \(deleted)")
        }
        // Rows of this series remain: the budget is spent, end the step here.
        return (samples.count, hours.count, moreRemain)
    }
}
