import ConsciousnessSimulator
import CurlHTTP
import Foundation
import GatewayModel
import GatewayTesting
import Resilience
import TestTraits
import Testing
import VendorConsciousness
import VendorKit
import VendorTesting

@Suite(.integration) struct VendorHTTPResilienceTests {
    @Test func serverErrorBurstOpensTheBreakerAndTheHalfOpenProbeRecovers() async throws {
        let rig = try await Rig.start()
        defer { Task { await rig.stop() } }
        try await rig.vendor.poll()  // login, devices, status: three successes in the window
        #expect(rig.log.health.map(\.state) == [.ok])

        rig.simulator.injectServerErrors(count: 100)
        var codes: [GatewayError.Code] = []
        for _ in 0..<3 {
            codes.append(await gatewayError { try await rig.vendor.poll() }?.code ?? .internal)
        }
        #expect(codes == [.vendorServerError, .vendorServerError, .vendorServerError])
        #expect(rig.vendor.http.breaker.state == .open)
        let down = try #require(rig.log.health.last)
        #expect(down.state == .down)
        #expect(down.breaker == "open")
        #expect(down.nextAttempt != nil)
        #expect(down.lastError?.code == .vendorServerError)

        // Open: calls fail fast without reaching the backend, and the cause stays the last error.
        let requests = rig.simulator.counters.requests
        let fast = await gatewayError { try await rig.vendor.poll() }
        #expect(fast?.code == .breakerOpen)
        #expect(rig.simulator.counters.requests == requests)
        #expect(rig.vendor.http.health.lastError?.code == .vendorServerError)

        // After the open duration the probe goes through and closes the breaker.
        rig.simulator.clearFaults()
        rig.clock.advance(by: .seconds(30))
        #expect(rig.vendor.http.breaker.state == .halfOpen)
        try await rig.vendor.poll()
        #expect(rig.vendor.http.breaker.state == .closed)
        let states = rig.log.health.map(\.state)
        #expect(states.first == .ok)
        #expect(states.last == .ok)
        let downAt = try #require(states.firstIndex(of: .down))
        #expect(states[..<downAt].contains(.degraded))
        #expect(states[downAt...].contains(.ok))
    }

    @Test func simulatorDownOpensTheBreakerAndRecoveryClosesIt() async throws {
        let rig = try await Rig.start()
        defer { Task { await rig.stop() } }
        try await rig.vendor.poll()
        await rig.simulator.stop()

        for _ in 0..<3 {
            let error = await gatewayError { try await rig.vendor.poll() }
            #expect(error?.code == .vendorUnreachable)
        }
        #expect(rig.log.health.last?.state == .down)
        #expect(rig.log.health.last?.breaker == "open")
        let fast = await gatewayError { try await rig.vendor.poll() }
        #expect(fast?.code == .breakerOpen)
        #expect(fast?.message.contains("paused") == true)

        try await rig.simulator.start()  // the same port again
        rig.clock.advance(by: .seconds(31))
        try await rig.vendor.poll()
        #expect(rig.log.health.last?.state == .ok)
        #expect(rig.log.health.last?.breaker == "closed")
        #expect(rig.log.health.map(\.state).contains(.down))
    }

    @Test func rateLimitRetryAfterIsHonouredOnTheInjectedClock() async throws {
        let retry = RetryPolicy(
            maxAttempts: 3, baseDelay: .milliseconds(10), maxDelay: .milliseconds(10), retryAfterCap: .seconds(60), random: .seeded(7)
        )
        let rig = try await Rig.start(retry: retry)
        defer { Task { await rig.stop() } }
        try await rig.vendor.poll()

        rig.simulator.injectRateLimit(count: 1, retryAfterSeconds: 7, matching: FaultMatch(pathPrefix: "/api/v1/devices"))
        let vendor = rig.vendor
        let poll = Task { try await vendor.poll() }
        #expect(await rig.clock.waitForSleepers(1))
        let waitsFor = try #require(rig.clock.nextDeadline).offset - rig.clock.now.offset
        #expect(waitsFor >= .seconds(7))
        #expect(rig.simulator.counters.requestsByRoute["GET /api/v1/devices"] == 2)

        rig.clock.advance(by: .milliseconds(6900))
        try await quietPeriod(.milliseconds(50))
        #expect(rig.clock.sleeperCount == 1, "the retry must not run before Retry-After has passed")
        #expect(rig.simulator.counters.requestsByRoute["GET /api/v1/devices"] == 2)

        rig.clock.advance(by: .milliseconds(100))
        try await poll.value
        #expect(rig.simulator.counters.requestsByRoute["GET /api/v1/devices"] == 3)
    }

    @Test func slowResponsesPastTheTimeoutAreVendorTimeout() async throws {
        // 2 s leaves room for the first poll (login + list) while the whole suite loads both cores.
        let rig = try await Rig.start(timeout: .seconds(2))
        defer { Task { await rig.stop() } }
        try await rig.vendor.poll()

        rig.simulator.inject(.slow(delay: .seconds(10)), matching: FaultMatch(pathPrefix: "/api/v1/devices"))
        let started = ContinuousClock.now
        let error = await gatewayError { try await rig.vendor.poll() }
        #expect(error?.code == .vendorTimeout)
        // Well before the 10 s the backend takes: the timeout ended the wait.
        #expect(ContinuousClock.now - started < .seconds(8))
        #expect(rig.log.health.last?.lastError?.code == .vendorTimeout)
    }

    @Test func truncatedJSONIsMalformedResponse() async throws {
        let rig = try await Rig.start()
        defer { Task { await rig.stop() } }
        try await rig.vendor.poll()

        rig.simulator.inject(.malformedJSON, matching: FaultMatch(pathPrefix: "/api/v1/devices"))
        let error = await gatewayError { try await rig.vendor.poll() }
        #expect(error?.code == .malformedResponse)
        #expect(error?.message.contains("device list") == true)
        #expect(error?.message.contains("cannot read") == true)
        #expect(rig.log.health.last?.state == .degraded)
        // The next good answer is used normally.
        try await rig.vendor.poll()
    }

    @Test func htmlErrorPageGivesAReadableErrorWithoutMarkup() async throws {
        let rig = try await Rig.start()
        defer { Task { await rig.stop() } }
        try await rig.vendor.poll()

        // The simulator's nginx page comes with 502: the classifier calls that a server error.
        rig.simulator.inject(.htmlError, matching: FaultMatch(pathPrefix: "/api/v1/devices"))
        let error = try #require(await gatewayError { try await rig.vendor.poll() })
        #expect(error.code == .vendorServerError)
        #expect(error.message.contains("502 Bad Gateway"))
        #expect(!error.message.contains("<"))

        // The same page with a 2xx status (captive portal, misrouted proxy) is malformed_response.
        let page = HTTPClientResponse(
            status: 200, headers: ["Content-Type": "text/html"],
            body: Data("<html><head><title>Login</title></head><body><h1>Please sign in</h1></body></html>".utf8),
            effectiveURL: "http://127.0.0.1/api/v1/devices"
        )
        let html = await gatewayError { _ = try rig.vendor.http.decode([String: Int].self, from: page, context: "device list") }
        #expect(html?.code == .malformedResponse)
        #expect(html?.message.contains("HTML page") == true)
        #expect(html?.message.contains("Please sign in") == true)
    }

    @Test func pollsStayInsideTheDeclaredBudgetOverASimulatedHour() async throws {
        let rig = try await Rig.start(quota: QuotaScheduler.Budgets(perHour: 60), pollInterval: .seconds(5))
        defer { Task { await rig.stop() } }
        // 80 % of 60 for polls, two requests each: 24 polls an hour, one every 150 s.
        #expect(rig.vendor.effectivePollInterval == .seconds(150))

        let vendor = rig.vendor
        let running = Task { try await vendor.run() }
        defer { running.cancel() }
        var polls = 0
        while true {
            #expect(await rig.clock.waitForSleepers(1))
            polls += 1
            guard let next = rig.clock.nextDeadline, next.offset < .seconds(3600) else { break }
            rig.clock.advance(to: next)
        }
        let counters = rig.simulator.counters
        #expect(polls == 24)
        #expect(counters.requests <= 60)
        // The token is renewed at 90 % of its hour; logins share the budget, so the last poll may be cut short.
        #expect(counters.logins == 2)
        #expect((23...24).contains(counters.requestsByRoute["GET /api/v1/devices"] ?? 0))
        let hour = try #require(rig.vendor.http.health.quota["hour"])
        #expect(hour["limit"] == 60)
        #expect(hour["used"] == Double(counters.requests))
    }
}
