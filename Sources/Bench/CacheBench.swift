import Cache
import Foundation
import GatewayModel

/// Cache benchmarks: batched ingest rate, and database size after a simulated month of sensors.
///
/// Options: `--days N` (30), `--sensors N` (100), `--interval S` (10 s between samples),
/// `--ingest N` (readings in the ingest test, 1,000,000), `--dir PATH` (default: a fresh temp dir,
/// removed afterwards). Prints `name: value unit` lines. The full 30 days (25.9M readings) take about
/// 4 minutes on a 2-core box in a release build; pass `--days 2` for a quick run.
func runCacheBenchmarks(arguments: [String]) throws {
    let options = CacheBenchOptions(arguments: arguments)
    let directory = options.directory ?? FileManager.default.temporaryDirectory
        .appendingPathComponent("lbs-cache-bench-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer {
        if options.directory == nil { try? FileManager.default.removeItem(atPath: directory) }
    }
    try benchmarkIngest(options: options, directory: directory)
    try benchmarkMonth(options: options, directory: directory)
}

private struct CacheBenchOptions {
    var days = 30
    var sensors = 100
    var interval = 10.0
    var ingestCount = 1_000_000
    var batchSize = 5_000
    var directory: String?

    init(arguments: [String]) {
        var index = 0
        while index < arguments.count {
            let value = index + 1 < arguments.count ? arguments[index + 1] : ""
            switch arguments[index] {
            case "--days": days = max(1, Int(value) ?? days); index += 1
            case "--sensors": sensors = max(1, Int(value) ?? sensors); index += 1
            case "--interval": interval = max(1, Double(value) ?? interval); index += 1
            case "--ingest": ingestCount = max(1, Int(value) ?? ingestCount); index += 1
            case "--dir": directory = value.isEmpty ? nil : value; index += 1
            default: break
            }
            index += 1
        }
    }
}

/// Half the sensors are energy counters, half environment measurements, like a typical home.
private func sensorReading(_ sensor: Int, time: Double, step: Int) -> Reading {
    if sensor % 2 == 0 {
        return Reading(
            deviceID: "meter-\(sensor)", key: "energy_kwh", time: time, value: Double(step) * 0.0125,
            kind: .counter, category: .energy)
    }
    let wave = sin(time / 3600)
    return Reading(
        deviceID: "room-\(sensor)", key: "temperature_c", time: time, value: 21 + 2 * wave,
        kind: .measurement, category: .environment)
}

private func benchmarkIngest(options: CacheBenchOptions, directory: String) throws {
    let path = directory + "/ingest.sqlite"
    let store = try CacheStore(path: path)
    defer { try? store.close() }
    let start = 1_700_000_000.0
    var written = 0
    var step = 0
    let began = ContinuousClock.now
    while written < options.ingestCount {
        var batch: [Reading] = []
        batch.reserveCapacity(options.batchSize)
        while batch.count < options.batchSize, written + batch.count < options.ingestCount {
            let sensor = (written + batch.count) % options.sensors
            if sensor == 0 { step += 1 }
            batch.append(sensorReading(sensor, time: start + Double(step) * options.interval, step: step))
        }
        written += try store.appendReadings(batch)
    }
    let seconds = (ContinuousClock.now - began).inSeconds
    print("cache.ingest.readings: \(written) readings")
    print("cache.ingest.batch_size: \(options.batchSize) readings")
    print("cache.ingest.rate: \(Int(Double(written) / seconds)) readings/s")
    print("cache.ingest.transaction_rate: \(format(Double(written / options.batchSize) / seconds)) transactions/s")
}

private func benchmarkMonth(options: CacheBenchOptions, directory: String) throws {
    let path = directory + "/month.sqlite"
    let store = try CacheStore(path: path)
    defer { try? store.close() }
    let start = 1_700_006_400.0  // a UTC midnight
    let perDay = Int(86_400 / options.interval)
    var insertSeconds = 0.0
    var retentionSeconds = 0.0
    var longestStep = 0.0
    var rolledUp = 0
    var hourlyRows = 0
    var total = 0

    for day in 0..<options.days {
        // One day of samples, written as the gateway's writer would: time-ordered batches.
        let dayStart = start + Double(day) * 86_400
        var batch: [Reading] = []
        batch.reserveCapacity(options.batchSize)
        var began = ContinuousClock.now
        for tick in 0..<perDay {
            let time = dayStart + Double(tick) * options.interval
            for sensor in 0..<options.sensors {
                batch.append(sensorReading(sensor, time: time, step: day * perDay + tick))
                if batch.count == options.batchSize {
                    total += try store.appendReadings(batch)
                    batch.removeAll(keepingCapacity: true)
                }
            }
        }
        total += try store.appendReadings(batch)
        insertSeconds += (ContinuousClock.now - began).inSeconds

        // The periodic retention job at the end of the day, in bounded steps.
        began = ContinuousClock.now
        var report: RetentionReport
        repeat {
            let stepBegan = ContinuousClock.now
            report = try store.runRetention(now: dayStart + 86_400, policy: .standard, maxRows: 50_000)
            longestStep = max(longestStep, (ContinuousClock.now - stepBegan).inSeconds)
            rolledUp += report.rawRowsRolledUp
            hourlyRows += report.hourlyRowsWritten
        } while !report.finished
        retentionSeconds += (ContinuousClock.now - began).inSeconds
    }
    try store.checkpoint()

    let databaseBytes = fileSize(path)
    let walBytes = fileSize(path + "-wal")
    let rawRows = total - rolledUp
    print("cache.month.simulated_days: \(options.days) days")
    print("cache.month.sensors: \(options.sensors) sensors every \(format(options.interval)) s")
    print("cache.month.readings_written: \(total) readings")
    print("cache.month.raw_rows_kept: \(rawRows) rows")
    print("cache.month.raw_rows_rolled_up: \(rolledUp) rows")
    print("cache.month.hourly_rows: \(hourlyRows) rows")
    print("cache.month.insert_time: \(format(insertSeconds)) s")
    print("cache.month.insert_rate: \(Int(Double(total) / insertSeconds)) readings/s")
    print("cache.month.retention_time: \(format(retentionSeconds)) s")
    print("cache.month.retention_rate: \(Int(Double(rolledUp) / max(retentionSeconds, 0.001))) rows/s")
    print("cache.month.longest_retention_step: \(format(longestStep * 1000)) ms")
    print("cache.month.database_size: \(format(Double(databaseBytes) / 1_048_576)) MB")
    print("cache.month.wal_size_after_checkpoint: \(format(Double(walBytes) / 1_048_576)) MB")
    print("cache.month.bytes_per_kept_raw_row: \(format(Double(databaseBytes) / Double(max(rawRows, 1)))) bytes")
    print("cache.month.integrity: \(try store.integrityCheck())")
}

private func fileSize(_ path: String) -> Int {
    ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? 0
}

private func format(_ value: Double) -> String {
    String(format: "%.1f", value)
}
