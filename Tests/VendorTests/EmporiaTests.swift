import BigInt
import Foundation
import ModularPower
import GatewayModel
import GatewayTesting
import Resilience
import TestTraits
import Testing
@testable import VendorEmporia
import VendorKit
import VendorSimulators
import VendorTesting

/// `type: emporia` against a simulator of Emporia's cloud (PyEmVue's documented wire format): the refresh-token
/// sign-in, the device tree, per-minute usage as W per Vue, circuit and plug, and switching a plug.
@Suite(.integration) struct EmporiaTests {
    static let refresh = "emporia-refresh-token-xyz"

    func start(token: String? = EmporiaTests.refresh, password: String? = nil, clock: ManualClock = ManualClock()) async throws
        -> (EmporiaSimulator, EmporiaVendor, EventLog) {
        let simulator = EmporiaSimulator(refreshToken: Self.refresh, username: "home@example.com", password: "emporia-password")
        try await simulator.start()
        let log = EventLog()
        // SRP sign-ins do 3072-bit arithmetic, slow in debug builds: a wider timeout for the sign-in.
        let network = NetworkOptions(url: await simulator.baseURL, timeout: .seconds(password == nil ? 2 : 30), pollInterval: .seconds(60),
                                     quota: EmporiaVendorFactory.defaults.quota)
        let options = EmporiaOptions(network: network, refreshToken: token.map(VendorSecret.init), username: password.map { _ in "home@example.com" },
                                     password: password.map(VendorSecret.init), authURL: await simulator.baseURL + "/")
        let vendor = try EmporiaVendor(instanceID: "vue", options: options, sink: log.sink, context: VendorContext(clock: clock))
        return (simulator, vendor, log)
    }

    static func id(_ raw: String) -> DeviceID { DeviceID(vendorInstance: "vue", vendorDeviceID: raw) }

    @Test func theVueItsCircuitsAndThePlugArePublishedInWatts() async throws {
        let (simulator, vendor, log) = try await start()
        defer { Task { await simulator.stop() } }
        try await vendor.poll()
        let devices = try #require(log.inventories.last)
        #expect(devices.map(\.id.rawValue) == ["vue_1234", "vue_1234_1", "vue_1234_2", "vue_1234_balance", "vue_3456", "vue_4567"])
        #expect(devices.map(\.name) == ["Home", "Kitchen", "A/C", "Balance", "Coffee maker", "Garage charger"])
        let house = simulator.house
        // kWh in the minute × 60,000 = W.
        #expect(log.states[Self.id("1234")] == ["home_power": .number(house.mains)])
        #expect(log.states[Self.id("1234_1")] == ["power": .number(house.kitchen)])
        #expect(log.states[Self.id("1234_2")] == ["power": .number(house.airConditioner)])
        #expect(log.states[Self.id("1234_balance")] == ["power": .number(house.balance)])
        #expect(log.states[Self.id("3456")] == ["state": .string("ON"), "power": .number(house.plugWatts)])
        #expect(log.states[Self.id("4567")] == ["state": .string("ON"), "charging_current": .number(32), "power": .number(house.chargerWatts)])
        #expect(devices[4].isWritable("state") && devices.first?.isWritable("home_power") == false)
        #expect(devices[5].type == .evCharger && devices[5].isWritable("charging_current") && devices[5].isWritable("state"))
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

    @Test func theEntryTakesAPasswordOrARefreshToken() {
        var reader = ConfigReader()
        let entry = VendorSettings(type: "emporia", id: "vue", options: .mapping([(key: "password_env", value: .scalar("VUE_PW", line: 1))]))
        _ = EmporiaVendorFactory.parse(entry, reader: &reader, environment: ["VUE_PW": "secret"])
        #expect(reader.problems.map(\.path) == ["vendors[0].username", "vendors[0].username"], "a password without a username")
        var none = ConfigReader()
        #expect(EmporiaVendorFactory.parse(VendorSettings(type: "emporia", id: "vue"), reader: &none, environment: [:]) == nil)
        #expect(none.problems.first?.fix.contains("password_file") == true)
        var fine = ConfigReader()
        let options = EmporiaVendorFactory.parse(VendorSettings(type: "emporia", id: "vue"), reader: &fine, environment: ["LBS_VUE_REFRESH_TOKEN": "t"])
        #expect(fine.problems.isEmpty && options?.network.url == "https://api.emporiaenergy.com" && options?.network.quota?.perDay == 2000)
        #expect(options?.authURL == "https://cognito-idp.us-east-2.amazonaws.com/" && options?.refreshToken?.reveal() == "t")
        var password = ConfigReader()
        let signIn = VendorSettings(type: "emporia", id: "vue", options: .mapping([(key: "username", value: .scalar("me@example.com", line: 1))]))
        let withPassword = EmporiaVendorFactory.parse(signIn, reader: &password, environment: ["LBS_VUE_PASSWORD": "pw"])
        #expect(password.problems.isEmpty && withPassword?.username == "me@example.com" && withPassword?.password?.reveal() == "pw")
        #expect(withPassword?.refreshToken == nil && withPassword?.userPoolID == "us-east-2_ghlOXVLi1")
    }

    @Test func thePasswordSignInUsesSRPAndItsRefreshTokenAfterwards() async throws {
        let (simulator, vendor, log) = try await start(token: nil, password: "emporia-password")
        defer { Task { await simulator.stop() } }
        try await vendor.poll()
        #expect(simulator.passwordLogins == 1 && log.states[Self.id("1234")] != nil, "signed in with SRP: the server checked the password claim")
        simulator.expireToken()
        try await vendor.poll()
        #expect(simulator.passwordLogins == 1 && simulator.logins == 2, "the id token renewed with the refresh token SRP handed out")
        simulator.revokeRefreshTokens()
        simulator.expireToken()
        try await vendor.poll()
        #expect(simulator.passwordLogins == 2, "a refused refresh token falls back to the password")
    }

    @Test func aWrongPasswordIsHeldOffAndAnMFAStepIsExplained() async throws {
        let (simulator, vendor, _) = try await start(token: nil, password: "not-the-password")
        defer { Task { await simulator.stop() } }
        let error = await gatewayError { try await vendor.poll() }
        #expect(error?.code == .authFailed && error?.suggestion.contains("password_file") == true)
        #expect(error.map { !"\($0)".contains("not-the-password") } == true)
        let asked = simulator.requests.values.reduce(0, +)
        _ = await gatewayError { try await vendor.poll() }
        #expect(simulator.requests.values.reduce(0, +) == asked && vendor.http.health.state == .down, "held off")

        let (mfa, asksMFA, _) = try await start(token: nil, password: "emporia-password")
        defer { Task { await mfa.stop() } }
        mfa.requireMFA()
        let mfaError = await gatewayError { try await asksMFA.poll() }
        #expect(mfaError?.code == .authFailed && mfaError?.message.contains("SOFTWARE_TOKEN_MFA") == true)
    }

    @Test func theChargerIsSwitchedAndItsCurrentSetWithinItsRange() async throws {
        let (simulator, vendor, log) = try await start()
        defer { Task { await simulator.stop() } }
        try await vendor.poll()
        func command(_ changes: [String: StateValue]) -> DeviceCommand {
            DeviceCommand(id: UUID().uuidString, device: Self.id("4567"), vendorID: "vue", vendorDeviceID: "4567", changes: changes,
                          issuedAt: Date(), expiresAt: Date().addingTimeInterval(30))
        }
        let slower = try await vendor.execute(command(["charging_current": .number(16)]))
        #expect(slower.confirmed == ["charging_current": .number(16)] && simulator.house.chargingRate == 16 && simulator.house.chargerOn)
        let off = try await vendor.execute(command(["state": .string("OFF")]))
        #expect(off.confirmed == ["state": .string("OFF")] && !simulator.house.chargerOn && simulator.house.chargingRate == 16)
        for wrong: StateValue in [.number(41), .number(5), .number(10.5), .string("fast")] {
            await #expect(throws: GatewayError.self) { try await vendor.execute(command(["charging_current": wrong])) }
        }
        #expect(simulator.chargerPutCount == 2, "out-of-range currents never reach Emporia")
        #expect(try await vendor.readState(Self.id("4567")) == ["state": .string("OFF"), "charging_current": .number(16)])
        try await vendor.poll()
        #expect(log.states[Self.id("4567")] == ["state": .string("OFF"), "charging_current": .number(16), "power": .number(0)])
    }
}

/// Cognito's SRP-6a sign-in against an exchange computed by pycognito (PyEmVue's sign-in library).
@Suite(.integration) struct CognitoSRPTests {
    struct Vector: Decodable {
        var pool_id: String, username: String, password: String, user_id_for_srp: String, salt: String
        var small_a: String, srp_a: String, srp_b: String, secret_block: String, timestamp: String, signature: String
    }

    static func vector() throws -> Vector {
        try JSONDecoder().decode(Vector.self, from: Data(contentsOf: URL(fileURLWithPath: Fixtures.path("emporia", "srp-vector.json"))))
    }

    @Test func theClaimMatchesPycognitoForTheSameNumbers() throws {
        let vector = try Self.vector()
        guard let secret = BigNumber(hex: vector.small_a) else {
            Issue.record("small_a is not hex")
            return
        }
        let srp = CognitoSRP(secret: secret)
        #expect(srp.srpA == vector.srp_a)
        let claim = try srp.passwordClaim(poolID: vector.pool_id, userIDForSRP: vector.user_id_for_srp, password: vector.password,
                                          salt: vector.salt, serverB: vector.srp_b, secretBlock: vector.secret_block, timestamp: vector.timestamp)
        #expect(claim == vector.signature)
        let wrong = try srp.passwordClaim(poolID: vector.pool_id, userIDForSRP: vector.user_id_for_srp, password: vector.password + "x",
                                          salt: vector.salt, serverB: vector.srp_b, secretBlock: vector.secret_block, timestamp: vector.timestamp)
        #expect(wrong != vector.signature)
    }

    @Test func theMontgomeryPowerAgreesWithBigInt() {
        for width in [64, 200, 1024] {
            let modulus = BigUInt.randomInteger(withExactWidth: width) | 1
            let base = BigUInt.randomInteger(lessThan: modulus)
            let exponent = BigUInt.randomInteger(withMaximumWidth: 300)
            let power = BigNumber(bytes: [UInt8](base.serialize())).power(BigNumber(bytes: [UInt8](exponent.serialize())),
                                                                          oddModulus: BigNumber(bytes: [UInt8](modulus.serialize())))
            #expect(BigUInt(Data(power.bytes)) == base.power(exponent, modulus: modulus), "\(width) bits")
        }
        #expect(BigNumber(7).power(BigNumber(0), oddModulus: BigNumber(13)) == BigNumber(1))
        #expect(BigNumber(20).power(BigNumber(1), oddModulus: BigNumber(13)) == BigNumber(7))
        #expect(BigNumber(3).power(BigNumber(5), oddModulus: BigNumber(16)) == BigNumber(3), "an even modulus takes the general path")
    }

    @Test func theTimestampIsCognitosAndABadChallengeIsRefused() throws {
        #expect(CognitoSRP.timestamp(Date(timeIntervalSince1970: 1_772_694_489)) == "Thu Mar 5 07:08:09 UTC 2026")
        #expect(CognitoSRP.timestamp(Date(timeIntervalSince1970: 1_795_000_000)) == "Wed Nov 18 11:06:40 UTC 2026")
        let srp = CognitoSRP()
        #expect(srp.publicValue > BigNumber(1) && srp.publicValue < CognitoSRP.modulus)
        #expect(throws: CognitoSRP.Failure.self) {
            try srp.passwordClaim(poolID: "p_q", userIDForSRP: "u", password: "p", salt: "ab", serverB: CognitoSRP.modulusHex, secretBlock: "AA==", timestamp: "t")
        }
        #expect(throws: CognitoSRP.Failure.self) {
            try srp.passwordClaim(poolID: "p_q", userIDForSRP: "u", password: "p", salt: "ab", serverB: "2", secretBlock: "not base64!", timestamp: "t")
        }
        #expect(CognitoSRP.padded(hex: "abc") == "0abc" && CognitoSRP.padded(hex: "8f") == "008f" && CognitoSRP.padded(hex: "7f") == "7f")
    }
}
