import Cache
import Foundation
import Testing

@Suite("Readings and history")
struct ReadingTests {
    @Test func batchedInsertSkipsUnstorableReadings() async throws {
        try await withStore { store, _ in
            var readings = (0..<10_000).map {
                Reading(deviceID: "dev-\($0 % 10)", key: "power_w", time: baseHour + Double($0 / 10), value: Double($0))
            }
            readings.append(Reading(deviceID: "dev-0", key: "power_w", time: baseHour + 5000, value: .nan))
            readings.append(Reading(deviceID: "", key: "power_w", time: baseHour, value: 1))
            readings.append(Reading(deviceID: "dev-0", key: "power_w", time: 1e300, value: 1))
            readings.append(Reading(deviceID: "dev-0", key: "power_w", time: -.infinity, value: 1))
            #expect(try store.appendReadings(readings) == 10_000)
            let raw = try store.history(deviceID: "dev-3", key: "power_w", from: 0, to: .greatestFiniteMagnitude, resolution: .raw)
            #expect(raw.count == 1000)
            #expect(raw.first == HistoryPoint.raw(time: baseHour, value: 3))
            #expect(raw == raw.sorted { $0.time < $1.time })
        }
    }

    @Test func sameSeriesAndTimeReplacesValue() async throws {
        try await withStore { store, _ in
            try store.appendReadings([Reading(deviceID: "d", key: "t", time: baseHour, value: 1)])
            try store.appendReadings([Reading(deviceID: "d", key: "t", time: baseHour, value: 2)])
            let raw = try store.history(deviceID: "d", key: "t", from: baseHour, to: baseHour + 1, resolution: .raw)
            #expect(raw == [HistoryPoint.raw(time: baseHour, value: 2)])
        }
    }

    @Test func rawHistoryRespectsHalfOpenRange() async throws {
        try await withStore { store, _ in
            try store.appendReadings((0..<10).map {
                Reading(deviceID: "d", key: "temp_c", time: baseHour + Double($0) * 10, value: Double($0), category: .environment)
            })
            let points = try store.history(deviceID: "d", key: "temp_c", from: baseHour + 20, to: baseHour + 50, resolution: .raw)
            #expect(points.map(\.value) == [2, 3, 4])
            #expect(try store.history(deviceID: "x", key: "temp_c", from: 0, to: 1e12, resolution: .raw).isEmpty)
            // Extreme but finite ranges are clamped, not trapped on.
            let all = try store.history(
                deviceID: "d", key: "temp_c", from: -.greatestFiniteMagnitude, to: .greatestFiniteMagnitude, resolution: .hourly)
            #expect(all.map(\.count) == [10])
        }
    }

    @Test func hourlyHistoryAggregatesRawSamplesOnTheFly() async throws {
        try await withStore { store, _ in
            // Counter across two hours: 10, 12, 11 (drop: adds nothing), 15 | 16, 20.
            let samples: [(Double, Double)] = [(0, 10), (1800, 12), (3000, 11), (3599, 15), (3600, 16), (4800, 20)]
            try store.appendReadings(samples.map {
                Reading(deviceID: "meter", key: "energy_kwh", time: baseHour + $0.0, value: $0.1, kind: .counter)
            })
            let points = try store.history(
                deviceID: "meter", key: "energy_kwh", from: baseHour, to: baseHour + 2 * hour, resolution: .hourly)
            #expect(points == [
                HistoryPoint(time: baseHour, min: 10, max: 15, avg: 12, last: 15, sum: 6, count: 4),
                HistoryPoint(time: baseHour + hour, min: 16, max: 20, avg: 18, last: 20, sum: 5, count: 2),
            ])
            // A range starting inside the second hour still reports the whole hour, with the step from 15.
            let second = try store.history(
                deviceID: "meter", key: "energy_kwh", from: baseHour + hour + 60, to: baseHour + hour + 61, resolution: .hourly)
            #expect(second == [HistoryPoint(time: baseHour + hour, min: 16, max: 20, avg: 18, last: 20, sum: 5, count: 2)])
        }
    }
}
