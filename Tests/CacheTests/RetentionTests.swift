import Cache
import Foundation
import Testing

@Suite("Retention")
struct RetentionTests {
    /// Far enough after `baseHour` that the test data lies before the 7-day raw window.
    let later = baseHour + 10 * day

    @Test func rollUpComputesHourlyAggregatesAcrossHourBoundaries() async throws {
        try await withStore { store, _ in
            let counter: [(Double, Double)] = [(0, 10), (1800, 12), (3000, 11), (3599, 15), (3600, 16), (4800, 20)]
            try store.appendReadings(counter.map {
                Reading(deviceID: "meter", key: "energy_kwh", time: baseHour + $0.0, value: $0.1, kind: .counter)
            })
            let temperature: [(Double, Double)] = [(10, 20.5), (20, 19.5), (3700, 21)]
            try store.appendReadings(temperature.map {
                Reading(deviceID: "room", key: "temp_c", time: baseHour + $0.0, value: $0.1, category: .environment)
            })

            let report = try store.runRetention(now: later)
            #expect(report.rawRowsRolledUp == 9)
            #expect(report.hourlyRowsWritten == 4)
            #expect(report.finished)

            let expectedMeter = [
                HistoryPoint(time: baseHour, min: 10, max: 15, avg: 12, last: 15, sum: 6, count: 4),
                HistoryPoint(time: baseHour + hour, min: 16, max: 20, avg: 18, last: 20, sum: 5, count: 2),
            ]
            let range = (from: baseHour - day, to: later)
            #expect(try store.history(deviceID: "meter", key: "energy_kwh", from: range.from, to: range.to, resolution: .hourly) == expectedMeter)
            #expect(try store.history(deviceID: "room", key: "temp_c", from: range.from, to: range.to, resolution: .hourly) == [
                HistoryPoint(time: baseHour, min: 19.5, max: 20.5, avg: 20, last: 19.5, sum: nil, count: 2),
                HistoryPoint(time: baseHour + hour, min: 21, max: 21, avg: 21, last: 21, sum: nil, count: 1),
            ])
            #expect(try store.history(deviceID: "meter", key: "energy_kwh", from: range.from, to: range.to, resolution: .raw).isEmpty)

            // Idempotent: a second run finds nothing and changes nothing.
            let again = try store.runRetention(now: later)
            #expect(again.rawRowsRolledUp == 0 && again.hourlyRowsWritten == 0)
            #expect(try store.history(deviceID: "meter", key: "energy_kwh", from: range.from, to: range.to, resolution: .hourly) == expectedMeter)
        }
    }

    @Test func rawWindowKeepsRecentReadingsAndOnlyCompleteHoursRollUp() async throws {
        try await withStore { store, _ in
            let now = baseHour + 8 * day + 1800  // the raw window starts at baseHour + day + 1800
            let times = [baseHour + day - 10, baseHour + day + 100, baseHour + day + 2000, baseHour + 5 * day]
            try store.appendReadings(times.map { Reading(deviceID: "d", key: "p", time: $0, value: 1) })
            let report = try store.runRetention(now: now)
            // Only the hour that ended before the window rolls up; the hour the window starts in stays raw.
            #expect(report.rawRowsRolledUp == 1)
            let raw = try store.history(deviceID: "d", key: "p", from: 0, to: 1e12, resolution: .raw)
            #expect(raw.map(\.time) == Array(times.dropFirst()))
        }
    }

    @Test func hourlyHistoryJoinsRolledUpAndRawHours() async throws {
        try await withStore { store, _ in
            // One counter sample every 10 minutes for 9 days, rising by 1 each time.
            let samples = (0..<(9 * 24 * 6)).map {
                Reading(deviceID: "m", key: "e", time: baseHour + Double($0) * 600, value: Double($0), kind: .counter)
            }
            try store.appendReadings(samples)
            let now = baseHour + 9 * day
            _ = try store.runRetention(now: now)
            let hours = try store.history(deviceID: "m", key: "e", from: baseHour, to: now, resolution: .hourly)
            #expect(hours.count == 9 * 24)
            #expect(hours.allSatisfy { $0.count == 6 })
            // The first hour has no earlier sample (5 steps); every later one gains 6, including the
            // hour right after the last rolled-up one, whose first step comes from the stored `last`.
            #expect(hours.first?.sum == 5)
            #expect(hours.dropFirst().allSatisfy { $0.sum == 6 })
            let expectedLast: [Double] = (0..<(9 * 24)).map { (hourIndex: Int) -> Double in Double(hourIndex * 6 + 5) }
            #expect(hours.map(\.last) == expectedLast)
        }
    }

    @Test func boundedStepsFinishTheJobWithSameResult() async throws {
        var readings: [Reading] = []
        for series in 0..<3 {
            for index in 0..<(10 * 6) {
                // Mostly rising with some drops, so counter sums depend on chaining across steps.
                let value = Double((index * index) % 17 + index)
                readings.append(Reading(
                    deviceID: "dev-\(series)", key: "energy_kwh", time: baseHour + Double(index) * 600,
                    value: value, kind: .counter))
            }
        }
        let expected = try await withStore { store, _ in
            try store.appendReadings(readings)
            #expect(try store.runRetention(now: later, maxRows: 1_000_000).finished)
            return try (0..<3).map {
                try store.history(deviceID: "dev-\($0)", key: "energy_kwh", from: 0, to: later, resolution: .hourly)
            }
        }
        try await withStore { store, _ in
            try store.appendReadings(readings)
            var steps: [RetentionReport] = []
            repeat {
                steps.append(try store.runRetention(now: later, maxRows: 20))
            } while !(steps.last?.finished ?? true) && steps.count < 100
            #expect(steps.last?.finished == true)
            #expect(steps.count > 5)
            #expect(steps.allSatisfy { $0.rawRowsRolledUp <= 20 })
            #expect(steps.map(\.rawRowsRolledUp).reduce(0, +) == 180)
            #expect(steps.map(\.hourlyRowsWritten).reduce(0, +) == 30)
            let actual = try (0..<3).map {
                try store.history(deviceID: "dev-\($0)", key: "energy_kwh", from: 0, to: later, resolution: .hourly)
            }
            #expect(actual == expected)
            #expect(actual.allSatisfy { $0.count == 10 })
        }
    }

    @Test func anHourLargerThanTheBudgetIsTakenWhole() async throws {
        try await withStore { store, _ in
            try store.appendReadings((0..<12).map { Reading(deviceID: "d", key: "p", time: baseHour + Double($0) * 600, value: 1) })
            let first = try store.runRetention(now: later, maxRows: 4)
            #expect(first.rawRowsRolledUp == 6)
            #expect(!first.finished)
            let second = try store.runRetention(now: later, maxRows: 4)
            #expect(second.rawRowsRolledUp == 6)
            let hours = try store.history(deviceID: "d", key: "p", from: 0, to: later, resolution: .hourly)
            #expect(hours.map(\.count) == [6, 6])
        }
    }

    @Test func aggregatesExpirePerCategory() async throws {
        try await withStore { store, _ in
            let now = baseHour + 800 * day
            let energyOld = now - 2 * 365 * day - 2 * hour
            let energyKept = now - 2 * 365 * day + 2 * hour
            let environmentOld = now - 365 * day - 2 * hour
            let environmentKept = now - 365 * day + 2 * hour
            try store.appendReadings([
                Reading(deviceID: "m", key: "e", time: energyOld, value: 1),
                Reading(deviceID: "m", key: "e", time: energyKept, value: 2),
                Reading(deviceID: "m", key: "e", time: environmentOld, value: 3),
                Reading(deviceID: "r", key: "t", time: environmentOld, value: 4, category: .environment),
                Reading(deviceID: "r", key: "t", time: environmentKept, value: 5, category: .environment),
            ])
            let report = try store.runRetention(now: now)
            #expect(report.rawRowsRolledUp == 5)
            #expect(report.aggregatesDeleted == 2)
            let energy = try store.history(deviceID: "m", key: "e", from: 0, to: now, resolution: .hourly)
            #expect(energy.map(\.last) == [2, 3])  // a 1-year-old energy hour is still kept
            let environment = try store.history(deviceID: "r", key: "t", from: 0, to: now, resolution: .hourly)
            #expect(environment.map(\.last) == [5])
        }
    }

    @Test func finishedOutboxRowsArePrunedAfterTheirAge() async throws {
        let clock = TestClock(baseHour)
        try await withStore(clock: clock) { store, _ in
            for id in ["old-acked", "old-pending", "new-acked"] {
                try store.enqueue(OutboxEntry(id: id, vendorID: "v", deviceID: "d", json: "{}", createdAt: baseHour, expiresAt: nil))
            }
            try store.markSending(id: "old-acked")
            try store.markAcked(id: "old-acked", resultJSON: nil)
            clock.set(baseHour + 6 * day)
            try store.markSending(id: "new-acked")
            try store.markAcked(id: "new-acked", resultJSON: nil)

            let report = try store.runRetention(now: baseHour + 8 * day)
            #expect(report.outboxRowsDeleted == 1)
            #expect(try store.outboxEntry(id: "old-acked") == nil)
            #expect(try store.outboxEntry(id: "old-pending")?.state == .pending)
            #expect(try store.outboxEntry(id: "new-acked")?.state == .acked)
        }
    }

    @Test func rejectsBadArguments() async throws {
        try await withStore { store, _ in
            #expect(throws: CacheError(.invalidInput, "retention budget must be positive")) {
                try store.runRetention(now: later, maxRows: 0)
            }
            #expect(throws: CacheError.self) { try store.runRetention(now: .infinity) }
            var policy = RetentionPolicy.standard
            policy.rawReadings = -.infinity
            let policyError = #expect(throws: CacheError.self) { try store.runRetention(now: later, policy: policy) }
            #expect(policyError?.code == .invalidInput)
        }
    }
}
