import Foundation
import GatewayModel
import GatewayTesting
import Resilience
import Testing
@testable import VendorEmporia
import VendorKit
import VendorSimulators
import VendorTesting

/// `type: emporia` against a simulator of Emporia's cloud (PyEmVue's documented wire format): the refresh-token
/// sign-in, the device tree, per-minute usage as W per Vue, circuit and plug, and switching a plug.
@Suite struct EmporiaTests {
    static let refresh = "emporia-refresh-token-xyz"

    func start(token: String = EmporiaTests.refresh, clock: ManualClock = ManualClock()) async throws -> (EmporiaSimulator, EmporiaVendor, EventLog) {
        let simulator = EmporiaSimulator(refreshToken: Self.refresh)
        try await simulator.start()
        let log = EventLog()
        let network = NetworkOptions(url: await simulator.baseURL, timeout: .seconds(2), pollInterval: .seconds(60),
                                     quota: EmporiaVendorFactory.defaults.quota)
        let options = EmporiaOptions(network: network, refreshToken: VendorSecret(token), authURL: await simulator.baseURL + "/")
        let vendor = try EmporiaVendor(instanceID: "vue", options: options, sink: log.sink, context: VendorContext(clock: clock))
        return (simulator, vendor, log)
    }

    static func id(_ raw: String) -> DeviceID { DeviceID(vendorInstance: "vue", vendorDeviceID: raw) }

    @Test func theVueItsCircuitsAndThePlugArePublishedInWatts() async throws {
        let (simulator, vendor, log) = try await start()
        defer { Task { await simulator.stop() } }
        try await vendor.poll()
        let devices = try #require(log.inventories.last)
        #expect(devices.map(\.id.rawValue) == ["vue_1234", "vue_1234_1", "vue_1234_2", "vue_1234_balance", "vue_3456"])
        #expect(devices.map(\.name) == ["Home", "Kitchen", "A/C", "Balance", "Coffee maker"])
        let house = simulator.house
        // kWh in the minute × 60,000 = W.
        #expect(log.states[Self.id("1234")] == ["home_power": .number(house.mains)])
        #expect(log.states[Self.id("1234_1")] == ["power": .number(house.kitchen)])
        #expect(log.states[Self.id("1234_2")] == ["power": .number(house.airConditioner)])
        #expect(log.states[Self.id("1234_balance")] == ["power": .number(house.balance)])
        #expect(log.states[Self.id("3456")] == ["state": .string("ON"), "power": .number(house.plugWatts)])
        #expect(devices.last?.isWritable("state") == true && devices.first?.isWritable("home_power") == false)
        #expect(simulator.logins == 1)
    }

    @Test func aPlugIsSwitchedAndReadBack() async throws {
        let (simulator, vendor, log) = try await start()
        defer { Task { await simulator.stop() } }
        try await vendor.poll()
        let command = DeviceCommand(id: "c1", device: Self.id("3456"), vendorID: "vue", vendorDeviceID: "3456", changes: ["state": .string("OFF")],
                                    issuedAt: Date(), expiresAt: Date().addingTimeInterval(30))
        let outcome = try await vendor.execute(command)
        #expect(outcome.confirmed == ["state": .string("OFF")] && simulator.house.plugOn == false && simulator.outletPutCount == 1)
        #expect(try await vendor.readState(Self.id("3456")) == ["state": .string("OFF")])
        try await vendor.poll()
        #expect(log.states[Self.id("3456")] == ["state": .string("OFF"), "power": .number(0)])
        let circuit = DeviceCommand(id: "c2", device: Self.id("1234_1"), vendorID: "vue", vendorDeviceID: "1234_1", changes: ["state": .string("OFF")],
                                    issuedAt: Date(), expiresAt: Date().addingTimeInterval(30))
        await #expect(throws: GatewayError.self) { try await vendor.execute(circuit) }
        #expect(simulator.outletPutCount == 1, "a circuit is never switched")
    }

    @Test func anExpiredIdTokenIsRenewedAndARefusedRefreshTokenIsHeldOff() async throws {
        let (simulator, vendor, log) = try await start()
        defer { Task { await simulator.stop() } }
        try await vendor.poll()
        simulator.expireToken()
        try await vendor.poll()
        #expect(simulator.logins == 2 && log.states[Self.id("1234")] != nil, "401: signed in again once, the call repeated")

        let (other, refused, _) = try await start(token: "stale-refresh-token-123")
        defer { Task { await other.stop() } }
        let error = await gatewayError { try await refused.poll() }
        #expect(error?.code == .authFailed && error?.suggestion.contains("refresh_token_file") == true)
        #expect(error?.message.contains("stale-refresh-token-123") == false)
        let asked = other.requests.values.reduce(0, +)
        _ = await gatewayError { try await refused.poll() }
        #expect(other.requests.values.reduce(0, +) == asked && refused.http.health.state == .down, "held off")
    }

    @Test func limitsServerErrorsAndBrokenAnswersAreClassifiedAndPollsFitTheDailyBudget() async throws {
        let (simulator, vendor, _) = try await start()
        defer { Task { await simulator.stop() } }
        try await vendor.poll()
        simulator.inject(.rateLimited(retryAfter: 30))
        #expect(await gatewayError { try await vendor.poll() }?.code == .rateLimited)
        simulator.inject(.serverError)
        #expect(await gatewayError { try await vendor.poll() }?.code == .vendorServerError)
        simulator.inject(.slow(seconds: 3))
        #expect(await gatewayError { try await vendor.poll() }?.code == .vendorTimeout)
        // With a plug the device list is read every poll too: 2 calls a poll within 1,600 of 2,000 a day → 108 s.
        #expect(vendor.pollInterval == .seconds(108))
    }

    @Test func theEntryTakesARefreshTokenAndSaysTheSRPLoginIsNotBuilt() {
        var reader = ConfigReader()
        let entry = VendorSettings(type: "emporia", id: "vue", options: .mapping([(key: "password_file", value: .scalar("/x", line: 1))]))
        _ = EmporiaVendorFactory.parse(entry, reader: &reader, environment: ["LBS_VUE_REFRESH_TOKEN": "t"])
        #expect(reader.problems.map(\.path) == ["vendors[0].password_file"])
        var fine = ConfigReader()
        let options = EmporiaVendorFactory.parse(VendorSettings(type: "emporia", id: "vue"), reader: &fine, environment: ["LBS_VUE_REFRESH_TOKEN": "t"])
        #expect(fine.problems.isEmpty && options?.network.url == "https://api.emporiaenergy.com" && options?.network.quota?.perDay == 2000)
        #expect(options?.authURL == "https://cognito-idp.us-east-2.amazonaws.com/" && options?.refreshToken.reveal() == "t")
    }
}
