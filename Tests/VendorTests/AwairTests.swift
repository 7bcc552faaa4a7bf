import Foundation
import GatewayModel
import GatewayTesting
import Resilience
import TestTraits
import Testing
@testable import VendorAwair
import VendorKit
import VendorSimulators
import VendorTesting

/// `type: awair` and `type: awair_local` against the simulator replaying python_awair's recorded cassettes: the
/// published numbers are the numbers in the recorded answers.
@Suite(.integration) struct AwairTests {
    static let token = "awair-token-123"

    func cloud(token: String = AwairTests.token, clock: ManualClock = ManualClock()) async throws -> (AwairSimulator, AwairCloudVendor, EventLog) {
        let simulator = try AwairSimulator(mode: .cloud(token: Self.token), folder: Fixtures.path("awair", ""))
        try await simulator.start()
        let log = EventLog()
        let network = NetworkOptions(url: await simulator.baseURL, timeout: .seconds(2), pollInterval: .seconds(300),
                                     quota: AwairCloudVendorFactory.defaults.quota)
        let vendor = try AwairCloudVendor(instanceID: "awair", options: AwairCloudOptions(network: network, token: VendorSecret(token)),
                                          sink: log.sink, context: VendorContext(clock: clock))
        return (simulator, vendor, log)
    }

    /// The recorded body of a cassette's first answer to `path`, as JSON.
    func recorded(_ cassette: String, _ path: String) throws -> [String: Any] {
        let interaction = try #require(try Cassette(path: Fixtures.path("awair", cassette)).interactions.first { $0.target.hasPrefix(path) })
        return try #require(try JSONSerialization.jsonObject(with: Data(interaction.body.utf8)) as? [String: Any])
    }

    func number(_ value: Any?) throws -> Double {
        if let int = value as? Int { return Double(int) }
        return try #require(value as? Double)
    }

    @Test func theCloudPublishesEachMonitorAsRecorded() async throws {
        let (simulator, vendor, log) = try await cloud()
        defer { Task { await simulator.stop() } }
        try await vendor.poll()
        let device = try #require(log.inventories.last?.first)
        #expect(device.id.rawValue == "awair_24947" && device.name == "Living Room" && device.room == "Living Room" && device.model == "awair")
        #expect(device.type == .airQuality && device.serialNumber == "70886B104941")
        let reading = try #require((try recorded("latest.yaml", "/v1/users/self/devices/awair/24947/air-data/latest")["data"] as? [[String: Any]])?.first)
        let sensors = try #require(reading["sensors"] as? [[String: Any]])
        func sensor(_ comp: String) throws -> StateValue {
            .number((try number(sensors.first { $0["comp"] as? String == comp }?["value"]) * 100).rounded() / 100)
        }
        // The first-generation Awair's dust is both pm25 and pm10 (as Home Assistant shows it).
        #expect(log.states[device.id] == [
            "temperature": try sensor("temp"), "humidity": try sensor("humid"), "co2": try sensor("co2"), "voc_ppb": try sensor("voc"),
            "pm25": try sensor("dust"), "pm10": try sensor("dust"), "score": .number(try number(reading["score"])),
        ])
        #expect(log.states[device.id]?["temperature"] == .number(21.77))
        #expect(log.observedAt(device.id) == ISOTime.parse(try #require(reading["timestamp"] as? String)), "the reading's own time")
        #expect(device.keys == ["temperature", "humidity", "co2", "voc_ppb", "pm25", "pm10", "score"])
    }

    /// `/users/self` says this account may read `latest` 30,000 times a day: that replaces the assumed 300.
    @Test func theAccountsQuotaReplacesTheAssumedOne() async throws {
        let (simulator, vendor, _) = try await cloud()
        defer { Task { await simulator.stop() } }
        #expect(vendor.http.quota?.settings.budgets.perDay == 300)
        try await vendor.poll()
        let user = try recorded("user.yaml", "/v1/users/self")
        let latest = try #require((user["permissions"] as? [[String: Any]])?.first { $0["scope"] as? String == "LATEST" }?["quota"] as? Int)
        #expect(vendor.http.quota?.settings.budgets.perDay == latest)
        #expect(vendor.http.health.quota["day"]?["limit"] == Double(latest))
        #expect(vendor.pollInterval == .seconds(300), "30,000 a day leaves the requested 5 min")
        try await vendor.poll()
        #expect(simulator.requests["/v1/users/self"] == 1 && simulator.requests["/v1/users/self/devices"] == 1, "the list is read again only every 6 h")
    }

    @Test func aRefusedTokenIsAuthFailedFromTheTextPlainAnswerHeldOffAndNeverShown() async throws {
        let (simulator, vendor, _) = try await cloud(token: "wrong-token-456")
        defer { Task { await simulator.stop() } }
        let error = await gatewayError { try await vendor.poll() }
        #expect(error?.code == .authFailed && error?.httpStatus == 401 && error?.suggestion.contains("token_file") == true)
        #expect(error?.message.contains("wrong-token-456") == false)
        let asked = simulator.requests.values.reduce(0, +)
        _ = await gatewayError { try await vendor.poll() }
        #expect(simulator.requests.values.reduce(0, +) == asked && vendor.http.health.state == .down, "held off")
    }

    @Test func limitsServerErrorsAndBrokenAnswersAreClassified() async throws {
        let clock = ManualClock()
        let (simulator, vendor, log) = try await cloud(clock: clock)
        defer { Task { await simulator.stop() } }
        try await vendor.poll()
        simulator.inject(.rateLimited(retryAfter: 120))
        let limited = await gatewayError { try await vendor.poll() }
        #expect(limited?.code == .rateLimited && limited?.retryAfter == .seconds(120))
        simulator.inject(.quotaErrorBody)
        #expect(await gatewayError { try await vendor.poll() }?.code == .rateLimited)
        simulator.inject(.malformedJSON)
        #expect(await gatewayError { try await vendor.poll() }?.code == .malformedResponse)
        simulator.inject(.serverError)
        #expect(await gatewayError { try await vendor.poll() }?.code == .vendorServerError)
        simulator.inject(.slow(seconds: 3))
        #expect(await gatewayError { try await vendor.poll() }?.code == .vendorTimeout)
        // Five failures in a row opened the breaker; once its pause is over the next poll goes through.
        #expect(await gatewayError { try await vendor.poll() }?.code == .breakerOpen)
        clock.advance(by: .seconds(121))
        try await vendor.poll()
        #expect(log.states.count == 1 && vendor.http.health.state != .down)
    }

    func local(_ hosts: [String], rooms: [String?]) async throws -> ([AwairSimulator], AwairLocalVendor, EventLog) {
        var simulators: [AwairSimulator] = []
        var monitors: [AwairLocalOptions.Monitor] = []
        for (host, room) in zip(hosts, rooms) {
            let simulator = try AwairSimulator(mode: .local(host: host), folder: Fixtures.path("awair", ""))
            try await simulator.start()
            simulators.append(simulator)
            monitors.append(.init(url: await simulator.baseURL, room: room))
        }
        let log = EventLog()
        let network = NetworkOptions(url: monitors[0].url, timeout: .seconds(2), pollInterval: .seconds(30))
        let vendor = try AwairLocalVendor(instanceID: "air", options: AwairLocalOptions(network: network, monitors: monitors),
                                          sink: log.sink, context: VendorContext(clock: ManualClock()))
        return (simulators, vendor, log)
    }

    @Test func theLocalAPIGivesTheSameKeysPlusPM10AndDewPoint() async throws {
        let (simulators, vendor, log) = try await local(["awair-elem-1419e1.local"], rooms: ["Office"])
        defer { Task { for simulator in simulators { await simulator.stop() } } }
        try await vendor.poll()
        let device = try #require(log.inventories.last?.first)
        let config = try recorded("latest_local.yaml", "/settings/config/data")
        #expect(device.id.rawValue == "air_awair-element_5366" && device.room == "Office" && device.model == "awair-element")
        #expect(device.swVersion == config["fw_version"] as? String && device.serialNumber == config["wifi_mac"] as? String)
        let latest = try recorded("latest_local.yaml", "/air-data/latest")
        #expect(log.states[device.id] == [
            "temperature": .number(try number(latest["temp"])), "humidity": .number(try number(latest["humid"])),
            "co2": .number(try number(latest["co2"])), "voc_ppb": .number(try number(latest["voc"])), "pm25": .number(try number(latest["pm25"])),
            "pm10": .number(try number(latest["pm10_est"])), "dew_point": .number(try number(latest["dew_point"])),
            "score": .number(try number(latest["score"])),
        ])
        #expect(device.keys == ["temperature", "humidity", "co2", "voc_ppb", "pm25", "pm10", "dew_point", "score"])
    }

    /// The second recorded Element never had its Local API read (no `latest` in the cassettes): its 404 says to
    /// turn the Local API on, and the first monitor is published all the same.
    @Test func oneSilentMonitorDoesNotHideTheOthers() async throws {
        let (simulators, vendor, log) = try await local(["awair-elem-1419e1.local", "awair-elem-1416dc.local"], rooms: ["Office", "Bedroom"])
        defer { Task { for simulator in simulators { await simulator.stop() } } }
        let error = await gatewayError { try await vendor.poll() }
        #expect(error?.code == .notFound && error?.suggestion.contains("Local API") == true)
        #expect(log.inventories.last?.map(\.id.rawValue) == ["air_awair-element_5366"])
        #expect(log.states.count == 1)
    }

    @Test func theLocalEntryTakesOneURLOrAList() throws {
        func parse(_ node: ConfigNode) -> (AwairLocalOptions?, [String]) {
            var reader = ConfigReader()
            let options = AwairLocalVendorFactory.parse(VendorSettings(type: "awair_local", id: "air", options: node), reader: &reader, environment: [:])
            return (options, reader.problems.map(\.path))
        }
        let one = parse(.mapping([(key: "url", value: .scalar("http://192.168.1.225", line: 1)), (key: "room", value: .scalar("Office", line: 2))]))
        #expect(one.1.isEmpty && one.0?.monitors == [.init(url: "http://192.168.1.225", room: "Office")] && one.0?.network.pollInterval == .seconds(30))
        let list = parse(.mapping([(key: "devices", value: .sequence([
            .mapping([(key: "url", value: .scalar("http://10.0.0.2", line: 1)), (key: "room", value: .scalar("Kitchen", line: 1))]),
            .mapping([(key: "url", value: .scalar("http://10.0.0.3", line: 2))]),
        ])), (key: "timeout", value: .scalar("5", line: 3))]))
        #expect(list.1.isEmpty && list.0?.monitors.map(\.url) == ["http://10.0.0.2", "http://10.0.0.3"] && list.0?.network.timeout == .seconds(5))
        #expect(parse(.mapping([])).1 == ["vendors[0].url"])
        let both = parse(.mapping([(key: "url", value: .scalar("http://10.0.0.2", line: 1)),
                                   (key: "devices", value: .sequence([.mapping([(key: "url", value: .scalar("http://10.0.0.3", line: 2))])]))]))
        #expect(both.1 == ["vendors[0].url"])
        let bad = parse(.mapping([(key: "devices", value: .sequence([.mapping([(key: "url", value: .scalar("not a url", line: 1))])]))]))
        #expect(bad.0 == nil && bad.1 == ["vendors[0].devices[0].url"])
    }
}
