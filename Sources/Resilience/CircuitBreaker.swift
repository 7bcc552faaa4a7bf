import GatewayModel
import Synchronization

/// One circuit breaker per vendor instance: closed → open → half-open → closed.
///
/// - Closed: calls pass. Outcomes are kept for a sliding `window`; the breaker opens when at least
///   `minimumCalls` calls AND at least `failureRatio` of them failed within it. Older outcomes are forgotten.
/// - Open: calls are rejected with `breaker_open` until the open wait has passed. The first trip waits
///   `firstOpenDuration` (5 s), each failed probe doubles the wait, up to the configured `openDuration`:
///   a vendor that is back soon is probed soon (one failed probe no longer costs the whole configured wait),
///   and one that stays down is probed every `openDuration`.
/// - Half-open: exactly one probe call at a time is let through; its success closes the breaker (and the next
///   trip waits `firstOpenDuration` again), its failure opens it again for longer.
///
/// What counts: only errors with `countsAgainstVendor` are failures. Other errors that carry an HTTP status
/// (401, 404, 422 …) count as successes, because the vendor answered promptly and coherently. Errors that
/// never reached the vendor (no HTTP status: input validation, cancellation, quota) are ignored.
///
/// State changes from open to half-open happen lazily, when the breaker is next consulted;
/// `nextAttemptIn` says when that will be.
public final class CircuitBreaker: Sendable {
    public enum State: String, Sendable, Codable, CaseIterable {
        case closed, open
        case halfOpen = "half_open"
    }

    public struct Settings: Sendable, Hashable {
        /// Length of the sliding window of remembered outcomes.
        public var window: Duration
        /// Fewer calls than this in the window never open the breaker.
        public var minimumCalls: Int
        /// Failed fraction (0…1) of the window's calls that opens the breaker.
        public var failureRatio: Double
        /// The longest open wait: the wait starts at `firstOpenDuration` and doubles with each failed probe up to this.
        public var openDuration: Duration
        /// The open wait after a trip from closed (at most `openDuration`).
        public var firstOpenDuration: Duration
        /// A probe that never reports back frees the half-open slot after this long.
        public var probeTimeout: Duration
        /// Memory bound on remembered outcomes; the oldest are dropped first.
        public var maxRecordedCalls: Int

        public init(
            window: Duration = .seconds(60), minimumCalls: Int = 5, failureRatio: Double = 0.5,
            openDuration: Duration = .seconds(30),
            probeTimeout: Duration = .seconds(120), maxRecordedCalls: Int = 1000, firstOpenDuration: Duration = .seconds(5)
        ) {
            self.window = window
            self.minimumCalls = max(1, minimumCalls)
            self.failureRatio = min(max(failureRatio, 0), 1)
            self.openDuration = openDuration
            self.firstOpenDuration = min(max(.zero, firstOpenDuration), openDuration)
            self.probeTimeout = probeTimeout
            self.maxRecordedCalls = max(minimumCalls, maxRecordedCalls)
        }
    }

    /// Permission to make one call; hand it back with `record` (or `release` if the call never ran).
    public struct Permit: Sendable, Hashable {
        let generation: UInt64
        let probeID: UInt64?
        /// True when this call is the half-open probe.
        public var isProbe: Bool { probeID != nil }
    }

    /// Counts and timing for health reports.
    public struct Snapshot: Sendable, Hashable {
        public var vendor: String
        public var state: State
        public var callsInWindow: Int
        public var failuresInWindow: Int
        /// Trips since the breaker was last closed by a successful probe.
        public var consecutiveTrips: Int
        public var totalTrips: Int
        /// How long until a probe is allowed (only while open).
        public var nextAttemptIn: Duration?
        public var lastFailure: GatewayError?
    }

    private enum Verdict { case success, failure, ignored }

    private struct Core {
        var state: State = .closed
        /// (time, failed) in time order.
        var outcomes: [(at: Duration, failed: Bool)] = []
        /// Bumped on every trip and close, so late results of calls from an earlier phase are ignored.
        var generation: UInt64 = 0
        var consecutiveTrips = 0
        var totalTrips = 0
        var openUntil: Duration = .zero
        var probeCounter: UInt64 = 0
        var activeProbe: (id: UInt64, startedAt: Duration)?
        var lastFailure: GatewayError?
    }

    public let vendor: String
    public let settings: Settings
    private let time: TimeSource
    private let core = Mutex(Core())

    public init(vendor: String, settings: Settings = Settings(), time: TimeSource) {
        self.vendor = vendor
        self.settings = settings
        self.time = time
    }

    public convenience init<C: Clock>(vendor: String, settings: Settings = Settings(), clock: C) where C.Duration == Duration {
        self.init(vendor: vendor, settings: settings, time: TimeSource(clock))
    }

    // MARK: Calls

    /// Asks to make a call: returns a permit, or throws `breaker_open` while open or while a probe runs.
    public func acquire() throws(GatewayError) -> Permit {
        let now = time.now()
        let result: Result<Permit, GatewayError> = core.withLock { core in
            advance(&core, now: now)
            switch core.state {
            case .closed:
                return .success(Permit(generation: core.generation, probeID: nil))
            case .open:
                return .failure(.breakerOpen(vendor: vendor, retryIn: core.openUntil - now))
            case .halfOpen:
                if let probe = core.activeProbe, now - probe.startedAt < settings.probeTimeout {
                    return .failure(.breakerOpen(vendor: vendor, retryIn: nil))
                }
                core.probeCounter += 1
                core.activeProbe = (core.probeCounter, now)
                return .success(Permit(generation: core.generation, probeID: core.probeCounter))
            }
        }
        return try result.get()
    }

    /// Reports how a permitted call ended: `nil` for success, or the error it failed with.
    public func record(_ permit: Permit, error: GatewayError?) {
        let verdict: Verdict
        if let error {
            verdict = error.countsAgainstVendor ? .failure : (error.httpStatus != nil ? .success : .ignored)
        } else {
            verdict = .success
        }
        let now = time.now()
        core.withLock { core in
            if verdict == .failure { core.lastFailure = error }
            advance(&core, now: now)
            guard permit.generation == core.generation else { return }
            if let probeID = permit.probeID {
                guard core.state == .halfOpen, core.activeProbe?.id == probeID else { return }
                switch verdict {
                case .success: close(&core)
                case .failure: trip(&core, now: now)
                case .ignored: core.activeProbe = nil
                }
                return
            }
            guard core.state == .closed, verdict != .ignored else { return }
            core.outcomes.append((now, verdict == .failure))
            if core.outcomes.count > settings.maxRecordedCalls {
                core.outcomes.removeFirst(core.outcomes.count - settings.maxRecordedCalls)
            }
            guard verdict == .failure else { return }
            let failures = core.outcomes.count { $0.failed }
            if core.outcomes.count >= settings.minimumCalls,
               Double(failures) >= settings.failureRatio * Double(core.outcomes.count) {
                trip(&core, now: now)
            }
        }
    }

    /// Hands back a permit whose call never ran (e.g. the quota said no); frees the probe slot.
    public func release(_ permit: Permit) {
        guard let probeID = permit.probeID else { return }
        core.withLock { core in
            if core.activeProbe?.id == probeID { core.activeProbe = nil }
        }
    }

    // MARK: Inspection

    public var state: State {
        let now = time.now()
        return core.withLock { core in
            advance(&core, now: now)
            return core.state
        }
    }

    /// How long until the breaker lets a probe through; nil unless open.
    public var nextAttemptIn: Duration? { snapshot.nextAttemptIn }

    public var snapshot: Snapshot {
        let now = time.now()
        return core.withLock { core in
            advance(&core, now: now)
            return Snapshot(
                vendor: vendor, state: core.state, callsInWindow: core.outcomes.count,
                failuresInWindow: core.outcomes.count { $0.failed }, consecutiveTrips: core.consecutiveTrips,
                totalTrips: core.totalTrips, nextAttemptIn: core.state == .open ? core.openUntil - now : nil,
                lastFailure: core.lastFailure
            )
        }
    }

    // MARK: Transitions (called with the lock held)

    /// Forgets outcomes older than the window and moves open → half-open when the open time is over.
    private func advance(_ core: inout Core, now: Duration) {
        let horizon = now - settings.window
        if let firstKept = core.outcomes.firstIndex(where: { $0.at > horizon }) {
            if firstKept > 0 { core.outcomes.removeFirst(firstKept) }
        } else {
            core.outcomes.removeAll(keepingCapacity: true)
        }
        if core.state == .open, now >= core.openUntil {
            core.activeProbe = nil
            core.state = .halfOpen
        }
    }

    private func trip(_ core: inout Core, now: Duration) {
        // 5 s, 10 s, 20 s … after each failed probe, never longer than the configured wait.
        let growth = Double(sign: .plus, exponent: min(core.consecutiveTrips, 30), significand: 1)
        let duration = min(settings.openDuration, .clampedSeconds(settings.firstOpenDuration.inSeconds * growth))
        core.consecutiveTrips += 1
        core.totalTrips += 1
        core.openUntil = now + duration
        core.generation += 1
        core.outcomes.removeAll()
        core.activeProbe = nil
        core.state = .open
    }

    private func close(_ core: inout Core) {
        core.consecutiveTrips = 0
        core.generation += 1
        core.outcomes.removeAll()
        core.activeProbe = nil
        core.state = .closed
    }
}
