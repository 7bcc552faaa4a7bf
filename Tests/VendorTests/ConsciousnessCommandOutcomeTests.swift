import ConsciousnessSimulator
import Foundation
import GatewayModel
import GatewayTesting
import Resilience
import TestTraits
import Testing
import VendorConsciousness
import VendorKit
import VendorTesting

/// The consciousness vendor against its simulator: commands that may have been carried out are not repeated,
/// capabilities say what the backend can do, the served thermostat shape, held-off auth and 404 failures,
/// `next_attempt`.
@Suite(.integration, .timeLimit(.minutes(2))) struct ConsciousnessCommandOutcomeTests {
    static let kitchenControl = "PUT /api/v1/devices/lights-kitchen/control"

    /// Retries that would happen at once (no jitter wait), so only the outcome-unknown rule can stop them.
    static let eagerRetry = RetryPolicy(maxAttempts: 3, baseDelay: .zero, maxDelay: .zero)

    // MARK: Point 1: a command that may have been carried out is sent once

    @Test func commandThatTimesOutIsSentExactlyOnceAndSaysTheOutcomeIsUnknown() async throws {
        // 2 s leaves room for the first poll while the whole suite loads both cores.
        let rig = try await Rig.start(timeout: .seconds(2), retry: Self.eagerRetry)
        defer { Task { await rig.stop() } }
        try await rig.vendor.poll()

        rig.simulator.inject(.late(delay: .seconds(4)), times: 1, matching: FaultMatch(pathPrefix: "/api/v1/devices/lights-kitchen/control"))
        let error = try #require(await gatewayError { _ = try await rig.vendor.executeCommand(rig.command("lights-kitchen", ["state": .string("OFF")])) })
        #expect(error.code == .vendorTimeout)
        #expect(error.outcomeUnknown)
        #expect(!error.retryable)
        #expect(error.message.contains("outcome is unknown"))
        #expect(rig.simulator.counters.requestsByRoute[Self.kitchenControl] == 1)

        // The late request is still carried out by the backend, once.
        try await waitUntil("late OFF applied", timeout: .seconds(10)) {
            rig.simulator.counters.controlCalls(deviceID: "lights-kitchen", action: "turn_off") == 1
        }
        #expect(rig.simulator.counters.requestsByRoute[Self.kitchenControl] == 1)
    }

    @Test func lateFaultReproducesSlowOffThenFastOnEndingOff() async throws {
        let rig = try await Rig.start(timeout: .seconds(2))
        defer { Task { await rig.stop() } }
        try await rig.vendor.poll()

        rig.simulator.inject(.late(delay: .seconds(3)), times: 1, matching: FaultMatch(pathPrefix: "/api/v1/devices/lights-kitchen/control"))
        let off = await gatewayError { _ = try await rig.vendor.executeCommand(rig.command("lights-kitchen", ["state": .string("OFF")])) }
        #expect(off?.outcomeUnknown == true)
        // The backend is fast again: ON is applied at once …
        let on = try await rig.vendor.executeCommand(rig.command("lights-kitchen", ["state": .string("ON")]))
        #expect(on.confirmed["state"] == .string("ON"))
        // … and then the stale OFF lands: the device ends OFF, which `readState` shows without side effects.
        try await waitUntil("late OFF applied", timeout: .seconds(10)) {
            rig.simulator.counters.controlCalls(deviceID: "lights-kitchen", action: "turn_off") == 1
        }
        let controls = rig.simulator.counters.totalControlCalls
        let values = try await rig.vendor.readState(rig.id("lights-kitchen"))
        #expect(values["state"] == .string("OFF"))
        #expect(rig.simulator.counters.totalControlCalls == controls)
        let house = try await rig.vendor.readState(rig.id("house"))
        #expect(house["consciousness_status"] == .string("active"))
        await #expect(throws: GatewayError.self) { _ = try await rig.vendor.readState(rig.id("nope")) }
    }

    @Test func serverErrorAfterSendingIsNotRepeatedButA503Is() async throws {
        let rig = try await Rig.start(retry: Self.eagerRetry)
        defer { Task { await rig.stop() } }
        try await rig.vendor.poll()
        let control = FaultMatch(pathPrefix: "/api/v1/devices/lights-kitchen/control")

        // The simulator's burst answers 500 first: the backend got the request, so it is not sent again.
        rig.simulator.injectServerErrors(count: 1, matching: control)
        let error = try #require(await gatewayError { _ = try await rig.vendor.executeCommand(rig.command("lights-kitchen", ["state": .string("OFF")])) })
        #expect(error.code == .vendorServerError && error.outcomeUnknown && !error.retryable)
        #expect(rig.simulator.counters.requestsByRoute[Self.kitchenControl] == 1)

        // Polls are reads: a 500 there is retried as before.
        rig.simulator.resetCounters()
        rig.simulator.injectServerErrors(count: 1, matching: FaultMatch(pathPrefix: "/api/v1/devices", method: "GET"))
        try await rig.vendor.poll()
        #expect(rig.simulator.counters.requestsByRoute["GET /api/v1/devices"] == 2)
    }

    @Test func connectFailureOfACommandIsNotAnUnknownOutcome() async throws {
        let rig = try await Rig.start(retry: Self.eagerRetry)
        defer { Task { await rig.stop() } }
        try await rig.vendor.poll()
        await rig.simulator.stop()
        let error = try #require(await gatewayError { _ = try await rig.vendor.executeCommand(rig.command("lights-kitchen", ["state": .string("OFF")])) })
        #expect(error.code == .vendorUnreachable)
        #expect(!error.outcomeUnknown)
        #expect(error.retryable)
        #expect(!error.message.contains("outcome is unknown"))
    }

    // MARK: Point 2: capabilities

    @Test func onlyStateIsWritableOnBackendDevices() async throws {
        let rig = try await Rig.start()
        defer { Task { await rig.stop() } }
        try await rig.vendor.poll()
        let inventory = try #require(rig.log.inventories.last)
        for device in inventory where device.type != .hub {
            #expect(device.writableKeys == ["state"], "\(device.vendorDeviceID)")
            #expect(device.isWritable("state"))
        }
        let byID = Dictionary(uniqueKeysWithValues: inventory.map { ($0.vendorDeviceID, $0) })
        #expect(byID["lock-front-door"]?.isWritable("lock") == false)
        #expect(byID["garage-door-main"]?.isWritable("cover") == false)
        #expect(byID["lights-kitchen"]?.isWritable("brightness") == false)
        #expect(byID["thermostat-main"]?.isWritable("target_temperature") == false)
        #expect(byID["thermostat-main"]?.isWritable("hvac_mode") == false)
        #expect(byID["house"]?.writableKeys == [])
    }

    // MARK: Point 3: thermostat shapes

    @Test func otherImplementationsThermostatShapeInCelsius() async throws {
        let rig = try await Rig.start(prepare: { simulator in
            simulator.addDevice(id: "thermo-2", type: "thermostat", properties: [
                ("temperature", .double(21.5)), ("target_temperature", .double(22.0)), ("mode", .string("heat")), ("power", .bool(true)),
            ])
            simulator.addDevice(id: "thermo-3", type: "thermostat", properties: [
                ("current_temp", .int(70)), ("target_temp", .int(68)), ("mode", .string("fan_only")), ("power", .bool(true)),
            ])
        })
        defer { Task { await rig.stop() } }
        try await rig.vendor.poll()
        let states = rig.log.states
        #expect(states[rig.id("thermo-2")]?["temperature"] == .number(21.5))
        #expect(states[rig.id("thermo-2")]?["target_temperature"] == .number(22))
        #expect(states[rig.id("thermo-2")]?["hvac_mode"] == .string("heat"))
        #expect(states[rig.id("thermo-3")]?["temperature"] == .number(21.1))
        #expect(states[rig.id("thermo-3")]?["target_temperature"] == .number(20))
        // A mode without an hvac_mode equivalent is left out, not guessed.
        #expect(states[rig.id("thermo-3")]?["hvac_mode"] == nil)
    }

    @Test func temperatureUnitOptionOverridesTheHeuristic() async throws {
        let rig = try await Rig.start(temperatureUnit: .celsius)
        defer { Task { await rig.stop() } }
        try await rig.vendor.poll()
        #expect(rig.log.states[rig.id("thermostat-main")]?["temperature"] == .number(72))
        let fahrenheit = try await Rig.start(temperatureUnit: .fahrenheit, prepare: { simulator in
            simulator.addDevice(id: "thermo-c", type: "thermostat", properties: [("temperature", .double(41))])
        })
        defer { Task { await fahrenheit.stop() } }
        try await fahrenheit.vendor.poll()
        #expect(fahrenheit.log.states[fahrenheit.id("thermo-c")]?["temperature"] == .number(5))
    }

    // MARK: Point 4: a wrong password backs off

    @Test func wrongPasswordBacksOffIsDownWithAuthFailedAndOneText() async throws {
        let rig = try await Rig.start(loginPassword: "wrong-password")
        defer { Task { await rig.stop() } }
        // 40 s of polling every 2 s on the manual clock.
        for _ in 0..<20 {
            _ = await gatewayError { try await rig.vendor.poll() }
            rig.clock.advance(by: .seconds(2))
        }
        let failed = rig.simulator.counters.failedLogins
        // Held off 15 s, then 30 s: logins at 0 s and 15 s (and 45 s is outside the window).
        #expect(failed >= 1 && failed <= 3, "logins in 40 s: \(failed)")
        let health = rig.vendor.http.health
        #expect(health.state == .down)
        #expect(health.lastError?.code == .authFailed)
        #expect(health.nextAttempt != nil)
        let errors = rig.log.health.compactMap(\.lastError)
        #expect(!errors.isEmpty)
        #expect(Set(errors.map(\.suggestion)).count == 1, "suggestions: \(Set(errors.map(\.suggestion)))")
        #expect(Set(errors.map(\.message)).count == 1, "messages: \(Set(errors.map(\.message)))")
        #expect(errors.allSatisfy { $0.suggestion.contains("password") })
        #expect(rig.log.health.last?.state == .down)

        // The back-off doubles and is capped at 5 min.
        var waits: [Double] = []
        for _ in 0..<8 {
            let next = try #require(rig.vendor.http.health.nextAttempt)
            let wait = next.timeIntervalSinceNow
            waits.append(wait)
            rig.clock.advance(by: .milliseconds(Int64(max(0, wait) * 1000) + 1000))
            _ = await gatewayError { try await rig.vendor.poll() }
        }
        #expect(waits.max().map { $0 <= 301 } == true, "waits: \(waits)")
        #expect(waits.last.map { $0 >= 200 } == true, "waits: \(waits)")
    }

    @Test func correctLoginAfterBackOffRecovers() async throws {
        let rig = try await Rig.start()
        defer { Task { await rig.stop() } }
        rig.simulator.inject(.echoCredentials401, times: 1, matching: FaultMatch(pathPrefix: "/api/v1/auth/login"))
        _ = await gatewayError { try await rig.vendor.poll() }
        #expect(rig.vendor.http.health.state == .down)
        // Held off: no request at all.
        let requests = rig.simulator.counters.requests
        _ = await gatewayError { try await rig.vendor.poll() }
        #expect(rig.simulator.counters.requests == requests)
        rig.clock.advance(by: .seconds(16))
        try await rig.vendor.poll()
        #expect(rig.vendor.http.health.state == .ok)
        #expect(rig.vendor.http.health.nextAttempt == nil)
    }

    // MARK: Point 5: 404 everywhere

    @Test func serverAnswering404EverywhereBacksOffAndNamesTheURL() async throws {
        let rig = try await Rig.start(urlSuffix: "/wrong/path")
        defer { Task { await rig.stop() } }
        for _ in 0..<20 {
            _ = await gatewayError { try await rig.vendor.poll() }
            rig.clock.advance(by: .seconds(2))
        }
        #expect(rig.simulator.counters.requests <= 3, "requests in 40 s: \(rig.simulator.counters.requests)")
        let health = rig.vendor.http.health
        #expect(health.state == .down)
        #expect(health.lastError?.code == .notFound)
        #expect(health.nextAttempt != nil)
        #expect(health.lastError?.message.contains("/wrong/path/api/v1/auth/login") == true, "\(health.lastError?.message ?? "")")
    }

    // MARK: Point 6: next_attempt moves

    @Test func healthIsRepublishedWhenNextAttemptMoves() async throws {
        let rig = try await Rig.start(loginPassword: "wrong-password")
        defer { Task { await rig.stop() } }
        _ = await gatewayError { try await rig.vendor.poll() }
        let first = try #require(rig.log.health.last?.nextAttempt)
        rig.clock.advance(by: .seconds(16))
        _ = await gatewayError { try await rig.vendor.poll() }
        // Same state, breaker and error: only next_attempt moved, and that alone is published.
        let second = try #require(rig.log.health.last?.nextAttempt)
        #expect(second > first)
        #expect(rig.log.health.last?.state == .down)
        #expect(rig.log.health.last?.lastError?.code == .authFailed)
    }

    @Test func reopenedBreakerPublishesItsNewNextAttempt() async throws {
        let rig = try await Rig.start()
        defer { Task { await rig.stop() } }
        try await rig.vendor.poll()
        // The same 502 page every time: state, breaker and error stay the same, only next_attempt moves.
        rig.simulator.inject(.htmlError, times: nil)
        for _ in 0..<3 { _ = await gatewayError { try await rig.vendor.poll() } }
        #expect(rig.vendor.http.breaker.state == .open)
        let first = try #require(rig.log.health.last?.nextAttempt)

        // The probe fails: open again, for twice as long (5 s, then 10 s).
        rig.clock.advance(by: .seconds(31))
        _ = await gatewayError { try await rig.vendor.poll() }
        #expect(rig.vendor.http.breaker.state == .open)
        let published = try #require(rig.log.health.last)
        #expect(published.state == .down && published.breaker == "open")
        let second = try #require(published.nextAttempt)
        #expect(second.timeIntervalSince(first) > 3, "next_attempt was not republished: \(first) -> \(second)")

        // Once the wait has passed, health shows no next_attempt in the past.
        rig.clock.advance(by: .seconds(120))
        let health = rig.vendor.http.health
        #expect(health.nextAttempt.map { $0 >= Date().addingTimeInterval(-1) } ?? true)
    }
}
