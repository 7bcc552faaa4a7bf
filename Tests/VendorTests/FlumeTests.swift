import Foundation
import GatewayModel
import GatewayTesting
import Resilience
import Synchronization
import TestTraits
import Testing
@testable import VendorFlume
import VendorKit
import VendorSimulators
import VendorTesting

/// `type: flume` against the simulator serving PyFlume's recorded answers: values in litres from the recorded
/// gallons, a counter that only grows (across midnight and restarts), leaks, and the OAuth grants.
@Suite(.integration) struct FlumeTests {
    static let credentials = FlumeSimulator.Credentials(clientID: "client-1", clientSecret: "client-secret-2", username: "me@example.com", password: "water-pw-3")
    static let sensor = "6248148189204194987"
    static let id = DeviceID(vendorInstance: "flume", vendorDeviceID: sensor)

    final class Clock: Sendable {
        let now: Mutex<Date>
        init(_ date: Date) { now = Mutex(date) }
        func advance(_ seconds: Double) { now.withLock { $0 += seconds } }
    }

    /// 2026-11-26 20:00 in Los Angeles (the recorded sensor's time zone).
    static let evening = Date(timeIntervalSince1970: 1_795_752_000)

    func start(password: String = credentials.password, clock: Clock = Clock(evening), manual: ManualClock = ManualClock())
        async throws -> (FlumeSimulator, FlumeVendor, EventLog) {
        let simulator = try FlumeSimulator(credentials: Self.credentials, fixtures: Fixtures.path("flume", ""))
        try await simulator.start()
        let log = EventLog()
        let network = NetworkOptions(url: await simulator.baseURL, timeout: .seconds(2), pollInterval: .seconds(60),
                                     quota: FlumeVendorFactory.defaults.quota)
        let options = FlumeOptions(network: network, clientID: Self.credentials.clientID, clientSecret: VendorSecret(Self.credentials.clientSecret),
                                   username: Self.credentials.username, password: VendorSecret(password))
        let vendor = try FlumeVendor(instanceID: "flume", options: options, sink: log.sink,
                                     context: VendorContext(clock: manual, now: { clock.now.withLock { $0 } }))
        return (simulator, vendor, log)
    }

    static func litres(_ gallons: Double) -> Double { (gallons * FlumeSimulator.litresPerGallon * 1000).rounded() / 1000 }

    func recordedQuery(_ id: String) throws -> Double {
        let object = try JSONSerialization.jsonObject(with: Fixtures.data("flume", "query.json")) as? [String: Any]
        let data = try #require((object?["data"] as? [[String: Any]])?.first)
        return try #require((data[id] as? [[String: Any]])?.first?["value"] as? Double)
    }

    @Test func aSensorIsPublishedInLitresFromTheRecordedAnswers() async throws {
        let (simulator, vendor, log) = try await start()
        defer { Task { await simulator.stop() } }
        try await vendor.poll()
        let device = try #require(log.inventories.last?.first)
        #expect(device.id == Self.id && device.type == .waterMeter && device.name == "Flume Primary Residence")
        #expect(device.keys == ["water_flow", "water_volume", "leak"], "the recorded sensor reports no battery level")
        let state = try #require(log.states[Self.id])
        #expect(state["water_flow"] == .number(Self.litres(try recordedQuery("current_interval"))))
        #expect(state["water_volume"] == .number(Self.litres(try recordedQuery("today"))), "no cache: the counter starts at today's use")
        #expect(state["leak"] == .bool(true), "leak.json: an active leak")
        #expect(simulator.grants == ["password": 1])
    }

    @Test func theCounterOnlyGrowsAcrossPollsAndMidnight() async throws {
        let clock = Clock(Self.evening)
        let (simulator, vendor, log) = try await start(clock: clock)
        defer { Task { await simulator.stop() } }
        try await vendor.poll()
        let start = try #require(log.states[Self.id]?["water_volume"]?.number)
        // 3 h 59 min later, 10 gallons more today.
        clock.advance(3 * 3600 + 59 * 60)
        simulator.updateMeter { $0.today += 10 }
        try await vendor.poll()
        let late = try #require(log.states[Self.id]?["water_volume"]?.number)
        #expect(abs(late - start - 10 * FlumeSimulator.litresPerGallon) < 0.01)
        // After midnight: yesterday ended 2 gallons above the last reading, today has 3 so far.
        clock.advance(10 * 60)
        let yesterday = simulator.meter.today + 2
        simulator.updateMeter { $0.yesterday = yesterday; $0.today = 3 }
        try await vendor.poll()
        let next = try #require(log.states[Self.id]?["water_volume"]?.number)
        #expect(abs(next - late - 5 * FlumeSimulator.litresPerGallon) < 0.01, "yesterday's tail and today's use, nothing lost or doubled")
        // Today's sum read lower (a late correction): the counter holds.
        clock.advance(60)
        simulator.updateMeter { $0.today = 1 }
        try await vendor.poll()
        #expect(log.states[Self.id]?["water_volume"]?.number == next)
    }

    @Test func aRestartContinuesTheCachedCounter() async throws {
        let (simulator, vendor, log) = try await start()
        defer { Task { await simulator.stop() } }
        vendor.restore(lastKnown: [Self.id: ["water_volume": .number(123_456.5)]])
        try await vendor.poll()
        #expect(log.states[Self.id]?["water_volume"] == .number(123_456.5))
        simulator.updateMeter { $0.today += 1 }
        try await vendor.poll()
        #expect(log.states[Self.id]?["water_volume"] == .number(((123_456.5 + FlumeSimulator.litresPerGallon) * 1000).rounded() / 1000))
    }

    @Test func anExpiredTokenIsRenewedWithTheRefreshTokenAndAWrongPasswordIsHeldOff() async throws {
        let (simulator, vendor, log) = try await start()
        defer { Task { await simulator.stop() } }
        try await vendor.poll()
        simulator.expireToken()
        try await vendor.poll()
        #expect(simulator.grants == ["password": 1, "refresh_token": 1], "401: the refresh grant, then the call again")
        #expect(log.states[Self.id] != nil)

        let (other, refused, _) = try await start(password: "wrong-pw-9")
        defer { Task { await other.stop() } }
        let error = await gatewayError { try await refused.poll() }
        #expect(error?.code == .authFailed && error?.suggestion.contains("client_secret_file") == true)
        #expect(error?.message.contains("wrong-pw-9") == false && error?.message.contains("client-secret-2") == false)
        let asked = other.requests.values.reduce(0, +)
        _ = await gatewayError { try await refused.poll() }
        #expect(other.requests.values.reduce(0, +) == asked && refused.http.health.state == .down, "held off: no second login at once")
    }

    @Test func leaksAreAskedEveryFiveMinutesAndPollsFitTheHourlyBudget() async throws {
        let clock = Clock(Self.evening)
        let (simulator, vendor, log) = try await start(clock: clock)
        defer { Task { await simulator.stop() } }
        try await vendor.poll()
        clock.advance(60)
        try await vendor.poll()
        let leaks = "/users/user_id/devices/\(Self.sensor)/leaks/active"
        #expect(simulator.requests[leaks] == 1, "not again within 5 min")
        simulator.updateMeter { $0.leak = false }
        clock.advance(300)
        try await vendor.poll()
        #expect(simulator.requests[leaks] == 2 && log.states[Self.id]?["leak"] == .bool(false))
        // 120 calls an hour, a fifth kept back: 96 for polls; one query and a fifth of a leak check a poll → 75 s.
        #expect(vendor.pollInterval == .seconds(75))
        #expect(simulator.requests["/users/user_id/devices"] == 1, "the device list is read every 30 min")
    }

    @Test func limitsServerErrorsAndBrokenAnswersAreClassified() async throws {
        let (simulator, vendor, _) = try await start()
        defer { Task { await simulator.stop() } }
        try await vendor.poll()
        simulator.inject(.rateLimited(retryAfter: 90))
        let limited = await gatewayError { try await vendor.poll() }
        #expect(limited?.code == .rateLimited && limited?.retryAfter == .seconds(90))
        simulator.inject(.malformedJSON)
        #expect(await gatewayError { try await vendor.poll() }?.code == .malformedResponse)
        simulator.inject(.serverError)
        #expect(await gatewayError { try await vendor.poll() }?.code == .vendorServerError)
        simulator.inject(.slow(seconds: 3))
        #expect(await gatewayError { try await vendor.poll() }?.code == .vendorTimeout)
    }

    @Test func theEntryNeedsTheClientAndTheUser() {
        var reader = ConfigReader()
        let entry = VendorSettings(type: "flume", id: "flume", options: .mapping([(key: "client_id", value: .scalar("c", line: 1))]))
        #expect(FlumeVendorFactory.parse(entry, reader: &reader, environment: ["LBS_FLUME_CLIENT_SECRET": "s"]) == nil)
        #expect(reader.problems.map(\.path) == ["vendors[0].username", "vendors[0].password_file"])
        var fine = ConfigReader()
        let options = FlumeVendorFactory.parse(
            VendorSettings(type: "flume", id: "flume", options: .mapping([(key: "client_id", value: .scalar("c", line: 1)), (key: "username", value: .scalar("u", line: 2))])),
            reader: &fine, environment: ["LBS_FLUME_CLIENT_SECRET": "s", "LBS_FLUME_PASSWORD": "p"]
        )
        #expect(fine.problems.isEmpty && options?.network.url == "https://api.flumetech.com" && options?.network.quota?.perHour == 120)
    }

    /// A token whose `user_id` claim is a number past Int64 (`1e300`) trapped in `Int64(number)`. Such a
    /// claim is no user id: the login then fails with `malformed_response` ("carries no usable user_id").
    @Test func aUserIDPastInt64IsNoUserIDNotACrash() {
        func userID(_ claim: String) -> String? {
            let payload = Data(#"{"user_id":\#(claim)}"#.utf8).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            return JWTClaims.text("user_id", in: "eyJhbGciOiJub25lIn0.\(payload).c2ln")
        }
        for claim in ["1e300", "-1e300", "9223372036854775808", "18446744073709551616", "-9.3e18", "1.5"] {
            #expect(userID(claim) == nil, "user_id \(claim)")
        }
        #expect(userID("1234") == "1234" && userID("1.0e3") == "1000" && userID("9223372036854775807") == "9223372036854775807")
        #expect(userID(#""user_id""#) == "user_id")
    }
}
