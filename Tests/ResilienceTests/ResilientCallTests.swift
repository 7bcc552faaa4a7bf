import GatewayModel
import GatewayTesting
import Resilience
import Testing

@Suite("resilientCall")
struct ResilientCallTests {
    let clock = ManualClock()
    let timeout = GatewayError.vendorTimeout(vendor: "v")

    func makeBreaker(minimumCalls: Int = 5) -> CircuitBreaker {
        CircuitBreaker(vendor: "v", settings: .init(minimumCalls: minimumCalls), clock: clock)
    }

    /// Runs a call whose operation fails with `failures` in order and then returns 42.
    func run(
        breaker: CircuitBreaker, retry: RetryPolicy, quota: QuotaScheduler? = nil, failures: [GatewayError],
        reauthenticate: Bool = false
    ) -> Task<(result: Result<Int, GatewayError>, calls: Int, logins: Int), Never> {
        let clock = clock
        return Task {
            var calls = 0
            var logins = 0
            do throws(GatewayError) {
                let value = try await resilientCall(
                    breaker: breaker, retry: retry, quota: quota, use: .command, clock: clock,
                    reauthenticate: reauthenticate ? { () async throws(GatewayError) in logins += 1 } : nil
                ) { () async throws(GatewayError) -> Int in
                    calls += 1
                    if calls <= failures.count { throw failures[calls - 1] }
                    return 42
                }
                return (.success(value), calls, logins)
            } catch {
                return (.failure(error), calls, logins)
            }
        }
    }

    /// Lets the call's retry sleeps pass, recording each wait.
    func advanceThroughSleeps(_ count: Int) async -> [Duration] {
        var waits: [Duration] = []
        for _ in 0..<count {
            guard await clock.waitForSleepers(1), let deadline = clock.nextDeadline else { break }
            waits.append(clock.now.duration(to: deadline))
            clock.advance(to: deadline)
        }
        return waits
    }

    @Test func retriesARetryableFailureThenSucceeds() async throws {
        let retry = RetryPolicy(maxAttempts: 4, baseDelay: .seconds(1), maxDelay: .seconds(30), random: .seeded(9))
        let breaker = makeBreaker()
        let task = run(breaker: breaker, retry: retry, failures: [timeout, timeout])
        let waits = await advanceThroughSleeps(2)
        let outcome = await task.value
        #expect(try outcome.result.get() == 42)
        #expect(outcome.calls == 3)
        #expect(waits.count == 2)
        #expect(waits[0] <= .seconds(1) && waits[1] <= .seconds(2))
        #expect(breaker.snapshot.callsInWindow == 3)
        #expect(breaker.snapshot.failuresInWindow == 2)
    }

    @Test func stopsAtTheFirstNonRetryableFailure() async throws {
        let badRequest = try #require(ErrorClassifier(vendor: "v").classify(status: 422, body: [UInt8]()))
        let task = run(breaker: makeBreaker(), retry: RetryPolicy(maxAttempts: 5), failures: [badRequest])
        let outcome = await task.value
        #expect(outcome.calls == 1)
        #expect(throws: badRequest) { try outcome.result.get() }
        #expect(clock.sleeperCount == 0)
    }

    @Test func givesUpAfterMaxAttempts() async {
        let task = run(breaker: makeBreaker(minimumCalls: 100), retry: RetryPolicy(maxAttempts: 3, random: .seeded(1)), failures: Array(repeating: timeout, count: 10))
        _ = await advanceThroughSleeps(2)
        let outcome = await task.value
        #expect(outcome.calls == 3)
        #expect(throws: timeout) { try outcome.result.get() }
    }

    @Test func stopsWhenTheBreakerOpens() async throws {
        let breaker = makeBreaker(minimumCalls: 2)
        let task = run(breaker: breaker, retry: RetryPolicy(maxAttempts: 10, random: .seeded(2)), failures: Array(repeating: timeout, count: 10))
        _ = await advanceThroughSleeps(1)
        let outcome = await task.value
        #expect(outcome.calls == 2)
        // The user sees the real cause, not breaker_open.
        #expect(throws: timeout) { try outcome.result.get() }
        #expect(breaker.state == .open)
        // The next call is refused without touching the vendor.
        let refused = await run(breaker: breaker, retry: .none, failures: []).value
        #expect(refused.calls == 0)
        #expect((try? refused.result.get()) == nil)
        if case .failure(let error) = refused.result { #expect(error.code == .breakerOpen) }
    }

    @Test func honoursRetryAfter() async throws {
        let limited = try #require(
            ErrorClassifier(vendor: "v").classify(status: 429, headers: ["Retry-After": "20"], body: [UInt8]())
        )
        let task = run(breaker: makeBreaker(), retry: RetryPolicy(maxDelay: .seconds(5), random: .seeded(4)), failures: [limited])
        let waits = await advanceThroughSleeps(1)
        #expect(try await task.value.result.get() == 42)
        #expect(waits == [.seconds(20)])
    }

    @Test func maxElapsedStopsLongWaits() async throws {
        let limited = GatewayError(.rateLimited, message: "429", retryAfter: .seconds(120), httpStatus: 429)
        let retry = RetryPolicy(maxElapsed: .seconds(60))
        let outcome = await run(breaker: makeBreaker(), retry: retry, failures: [limited]).value
        #expect(outcome.calls == 1)
        #expect(throws: limited) { try outcome.result.get() }
    }

    @Test func reauthenticatesOnceThenRepeatsTheCall() async throws {
        let unauthorized = try #require(ErrorClassifier(vendor: "v").classify(status: 401, body: [UInt8]()))
        let recovered = await run(breaker: makeBreaker(), retry: .none, failures: [unauthorized], reauthenticate: true).value
        #expect(try recovered.result.get() == 42)
        #expect(recovered.calls == 2)
        #expect(recovered.logins == 1)

        let breaker = makeBreaker(minimumCalls: 1)
        let refused = await run(breaker: breaker, retry: RetryPolicy(maxAttempts: 5), failures: [unauthorized, unauthorized, unauthorized], reauthenticate: true).value
        #expect(refused.calls == 2)
        #expect(refused.logins == 1)
        guard case .failure(let error) = refused.result else {
            Issue.record("expected auth_failed")
            return
        }
        #expect(error.code == .authFailed)
        #expect(!error.requiresReauthentication)
        #expect(breaker.state == .closed) // 401 is not a vendor health failure
    }

    @Test func quotaRefusalDoesNotCallTheVendorAndFreesTheProbe() async throws {
        let quota = QuotaScheduler(vendor: "v", settings: .init(budgets: .init(perHour: 1)), clock: clock)
        #expect(quota.tryAcquire(.command))
        let breaker = makeBreaker(minimumCalls: 1)
        let permit = try breaker.acquire()
        breaker.record(permit, error: timeout)
        clock.advance(by: .seconds(30)) // half-open
        let outcome = await run(breaker: breaker, retry: .none, quota: quota, failures: []).value
        #expect(outcome.calls == 0)
        guard case .failure(let error) = outcome.result else {
            Issue.record("expected quota_exhausted")
            return
        }
        #expect(error.code == .quotaExhausted)
        #expect(try breaker.acquire().isProbe) // the probe slot was handed back
    }
}

@Suite("GatewayError")
struct GatewayErrorTests {
    @Test func routerConstructorsAreReadable() {
        let range = GatewayError.outOfRange(key: "brightness", value: 150, min: 0, max: 100)
        #expect(range.code == .outOfRange)
        #expect(range.message == "brightness = 150 is out of range.")
        #expect(range.suggestion == "Send brightness between 0 and 100.")
        #expect(!range.retryable && !range.countsAgainstVendor)
        #expect(GatewayError.unknownKey("colour", device: "d", accepted: ["state", "brightness"]).suggestion.contains("state, brightness"))
        let hugeID = String(repeating: "x", count: 10_000)
        #expect(GatewayError.unknownDevice(hugeID).message.count < 300)
        #expect(GatewayError.invalidJSON("bad\u{0}\nbyte").message == "The payload is not valid JSON: bad  byte.")
    }

    @Test func codesAreSnakeCase() {
        for code in GatewayError.Code.allCases {
            #expect(code.rawValue.allSatisfy { $0.isLowercase || $0.isNumber || $0 == "_" })
            #expect(code.rawValue.first?.isLowercase == true)
        }
        #expect(GatewayError.Code.allCases.count >= 26)
    }

    @Test func jsonRendering() {
        let error = GatewayError.invalidJSON("unexpected \"}\"")
        #expect(error.jsonObject == ["code": "invalid_json", "message": error.message, "severity": "error", "suggestion": error.suggestion])
        #expect(error.jsonText.hasPrefix(#"{"code":"invalid_json","message":"The payload is not valid JSON: unexpected \"}\"."#))
        #expect(error.description.hasPrefix("invalid_json: "))
    }
}

/// Vendors are actors: the combinator must run their isolated closures without sending them anywhere.
actor CountingVendor {
    let caller: ResilientCaller
    var requests = 0

    init(caller: ResilientCaller) {
        self.caller = caller
    }

    func fetch(failFirst: Int) async throws(GatewayError) -> Int {
        try await caller.call(.poll) { () async throws(GatewayError) -> Int in
            requests += 1
            if requests <= failFirst { throw GatewayError.vendorTimeout(vendor: "v") }
            return requests
        }
    }
}

@Suite("ResilientCaller")
struct ResilientCallerTests {
    @Test func actorIsolatedOperationsRetryOnTheActor() async throws {
        let clock = ManualClock()
        let time = TimeSource(clock)
        let caller = ResilientCaller(
            breaker: CircuitBreaker(vendor: "v", time: time),
            retry: RetryPolicy(maxAttempts: 3, random: .seeded(11)),
            quota: QuotaScheduler(vendor: "v", settings: .init(budgets: .init(perHour: 10)), time: time),
            time: time
        )
        let vendor = CountingVendor(caller: caller)
        let task = Task { try await vendor.fetch(failFirst: 1) }
        #expect(await clock.waitForSleepers(1))
        clock.advanceToNextDeadline()
        #expect(try await task.value == 2)
        #expect(caller.quota?.snapshot.first?.used == 2)
    }
}

extension ResilientCallTests {
    /// A command's deadline bounds the waits inside the call: a lock command whose vendor asks for a
    /// 30 s pause is not sent again at second 30 when its deadline was at second 10.
    @Test(.timeLimit(.minutes(1))) func aDeadlineStopsRetriesThatWouldStartAfterIt() async throws {
        let time = TimeSource(clock)
        let retry = RetryPolicy(maxAttempts: 4, baseDelay: .seconds(1), maxDelay: .seconds(60), random: .seeded(3))
        let limited = GatewayError(.rateLimited, message: "429", retryAfter: .seconds(30), httpStatus: 429)
        var calls = 0
        let outcome: Result<Int, GatewayError>
        do throws(GatewayError) {
            outcome = .success(try await resilientCall(
                breaker: makeBreaker(), retry: retry, use: .command, time: time, deadline: time.now() + .seconds(10)
            ) { () async throws(GatewayError) -> Int in
                calls += 1
                throw limited
            })
        } catch {
            outcome = .failure(error)
        }
        #expect(calls == 1, "a retry would have gone out after the deadline")
        guard case .failure(let error) = outcome else { Issue.record("expected a failure"); return }
        #expect(error.code == .rateLimited)
        #expect(!error.retryable)
        #expect(error.message.contains("deadline"))
    }

    @Test func retriesWithinTheDeadlineStillHappen() async throws {
        let time = TimeSource(clock)
        let retry = RetryPolicy(maxAttempts: 4, baseDelay: .seconds(1), maxDelay: .seconds(2), random: .seeded(3))
        let clock = clock
        let task = Task { () -> Int in
            var calls = 0
            _ = try? await resilientCall(
                breaker: makeBreaker(), retry: retry, use: .command, time: time, deadline: time.now() + .seconds(60)
            ) { () async throws(GatewayError) -> Int in
                calls += 1
                if calls == 1 { throw GatewayError.vendorUnreachable(vendor: "v", detail: "refused") }
                return 1
            }
            return calls
        }
        _ = await clock.waitForSleepers(1)
        if let next = clock.nextDeadline { clock.advance(to: next) }
        #expect(await task.value == 2)
    }
}
