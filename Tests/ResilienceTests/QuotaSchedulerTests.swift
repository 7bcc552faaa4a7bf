import GatewayModel
import GatewayTesting
import Resilience
import Testing

@Suite("QuotaScheduler")
struct QuotaSchedulerTests {
    let clock = ManualClock()

    func makeScheduler(_ budgets: QuotaScheduler.Budgets, reserve: Double = 0.2) -> QuotaScheduler {
        QuotaScheduler(vendor: "solar", settings: .init(budgets: budgets, reserveFraction: reserve), clock: clock)
    }

    @Test func aWholeDayOfPollingStaysInsideEveryBudgetAndIsEvenlySpread() throws {
        let quota = makeScheduler(.init(perHour: 100, perDay: 1000))
        let interval = try #require(quota.pollInterval(requested: .seconds(30)))
        // 80 % of 1000/day = 800 polls → one every 108 s (the hourly share alone would allow 45 s).
        #expect(interval == .seconds(108))

        var pollTimes: [Duration] = []
        var next = ManualClock.Instant(offset: .zero)
        let dayEnd = ManualClock.Instant(offset: .seconds(86_400))
        while next < dayEnd {
            clock.advance(to: next)
            if quota.tryAcquire(.poll) { pollTimes.append(clock.now.offset) }
            next = next.advanced(by: interval)
        }
        #expect(pollTimes.count == 800)
        // Every poll on schedule was granted: perfectly even spacing.
        let gaps = Set(zip(pollTimes, pollTimes.dropFirst()).map { $1 - $0 })
        #expect(gaps == [interval])
        // No span of an hour (aligned or not) holds more than the hourly poll share.
        var start = 0
        for end in pollTimes.indices {
            while pollTimes[end] - pollTimes[start] >= .seconds(3600) { start += 1 }
            #expect(end - start + 1 <= 80)
        }
        // The poll share is spent but the reserve is untouched: commands still go through, polls do not.
        let usage = quota.snapshot
        #expect(usage.first { $0.window == .day }?.used == 800)
        #expect(!quota.tryAcquire(.poll))
        #expect(quota.tryAcquire(.command))
        #expect(quota.tryAcquire(.refresh))
        // The next day polls again.
        clock.advance(to: dayEnd)
        #expect(quota.tryAcquire(.poll))
    }

    @Test func greedyPollingIsCutAtThePollShareAndCommandsUseTheReserve() throws {
        let quota = makeScheduler(.init(perHour: 100, perDay: 1000))
        var granted = 0
        var hourTotals: [Int] = []
        for second in stride(from: 0, to: 86_400, by: 10) {
            clock.advance(to: .init(offset: .seconds(second)))
            if second % 3600 == 0, second > 0 {
                hourTotals.append(granted)
                granted = 0
            }
            if quota.tryAcquire(.poll) { granted += 1 }
            if second % 3600 == 3590 {
                // Late in every hour the poll share is gone, but commands still get the reserve.
                #expect(quota.tryAcquire(.command))
            }
        }
        hourTotals.append(granted)
        // 80 per hour until the day's poll share (800, which the hourly commands also count against) is spent
        // during the tenth hour; then nothing, while the reserve stays whole for commands.
        #expect(hourTotals == Array(repeating: 80, count: 9) + [800 - 9 * 81] + Array(repeating: 0, count: 14))
        let day = try #require(quota.snapshot.first { $0.window == .day })
        #expect(day.used == 800 - 9 + 24)
    }

    @Test func commandsStopAtTheFullBudgetWithTheResetTime() {
        let quota = makeScheduler(.init(perHour: 100))
        for _ in 0..<80 { #expect(quota.tryAcquire(.poll)) }
        #expect(!quota.tryAcquire(.poll))
        clock.advance(by: .seconds(600))
        for _ in 0..<20 { #expect(quota.tryAcquire(.command)) }
        #expect(quota.acquire(.command) == .denied(window: .hour, retryIn: .seconds(3000)))
        let error = quota.exhaustedError(window: .hour, retryIn: .seconds(3000))
        #expect(error.code == .quotaExhausted)
        #expect(error.message.contains("hour"))
        clock.advance(by: .seconds(3000))
        #expect(quota.tryAcquire(.command))
    }

    @Test func deniedCallsUseNoBudget() {
        let quota = makeScheduler(.init(perMinute: 10, perDay: 20), reserve: 0)
        for _ in 0..<10 { #expect(quota.tryAcquire(.command)) }
        #expect(!quota.tryAcquire(.command)) // the minute is full; the day must not be charged
        clock.advance(by: .seconds(60))
        for _ in 0..<10 { #expect(quota.tryAcquire(.command)) }
        #expect(quota.acquire(.command) == .denied(window: .day, retryIn: .seconds(86_340)))
    }

    @Test func pollIntervalTakesTheStrictestWindowAndNeverShortensTheRequest() {
        // SolarEdge v2: 10 per minute, 2000 credits per (30-day) month.
        let solarEdge = makeScheduler(.init(perMinute: 10, perMonth: 2000))
        #expect(solarEdge.pollInterval(requested: .seconds(60)) == .seconds(1620)) // 1600 polls / 30 days
        let relaxed = makeScheduler(.init(perDay: 100_000))
        #expect(relaxed.pollInterval(requested: .seconds(300)) == .seconds(300))
        // Each poll costing 3 calls (one per site id) needs three times the spacing.
        let bulk = makeScheduler(.init(perDay: 300))
        #expect(bulk.pollInterval(requested: .seconds(60)) == .seconds(360))
        #expect(bulk.pollInterval(requested: .seconds(60), cost: 3) == .seconds(1080))
        #expect(bulk.tryAcquire(.poll, cost: 3))
        #expect(bulk.snapshot.first?.used == 3)
    }

    @Test func unevenDivisionsRoundUp() throws {
        let quota = makeScheduler(.init(perHour: 7), reserve: 0)
        let interval = try #require(quota.pollInterval(requested: .zero))
        #expect(interval * 7 >= .seconds(3600))
        #expect(interval < .seconds(3600) / 7 + .milliseconds(1))
    }

    @Test func budgetsTooSmallForPollingGiveNoInterval() {
        let quota = makeScheduler(.init(perDay: 1))
        #expect(quota.pollInterval(requested: .seconds(60)) == nil)
        #expect(!quota.tryAcquire(.poll))
        #expect(quota.tryAcquire(.command))
    }

    @Test func snapshotReportsEveryBudgetedWindow() {
        let quota = makeScheduler(.init(perMinute: 10, perHour: 100, perMonth: 2000))
        #expect(quota.tryAcquire(.refresh))
        clock.advance(by: .seconds(90))
        let usage = quota.snapshot
        #expect(usage.map(\.window) == [.minute, .hour, .month])
        #expect(usage.map(\.used) == [0, 1, 1])
        #expect(usage.map(\.limit) == [10, 100, 2000])
        #expect(usage.map(\.pollLimit) == [8, 80, 1600])
        #expect(usage.map(\.resetsIn) == [.seconds(30), .seconds(3510), .seconds(30 * 86_400 - 90)])
    }

    @Test func seededUsageSurvivesARestart() {
        let quota = makeScheduler(.init(perDay: 100))
        quota.seed(used: [.day: 79, .hour: 5])
        #expect(quota.tryAcquire(.poll))
        #expect(!quota.tryAcquire(.poll))
        #expect(quota.tryAcquire(.command))
    }
}
