/// Buffers readings and writes them in batches, so the gateway's hot path never waits on disk.
///
/// A batch is written when `batchSize` readings are buffered, every `interval` while `run()` runs,
/// on `flush()`, and once more when `run()` is cancelled (shutdown). Writes use GRDB's asynchronous
/// writer, so `append` keeps answering while a batch is on its way to disk. If a write fails the
/// batch stays buffered for the next attempt; beyond `maxBuffered` the oldest readings are dropped
/// and counted.
public actor ReadingWriter {
    /// Counters for health reporting.
    public struct Statistics: Sendable, Equatable {
        /// Readings committed to the database.
        public var written = 0
        /// Readings discarded because the buffer overflowed while writes failed.
        public var dropped = 0
        /// Batches whose write failed.
        public var failedWrites = 0
        /// The last write failure, if any.
        public var lastError: CacheError?
    }

    private let store: GatewayStore
    private let batchSize: Int
    private let interval: Duration
    private let maxBuffered: Int
    private let clock: any Clock<Duration>
    private var buffer: [Reading] = []
    private var inFlight: Task<Result<Int, CacheError>, Never>?
    private var flushScheduled = false
    private var stats = Statistics()

    /// Creates a writer for `store`; call `run()` in a task to get interval flushes.
    public init(
        store: GatewayStore, batchSize: Int = 5_000, interval: Duration = .seconds(2), maxBuffered: Int = 200_000,
        clock: any Clock<Duration> = ContinuousClock()
    ) {
        self.store = store
        self.batchSize = max(1, batchSize)
        self.interval = interval
        self.maxBuffered = max(self.batchSize, maxBuffered)
        self.clock = clock
    }

    /// Counters since creation.
    public var statistics: Statistics { stats }

    /// Readings waiting to be written.
    public var bufferedCount: Int { buffer.count }

    /// Buffers one reading.
    public func append(_ reading: Reading) {
        buffer.append(reading)
        afterAppend()
    }

    /// Buffers several readings.
    public func append(contentsOf readings: [Reading]) {
        buffer.append(contentsOf: readings)
        afterAppend()
    }

    /// Writes everything buffered before this call; throws if the write failed (the readings stay buffered).
    public func flush() async throws(CacheError) {
        try await writeBuffered()
    }

    /// Flushes every `interval` until the calling task is cancelled, then flushes one last time.
    public func run() async {
        while !Task.isCancelled {
            do {
                try await clock.sleep(for: interval)
            } catch {
                break  // cancelled
            }
            try? await writeBuffered()
        }
        try? await writeBuffered()
    }

    private func afterAppend() {
        trimOverflow()
        guard buffer.count >= batchSize, !flushScheduled else { return }
        flushScheduled = true
        Task { try? await self.writeBuffered() }
    }

    private func writeBuffered() async throws(CacheError) {
        // One batch at a time keeps readings in order; wait for the one on its way.
        while let running = inFlight {
            _ = await running.value
            // The waiter that resumes first clears the finished task; waiting on it again would spin.
            if inFlight == running { inFlight = nil }
        }
        flushScheduled = false
        guard !buffer.isEmpty else { return }
        let batch = buffer
        buffer.removeAll(keepingCapacity: true)
        let store = self.store
        let task = Task<Result<Int, CacheError>, Never> {
            do throws(CacheError) {
                return .success(try await store.appendReadingsAsync(batch))
            } catch {
                return .failure(error)
            }
        }
        inFlight = task
        let result = await task.value
        if inFlight == task { inFlight = nil }
        switch result {
        case .success:
            stats.written += batch.count
        case .failure(let error):
            stats.failedWrites += 1
            stats.lastError = error
            buffer.insert(contentsOf: batch, at: 0)
            trimOverflow()
            throw error
        }
    }

    private func trimOverflow() {
        let excess = buffer.count - maxBuffered
        guard excess > 0 else { return }
        buffer.removeFirst(excess)
        stats.dropped += excess
    }
}
