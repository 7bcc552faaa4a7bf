// Plain values stored by `CacheStore`. Times are Unix seconds (`Double`), payloads are JSON text:
// the cache never interprets the model, so it stays independent of `GatewayModel`.

/// A device description kept so discovery can be re-published, and ghosts cleaned, after a restart.
public struct StoredDevice: Sendable, Equatable {
    /// The gateway-wide device identifier.
    public var id: String
    /// The vendor that owns the device.
    public var vendorID: String
    /// The serialized device description.
    public var json: String
    /// When the gateway last wrote this description (Unix seconds).
    public var updatedAt: Double

    /// Creates a stored device description.
    public init(id: String, vendorID: String, json: String, updatedAt: Double) {
        self.id = id
        self.vendorID = vendorID
        self.json = json
        self.updatedAt = updatedAt
    }
}

/// The latest known values of one device.
public struct StoredState: Sendable, Equatable {
    /// The device the values belong to.
    public var deviceID: String
    /// The serialized values.
    public var json: String
    /// When the vendor observed the values (Unix seconds), if it said so.
    public var sourceTime: Double?
    /// When the gateway stored the values (Unix seconds).
    public var updatedAt: Double

    /// Creates a stored state.
    public init(deviceID: String, json: String, sourceTime: Double?, updatedAt: Double) {
        self.deviceID = deviceID
        self.json = json
        self.sourceTime = sourceTime
        self.updatedAt = updatedAt
    }
}

/// Whether a reading is an instantaneous measurement or a monotonically growing counter.
public enum ReadingKind: String, Sendable, Equatable, CaseIterable {
    /// An instantaneous value (power, temperature).
    case measurement
    /// A cumulative value (energy meter); hourly roll-ups also sum its positive increases.
    case counter
}

/// Which retention class a reading belongs to.
public enum ReadingCategory: String, Sendable, Equatable, CaseIterable {
    /// Energy data: hourly aggregates are kept longer (2 years by default).
    case energy
    /// Environment data: hourly aggregates are kept 1 year by default.
    case environment
}

/// One numeric sample of one state key of one device.
public struct Reading: Sendable, Equatable {
    /// The device that produced the sample.
    public var deviceID: String
    /// The state key (for example `power_w`).
    public var key: String
    /// When the sample was observed (Unix seconds).
    public var time: Double
    /// The sampled value.
    public var value: Double
    /// Measurement or counter.
    public var kind: ReadingKind
    /// Energy or environment, which selects the retention of the aggregates.
    public var category: ReadingCategory

    /// Creates a reading.
    public init(
        deviceID: String, key: String, time: Double, value: Double,
        kind: ReadingKind = .measurement, category: ReadingCategory = .energy
    ) {
        self.deviceID = deviceID
        self.key = key
        self.time = time
        self.value = value
        self.kind = kind
        self.category = category
    }
}

/// The time resolution of a history query.
public enum HistoryResolution: Sendable, Equatable {
    /// Every stored sample (only the raw window, 7 days by default).
    case raw
    /// One point per hour: stored roll-ups plus raw samples aggregated on the fly.
    case hourly
}

/// One point of a history series: a raw sample, or the aggregate of one hour.
public struct HistoryPoint: Sendable, Equatable {
    /// The sample time, or the start of the hour (Unix seconds).
    public var time: Double
    /// Smallest value in the hour (the value itself for a raw sample).
    public var min: Double
    /// Largest value in the hour.
    public var max: Double
    /// Mean of the samples in the hour.
    public var avg: Double
    /// The latest sample in the hour.
    public var last: Double
    /// For counters: the sum of positive increases in the hour (including the step from the previous
    /// hour's last sample); `nil` for measurements and raw samples.
    public var sum: Double?
    /// How many samples the point summarizes.
    public var count: Int

    /// The raw value, or the hour's last value.
    public var value: Double { last }

    /// Creates an aggregate point.
    public init(time: Double, min: Double, max: Double, avg: Double, last: Double, sum: Double?, count: Int) {
        self.time = time
        self.min = min
        self.max = max
        self.avg = avg
        self.last = last
        self.sum = sum
        self.count = count
    }

    /// Creates the point of one raw sample.
    public static func raw(time: Double, value: Double) -> HistoryPoint {
        HistoryPoint(time: time, min: value, max: value, avg: value, last: value, sum: nil, count: 1)
    }
}

/// How long each kind of data is kept (seeds 004 §6). All durations are seconds.
public struct RetentionPolicy: Sendable, Equatable {
    /// Raw readings older than this are rolled up into hourly aggregates and deleted.
    public var rawReadings: Double
    /// Hourly aggregates of energy readings are deleted after this age.
    public var energyAggregates: Double
    /// Hourly aggregates of environment readings are deleted after this age.
    public var environmentAggregates: Double
    /// Finished outbox rows (acked, failed, expired) are deleted this long after their last update.
    public var completedOutbox: Double

    /// The policy of seeds 004 §6: 7 days raw, 2 years energy, 1 year environment; 7 days of outbox.
    public static let standard = RetentionPolicy(
        rawReadings: 7 * 86_400,
        energyAggregates: 2 * 365 * 86_400,
        environmentAggregates: 365 * 86_400,
        completedOutbox: 7 * 86_400
    )

    /// Creates a policy.
    public init(rawReadings: Double, energyAggregates: Double, environmentAggregates: Double, completedOutbox: Double) {
        self.rawReadings = rawReadings
        self.energyAggregates = energyAggregates
        self.environmentAggregates = environmentAggregates
        self.completedOutbox = completedOutbox
    }
}

/// What one bounded retention pass did.
public struct RetentionReport: Sendable, Equatable {
    /// Raw readings folded into hourly aggregates and deleted.
    public var rawRowsRolledUp = 0
    /// Hourly aggregate rows inserted or updated.
    public var hourlyRowsWritten = 0
    /// Hourly aggregates deleted because they passed their category's age.
    public var aggregatesDeleted = 0
    /// Finished outbox rows deleted.
    public var outboxRowsDeleted = 0
    /// True when nothing was left to do; false when the row budget ran out first.
    public var finished = true

    /// Creates an empty report.
    public init() {}
}

/// Where an outbox command is in its life.
/// One change to the outbox, for `CacheStore.apply(_:)`.
public enum OutboxChange: Sendable, Equatable {
    /// A new command; `sending` when it goes to its vendor right away (restart then treats it as possibly sent).
    case insert(OutboxEntry, sending: Bool)
    /// A known command moves on (`sending` counts an attempt).
    case transition(id: String, to: OutboxState, error: String? = nil, result: String? = nil)
}

public enum OutboxState: String, Sendable, Equatable, CaseIterable {
    /// Waiting to be sent.
    case pending
    /// Handed to the vendor; a row left here after a crash was interrupted.
    case sending
    /// The vendor confirmed the command.
    case acked
    /// The command failed for good.
    case failed
    /// The command was not sent before its deadline.
    case expired

    /// Whether the entry will never change again.
    public var isFinal: Bool { self == .acked || self == .failed || self == .expired }
}

/// One command in the durable outbox.
public struct OutboxEntry: Sendable, Equatable {
    /// The idempotency key: enqueueing the same id twice keeps one row.
    public var id: String
    /// Insertion order, assigned by the store (0 before enqueueing).
    public var seq: Int64
    /// The vendor that must execute the command.
    public var vendorID: String
    /// The target device.
    public var deviceID: String
    /// The serialized command.
    public var json: String
    /// When the command was accepted (Unix seconds).
    public var createdAt: Double
    /// After this time the command must not be sent any more (Unix seconds), if it has a deadline.
    public var expiresAt: Double?
    /// Where the command is in its life.
    public var state: OutboxState
    /// How many times sending was started.
    public var attempts: Int
    /// The last failure, readable.
    public var lastError: String?
    /// The vendor's serialized answer, once acknowledged.
    public var resultJSON: String?
    /// When the row last changed (Unix seconds).
    public var updatedAt: Double

    /// Creates a new pending entry to enqueue.
    public init(id: String, vendorID: String, deviceID: String, json: String, createdAt: Double, expiresAt: Double?) {
        self.init(
            id: id, seq: 0, vendorID: vendorID, deviceID: deviceID, json: json, createdAt: createdAt,
            expiresAt: expiresAt, state: .pending, attempts: 0, lastError: nil, resultJSON: nil, updatedAt: createdAt
        )
    }

    /// Creates an entry with every field given.
    public init(
        id: String, seq: Int64, vendorID: String, deviceID: String, json: String, createdAt: Double,
        expiresAt: Double?, state: OutboxState, attempts: Int, lastError: String?, resultJSON: String?,
        updatedAt: Double
    ) {
        self.id = id
        self.seq = seq
        self.vendorID = vendorID
        self.deviceID = deviceID
        self.json = json
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.state = state
        self.attempts = attempts
        self.lastError = lastError
        self.resultJSON = resultJSON
        self.updatedAt = updatedAt
    }
}
