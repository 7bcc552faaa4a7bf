import GatewayModel
import Synchronization

/// Keeps one vendor inside its declared request budgets (per minute, hour, day, 30-day month; any subset).
///
/// Polling may only use the non-reserved part of each budget (`1 - reserveFraction`), so `/get` refreshes
/// and commands always find room; refreshes and commands may use the whole budget.
/// `pollInterval(requested:)` stretches the poll interval so polls are spread evenly over each window
/// instead of burning a budget early and going blind until it resets.
///
/// Windows are fixed and aligned to the scheduler's creation, not to calendar days or months; a month is
/// 30 days. Evenly spread polls stay inside their share in ANY span of a window's length, so calendar
/// alignment only matters for bursts of commands right around our window boundaries; the vendor's 429
/// (classified as `rate_limited`, honouring `Retry-After`) covers that rare case.
/// After a restart, `seed(used:)` restores counts the gateway persisted.
public final class QuotaScheduler: Sendable {
    public enum Window: String, Sendable, Codable, CaseIterable {
        case minute, hour, day, month

        public var length: Duration {
            switch self {
            case .minute: .seconds(60)
            case .hour: .seconds(3600)
            case .day: .seconds(86_400)
            case .month: .seconds(30 * 86_400)
            }
        }
    }

    /// What a call is for: polls get the non-reserved share, the others the whole budget.
    public enum Use: String, Sendable, Codable {
        case poll, refresh, command
    }

    /// Budgets per window; nil means unlimited.
    public struct Budgets: Sendable, Hashable, Codable {
        public var perMinute: Int?
        public var perHour: Int?
        public var perDay: Int?
        public var perMonth: Int?

        public init(perMinute: Int? = nil, perHour: Int? = nil, perDay: Int? = nil, perMonth: Int? = nil) {
            self.perMinute = perMinute
            self.perHour = perHour
            self.perDay = perDay
            self.perMonth = perMonth
        }

        public func limit(for window: Window) -> Int? {
            switch window {
            case .minute: perMinute
            case .hour: perHour
            case .day: perDay
            case .month: perMonth
            }
        }
    }

    public struct Settings: Sendable, Hashable {
        public var budgets: Budgets
        /// Fraction (0…1) of each budget kept back from polling for refreshes and commands.
        public var reserveFraction: Double

        public init(budgets: Budgets, reserveFraction: Double = 0.2) {
            self.budgets = budgets
            self.reserveFraction = min(max(reserveFraction, 0), 1)
        }
    }

    public enum Decision: Sendable, Hashable {
        case granted
        /// The `window` budget (for this use) is spent; it resets in `retryIn`.
        case denied(window: Window, retryIn: Duration)

        public var isGranted: Bool { self == .granted }
    }

    /// One window's usage, for the health JSON.
    public struct WindowUsage: Sendable, Hashable {
        public var window: Window
        public var limit: Int
        /// The part polls may use.
        public var pollLimit: Int
        public var used: Int
        public var resetsIn: Duration
    }

    private struct Counter {
        var index: Int64 = 0
        var used = 0
    }

    public let vendor: String
    private let time: TimeSource
    private let counters: Mutex<[Window: Counter]>
    private let current: Mutex<Settings>

    /// The budgets in force: the declared ones, or what the vendor said about itself (`update(budgets:)`).
    public var settings: Settings { current.withLock { $0 } }

    public init(vendor: String, settings: Settings, time: TimeSource) {
        self.vendor = vendor
        current = Mutex(settings)
        self.time = time
        var initial: [Window: Counter] = [:]
        for window in Window.allCases where settings.budgets.limit(for: window) != nil { initial[window] = Counter() }
        counters = Mutex(initial)
    }

    /// Replaces the budgets with the ones the vendor reports for this account (Awair's `/users/self`); calls
    /// already counted in a window stay counted.
    public func update(budgets: Budgets) {
        current.withLock { $0.budgets = budgets }
        counters.withLock { counters in
            for window in Window.allCases {
                if budgets.limit(for: window) == nil { counters[window] = nil } else if counters[window] == nil { counters[window] = Counter() }
            }
        }
    }

    public convenience init<C: Clock>(vendor: String, settings: Settings, clock: C) where C.Duration == Duration {
        self.init(vendor: vendor, settings: settings, time: TimeSource(clock))
    }

    /// The part of `window`'s budget polls may use.
    public func pollLimit(_ window: Window) -> Int? {
        settings.budgets.limit(for: window).map { Int((Double($0) * (1 - settings.reserveFraction)).rounded(.down)) }
    }

    /// The interval to poll at: `requested`, stretched so that polls costing `cost` calls each fit
    /// evenly into the poll share of every window. Nil when a budget leaves no room for polling at all.
    public func pollInterval(requested: Duration, cost: Int = 1) -> Duration? {
        var interval = requested
        for window in Window.allCases {
            guard let share = pollLimit(window) else { continue }
            let polls = share / max(1, cost)
            guard polls > 0 else { return nil }
            var spacing = window.length / polls
            // Duration division truncates; a hair too short would fit one poll too many into a window.
            if spacing * polls < window.length { spacing += .nanoseconds(1) }
            interval = max(interval, spacing)
        }
        return interval
    }

    /// Takes `cost` calls from every budget if all of them have room for this use.
    public func acquire(_ use: Use, cost: Int = 1) -> Decision {
        let now = time.now()
        return counters.withLock { counters in
            var blocking: (window: Window, retryIn: Duration)?
            for window in Window.allCases {
                guard var counter = counters[window], let limit = settings.budgets.limit(for: window) else { continue }
                roll(&counter, window: window, now: now)
                counters[window] = counter
                let allowed = use == .poll ? (pollLimit(window) ?? limit) : limit
                if counter.used + cost > allowed {
                    let retryIn = resetsIn(counter, window: window, now: now)
                    // Report the window that stays blocked longest.
                    if blocking.map({ retryIn > $0.retryIn }) ?? true { blocking = (window, retryIn) }
                }
            }
            if let blocking { return .denied(window: blocking.window, retryIn: blocking.retryIn) }
            for window in counters.keys { counters[window]?.used += cost }
            return .granted
        }
    }

    /// `acquire` as a yes/no.
    public func tryAcquire(_ use: Use, cost: Int = 1) -> Bool { acquire(use, cost: cost).isGranted }

    /// The user-facing error for a denied decision.
    public func exhaustedError(window: Window, retryIn: Duration) -> GatewayError {
        .quotaExhausted(vendor: vendor, window: window.rawValue, resetsIn: retryIn)
    }

    /// Restores usage counted before a restart into the current windows.
    public func seed(used: [Window: Int]) {
        let now = time.now()
        counters.withLock { counters in
            for (window, count) in used {
                guard var counter = counters[window] else { continue }
                roll(&counter, window: window, now: now)
                counter.used = max(counter.used, count)
                counters[window] = counter
            }
        }
    }

    /// Usage per budgeted window, shortest window first.
    public var snapshot: [WindowUsage] {
        let now = time.now()
        return counters.withLock { counters in
            Window.allCases.compactMap { window in
                guard var counter = counters[window], let limit = settings.budgets.limit(for: window) else { return nil }
                roll(&counter, window: window, now: now)
                counters[window] = counter
                return WindowUsage(
                    window: window, limit: limit, pollLimit: pollLimit(window) ?? limit, used: counter.used,
                    resetsIn: resetsIn(counter, window: window, now: now)
                )
            }
        }
    }

    private func windowIndex(_ window: Window, now: Duration) -> Int64 {
        let elapsed = max(now, .zero)
        return Int64(elapsed / window.length)
    }

    private func roll(_ counter: inout Counter, window: Window, now: Duration) {
        let index = windowIndex(window, now: now)
        if index != counter.index {
            counter.index = index
            counter.used = 0
        }
    }

    private func resetsIn(_ counter: Counter, window: Window, now: Duration) -> Duration {
        window.length * Int(counter.index + 1) - now
    }
}
