import Foundation
import GatewayModel
import GatewayTesting
import Resilience
import Synchronization
import TestTraits
import Testing
import VendorKit
@testable import VendorSense
import VendorSimulators
import VendorTesting

/// `type: sense` against a simulator that speaks Sense's sign-in and realtime WebSocket protocol.
@Suite(.integration, .serialized) struct SenseTests {
    static let secret = "JBSWY3DPEHPK3PXP"

    func start(_ simulator: SenseSimulator, password: String = "sense-pw", totp: String? = nil, publishInterval: Duration = .seconds(1),
               values: (any VendorValueStore)? = nil) async throws -> (SenseVendor, EventLog, Task<Void, any Error>) {
        try await simulator.start()
        let log = EventLog()
        let network = NetworkOptions(url: await simulator.baseURL, timeout: .seconds(2), pollInterval: .seconds(900),
                                     quota: SenseVendorFactory.defaults.quota)
        let options = SenseOptions(network: network, realtimeURL: await simulator.realtimeURL, email: "me@example.com",
                                   password: VendorSecret(password), totpSecret: totp.map(VendorSecret.init), publishInterval: publishInterval)
        var fast = options
        fast.reconnect = ReconnectingStream.Policy(minDelay: .milliseconds(100), maxDelay: .milliseconds(400))
        fast.feedTimeout = .seconds(2)
        let vendor = try SenseVendor(instanceID: "sense", options: fast, sink: log.sink, context: VendorContext(valueStore: values))
        let task = Task { try await vendor.run() }
        return (vendor, log, task)
    }

    static let monitor = DeviceID(vendorInstance: "sense", vendorDeviceID: String(SenseSimulator.monitorID))

    @Test func theFeedGivesTheMonitorAndEveryDetectedDevice() async throws {
        let simulator = SenseSimulator(email: "me@example.com", password: "sense-pw")
        let (_, log, task) = try await start(simulator)
        defer { task.cancel(); Task { await simulator.stop() } }
        try await waitUntil("monitor and devices published") {
            log.states[Self.monitor]?["home_power"] != nil && log.states[Self.monitor]?["home_energy"] != nil && log.added.count == 4
        }
        let state = try #require(log.states[Self.monitor])
        #expect(state["home_power"] == .number(1520) && state["solar_power"] == .number(2100) && state["grid_power"] == .number(-580))
        #expect(state["voltage_l1"] == .number(121.9) && state["voltage_l2"] == .number(122.3) && state["frequency"] == .number(60))
        #expect(state["home_energy"] == .number(18.861) && state["grid_import_energy"] == .number(6.203) && state["grid_export_energy"] == .number(9.749))
        let dryer = DeviceID(vendorInstance: "sense", vendorDeviceID: "b8qx2mtt")
        #expect(log.added.contains { $0.id == dryer && $0.name == "Dryer" && $0.keys == ["power"] })
        #expect(log.states[dryer]?["power"] == .number(2600))
        #expect(log.health.last?.state == .ok && log.health.last?.breaker == nil)
    }

    /// Ten frames a second, at most one state per device a second.
    @Test func publishingIsRateLimitedPerDevice() async throws {
        let simulator = SenseSimulator(email: "me@example.com", password: "sense-pw", frameInterval: .milliseconds(100))
        let (_, log, task) = try await start(simulator)
        defer { task.cancel(); Task { await simulator.stop() } }
        try await waitUntil("feed running") { log.states[Self.monitor]?["home_power"] != nil }
        let framesBefore = simulator.framesSent
        let statesBefore = log.all.filter { if case .state(let id, let values, _) = $0 { id == Self.monitor && values["home_power"] != nil } else { false } }.count
        // Twenty frames, however long a loaded machine takes to send them: at most one state per second of them.
        let started = ContinuousClock.now
        try await waitUntil("twenty more frames", timeout: .seconds(30)) { simulator.framesSent - framesBefore >= 20 }
        let seconds = (ContinuousClock.now - started).inSeconds
        let states = log.all.filter { if case .state(let id, let values, _) = $0 { id == Self.monitor && values["home_power"] != nil } else { false } }.count - statesBefore
        #expect(Double(states) <= seconds.rounded(.up) + 1, "\(states) states in \(seconds) s of 20 frames")
    }

    @Test func aOneTimeCodeIsComputedFromTheSecret() async throws {
        let simulator = SenseSimulator(email: "me@example.com", password: "sense-pw", totpSecret: Self.secret)
        let (_, log, task) = try await start(simulator, totp: Self.secret)
        defer { task.cancel(); Task { await simulator.stop() } }
        try await waitUntil("signed in with the code") { log.states[Self.monitor]?["home_power"] != nil }
        #expect(simulator.signIns == 1)
    }

    @Test func aWrongPasswordIsAuthFailedAndNotRetriedForFifteenMinutes() async throws {
        let simulator = SenseSimulator(email: "me@example.com", password: "sense-pw")
        let (vendor, log, task) = try await start(simulator, password: "wrong-pw-7")
        defer { task.cancel(); Task { await simulator.stop() } }
        try await waitUntil("down with auth_failed") { log.health.last?.state == .down && log.health.last?.lastError?.code == .authFailed }
        #expect(log.health.last?.lastError?.message.contains("wrong-pw-7") == false)
        let error = await gatewayError { try await vendor.readTrends(use: .refresh) }
        #expect(error?.code == .authFailed, "held off: no new sign-in")
        #expect(simulator.signIns == 0)
    }

    @Test func aDroppedFeedReconnectsAndAnExpiredTokenIsRenewed() async throws {
        let simulator = SenseSimulator(email: "me@example.com", password: "sense-pw")
        let (_, log, task) = try await start(simulator)
        defer { task.cancel(); Task { await simulator.stop() } }
        try await waitUntil("first feed") { simulator.feedsOpened == 1 && log.states[Self.monitor] != nil }
        simulator.dropFeeds()
        try await waitUntil("reconnected", timeout: .seconds(10)) { simulator.feedsOpened == 2 }
        // The token expires: the feed says authorized:false, the gateway renews once and reconnects.
        simulator.expireTokens()
        simulator.dropFeeds()
        do {
            try await waitUntil("renewed and reconnected", timeout: .seconds(15)) { simulator.renewals == 1 && simulator.feedsOpened == 3 }
        } catch {
            Issue.record("renewals \(simulator.renewals) feeds \(simulator.feedsOpened) sign-ins \(simulator.signIns) requests \(simulator.requests) health \(log.health.suffix(3).map { "\($0.state) \($0.lastError?.message ?? "-")" })")
            throw error
        }
        #expect(simulator.signIns == 1, "renewed with the refresh token, no new password sign-in")
        // Sense forgets the dryer: the next full device list removes it.
        simulator.setDevices(Array(SenseSimulator.household.prefix(2)))
        simulator.dropFeeds()
        try await waitUntil("dryer removed", timeout: .seconds(10)) { log.removed.contains(DeviceID(vendorInstance: "sense", vendorDeviceID: "b8qx2mtt")) }
    }

    /// Sense knows an install by its device id: a random one made on the first run, kept in the cache.
    @Test func theDeviceIDIsMadeOnceAndKeptAcrossRestarts() async throws {
        let simulator = SenseSimulator(email: "me@example.com", password: "sense-pw")
        let store = InMemoryVendorValueStore()
        for run in 1...2 {
            let (_, log, task) = try await start(simulator, values: store)
            try await waitUntil("signed in, run \(run)") { log.states[Self.monitor]?["home_power"] != nil }
            task.cancel()
            _ = await task.result
        }
        #expect(simulator.signIns == 2 && simulator.installIDs.count == 1, "both runs sent one id: \(simulator.installIDs)")
        let kept = try await store.value("device_id", vendorID: "sense", storingIfAbsent: "other")
        #expect(simulator.installIDs == [kept] && kept.count == 32 && kept.allSatisfy(\.isHexDigit))
        let (_, log, task) = try await start(simulator, values: InMemoryVendorValueStore())
        defer { task.cancel(); Task { await simulator.stop() } }
        try await waitUntil("another install signed in") { log.states[Self.monitor]?["home_power"] != nil }
        #expect(simulator.installIDs.count == 2 && simulator.installIDs[1] != kept, "another install, another id")
    }

    /// A state held back by the per-device interval goes out once the interval has passed, with no further frame.
    @Test func aHeldStateGoesOutWhenTheFeedGoesQuiet() throws {
        final class Now: Sendable {
            let date = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
            func advance(_ seconds: Double) { date.withLock { $0 += seconds } }
        }
        let now = Now()
        let log = EventLog()
        let network = NetworkOptions(url: "http://127.0.0.1:9", timeout: .seconds(2), pollInterval: .seconds(900))
        let options = SenseOptions(network: network, realtimeURL: "ws://127.0.0.1:9", email: "me@example.com", password: VendorSecret("p"))
        let vendor = try SenseVendor(instanceID: "sense", options: options, sink: log.sink, context: VendorContext(now: { now.date.withLock { $0 } }))
        let monitor = WireHello.Monitor(id: SenseSimulator.monitorID, serial_number: nil, solar_configured: false, solar_connected: false)
        func frame(_ watts: Int) -> String {
            #"{"type":"realtime_update","payload":{"w":\#(watts),"grid_w":\#(watts),"devices":[],"voltage":[120.1,120.2],"hz":60.0}}"#
        }
        func published() -> [Double] {
            log.all.compactMap { if case .state(let id, let values, _) = $0, id == Self.monitor { values["home_power"]?.number } else { nil } }
        }
        #expect(vendor.handle(frame: frame(1000), monitor: monitor, connected: {}) == nil)
        now.advance(0.3)
        #expect(vendor.handle(frame: frame(1500), monitor: monitor, connected: {}) == nil)
        #expect(published() == [1000], "the second frame waits for its turn")
        vendor.flushDue(now: now.date.withLock { $0 })
        #expect(published() == [1000], "not yet: 0.3 s of 1 s")
        now.advance(1)
        vendor.flushDue(now: now.date.withLock { $0 })
        #expect(published() == [1000, 1500], "the held state went out without another frame")
        let at = log.all.compactMap { if case .state(let id, _, let at) = $0, id == Self.monitor { at } else { nil } }.last
        #expect(at == Date(timeIntervalSince1970: 1_800_000_000.3), "observed when its frame came")
    }

    @Test func theEntryIsCheckedWithKeyPaths() {
        func parse(_ pairs: [(String, String)], environment: [String: String] = ["LBS_SENSE_PASSWORD": "p"]) -> (SenseOptions?, [String]) {
            var reader = ConfigReader()
            let options = SenseVendorFactory.parse(VendorSettings(type: "sense", id: "sense", options: .mapping(pairs.map { (key: $0.0, value: ConfigNode.scalar($0.1, line: 1)) })),
                                                   reader: &reader, environment: environment)
            return (options, reader.problems.map(\.path))
        }
        let fine = parse([("email", "me@example.com"), ("publish_interval", "2")])
        #expect(fine.1.isEmpty && fine.0?.realtimeURL == "wss://clientrt.sense.com" && fine.0?.publishInterval == .seconds(2))
        #expect(fine.0?.network.url == "https://api.sense.com/apiservice/api/v1" && fine.0?.trendsInterval == .seconds(900))
        #expect(parse([]).1 == ["vendors[0].email"])
        #expect(parse([("email", "a@b.c"), ("realtime_url", "http://x")]).1 == ["vendors[0].realtime_url"])
        #expect(parse([("email", "a@b.c")], environment: ["LBS_SENSE_PASSWORD": "p", "LBS_SENSE_TOTP_SECRET": "not base32!"]).1 == ["vendors[0].totp_secret_file"])
    }
}
