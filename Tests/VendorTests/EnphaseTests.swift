import Foundation
import GatewayModel
import GatewayTesting
import SimulatorKit
import Testing
import VendorKit
@testable import VendorEnphase
import VendorSimulators
import VendorTesting

/// `type: enphase` against pyenphase's recorded firmware folders (Tests/Fixtures/enphase), each served by the
/// simulator: the published numbers are the numbers in the files, taken from the source pyenphase takes them from.
@Suite struct EnphaseTests {
    static let token = "eyJhbGciOiJFUzI1NiJ9.eyJhdWQiOiIxMjIyMzgwODI3NjMiLCJlbnBoYXNlVXNlciI6Im93bmVyIn0.c2ln"

    func start(_ folder: String, token: String? = EnphaseTests.token, inverters: Bool = false) async throws -> (EnphaseSimulator, EnphaseVendor, EventLog) {
        let simulator = try EnphaseSimulator(folder: Fixtures.path("enphase", folder), token: Self.token)
        try await simulator.start()
        let log = EventLog()
        let network = NetworkOptions(url: await simulator.baseURL, timeout: .seconds(5), pollInterval: .seconds(60))
        let vendor = try EnphaseVendor(instanceID: "envoy", options: EnphaseOptions(network: network, token: token.map(VendorSecret.init), inverters: inverters),
                                       sink: log.sink, context: VendorContext(clock: ManualClock()))
        return (simulator, vendor, log)
    }

    func json(_ folder: String, _ file: String) throws -> Any {
        try JSONSerialization.jsonObject(with: Fixtures.data("enphase", "\(folder)/\(file)"))
    }

    func entry(_ object: Any, _ section: String, _ type: String, _ measurement: String?) throws -> [String: Any] {
        let entries = try #require((object as? [String: Any])?[section] as? [[String: Any]])
        return try #require(entries.first { $0["type"] as? String == type && $0["measurementType"] as? String == measurement })
    }

    @Test func firmware3WithoutCTsGivesTheInvertersProduction() async throws {
        let (simulator, vendor, log) = try await start("3.9.36", token: nil)
        defer { Task { await simulator.stop() } }
        try await vendor.poll()
        let device = try #require(log.inventories.last?.first)
        #expect(device.id.rawValue == "envoy_121426016034" && device.swVersion == "R3.9.36")
        let v1 = try #require(try json("3.9.36", "api_v1_production") as? [String: Any])
        #expect(log.states[device.id] == [
            "solar_power": .number(try #require(v1["wattsNow"] as? Double)),
            "solar_energy": .number(try #require(v1["wattHoursLifetime"] as? Double) / 1000),
        ])
        #expect(simulator.tokenChecks == 0, "firmware 3 needs no token")
    }

    @Test(arguments: ["7.6.175_with_cts", "8.2.4382_ACB"])
    func meteredFirmwareGivesTheCTValues(folder: String) async throws {
        let (simulator, vendor, log) = try await start(folder)
        defer { Task { await simulator.stop() } }
        try await vendor.poll()
        let device = try #require(log.inventories.last?.first)
        let production = try json(folder, "production.json")
        let solar = try entry(production, "production", "eim", "production")
        let home = try entry(production, "consumption", "eim", "total-consumption")
        let net = try entry(production, "consumption", "eim", "net-consumption")
        let meters = try #require(try json(folder, "ivp_meters") as? [[String: Any]])
        let netEID = try #require(meters.first { $0["measurementType"] as? String == "net-consumption" }?["eid"] as? Int)
        let readings = try #require(try json(folder, "ivp_meters_readings") as? [[String: Any]])
        let netReading = try #require(readings.first { $0["eid"] as? Int == netEID })
        func rounded(_ value: Any?, _ scale: Double = 1) throws -> StateValue {
            .number(((try #require(value as? Double)) * scale * 1000).rounded() / 1000)
        }
        var expected: [String: StateValue] = [
            "solar_power": try rounded(solar["wNow"]), "solar_energy": try rounded(solar["whLifetime"], 0.001),
            "home_power": try rounded(home["wNow"]), "home_energy": try rounded(home["whLifetime"], 0.001),
            "grid_power": try rounded(net["wNow"]),
            "grid_import_energy": try rounded(netReading["actEnergyDlvd"], 0.001), "grid_export_energy": try rounded(netReading["actEnergyRcvd"], 0.001),
        ]
        if let battery = ((production as? [String: Any])?["storage"] as? [[String: Any]])?.first(where: { ($0["activeCount"] as? Int ?? 0) > 0 }) {
            // Every battery together: secctrl's agg_soc, and the AC Battery's W plus the IQ Batteries' mW.
            let secctrl = try #require(try json(folder, "ivp_ensemble_secctrl") as? [String: Any])
            expected["battery_level"] = .number(Double(try #require(secctrl["agg_soc"] as? Int)))
            let iq = try #require((try json(folder, "ivp_ensemble_power") as? [String: Any])?["devices:"] as? [[String: Any]])
            let milliwatts = iq.compactMap { $0["real_power_mw"] as? Int }.reduce(0, +)
            expected["battery_power"] = .number(Double(try #require(battery["wNow"] as? Int)) + Double(milliwatts) / 1000)
        }
        #expect(log.states[device.id] == expected)
        #expect(simulator.tokenChecks == 1)
        if folder == "7.6.175_with_cts" {
            #expect(log.states[device.id]?["grid_power"] == .number(-11.468), "exporting: − export")
            #expect(expected["battery_level"] == nil)
        } else {
            #expect(log.states[device.id]?["battery_level"] == .number(39) && log.states[device.id]?["battery_power"] == .number(365))
        }
    }

    @Test func anExpiredSessionIsCoveredByTheTokenAndAMissingOrRefusedTokenIsSaidPlainly() async throws {
        let (simulator, vendor, log) = try await start("7.6.175_with_cts")
        defer { Task { await simulator.stop() } }
        try await vendor.poll()
        simulator.expireSessions()
        // Every request carries the bearer token too, as pyenphase's do: a lost session cookie costs nothing.
        try await vendor.poll()
        #expect(simulator.tokenChecks == 1 && vendor.http.health.lastError == nil)
        #expect(log.states.values.first?["solar_power"] != nil)

        let (plain, noToken, _) = try await start("7.6.175_with_cts", token: nil)
        defer { Task { await plain.stop() } }
        let missing = await gatewayError { try await noToken.poll() }
        #expect(missing?.code == .authFailed && missing?.suggestion.contains("token_file") == true)

        let (other, wrong, _) = try await start("8.2.4382_ACB", token: "not-the-token")
        defer { Task { await other.stop() } }
        let refused = await gatewayError { try await wrong.poll() }
        #expect(refused?.code == .authFailed && refused?.message.contains("refused the owner token") == true)
        #expect(refused?.message.contains("not-the-token") == false)
    }

    @Test func inverterDevicesAreOptIn() async throws {
        let (simulator, vendor, log) = try await start("8.2.4382_ACB", inverters: true)
        defer { Task { await simulator.stop() } }
        try await vendor.poll()
        let list = try #require(try json("8.2.4382_ACB", "api_v1_production_inverters") as? [[String: Any]])
        let devices = try #require(log.inventories.last)
        #expect(devices.count == 1 + list.count)
        let first = try #require(list.first)
        let id = DeviceID(vendorInstance: "envoy", vendorDeviceID: try #require(first["serialNumber"] as? String))
        #expect(log.states[id]?["power"] == .number(Double(try #require(first["lastReportWatts"] as? Int))))
        #expect(log.states[id]?["max_power"] == .number(Double(try #require(first["maxReportWatts"] as? Int))))
    }

    @Test func legacyFirmwareAnswersTheDigestChallengeAsEnvoyWithTheSerial() async throws {
        let (simulator, vendor, log) = try await start("3.9.36", token: nil, inverters: true)
        defer { Task { await simulator.stop() } }
        try await vendor.poll()
        #expect(simulator.digestChallenges == 1, "challenged once, answered with envoy and the serial's last six digits")
        let list = try #require(try json("3.9.36", "api_v1_production_inverters") as? [[String: Any]])
        #expect(log.inventories.last?.count == 1 + list.count)
        #expect(MD5.hex("") == "d41d8cd98f00b204e9800998ecf8427e" && MD5.hex("abc") == "900150983cd24fb0d6963f7d28e17f72")
    }

    @Test func theInfoXMLIsRead() throws {
        let info = try #require(EnphaseInfo.parse(String(decoding: try Fixtures.data("enphase", "7.6.175_with_cts/info"), as: UTF8.self)))
        #expect(info.serial == "122238082763" && info.firmware == "D7.6.175" && info.majorVersion == 7 && info.needsToken)
        let old = try #require(EnphaseInfo.parse(String(decoding: try Fixtures.data("enphase", "3.9.36/info"), as: UTF8.self)))
        #expect(old.majorVersion == 3 && !old.needsToken)
        #expect(EnphaseInfo.parse("<html>not an envoy</html>") == nil)
    }
}

/// The Enlighten login: username and password get a token for the gateway's serial from Enphase's cloud
/// (simulated), fetched again before it expires; a refused password or MFA is said plainly.
@Suite struct EnphaseEnlightenTests {
    func start(password: String = "cloud-pw", lifetime: Double = 31_536_000) async throws -> (EnlightenSimulator, EnphaseSimulator, EnphaseVendor, EventLog, ManualClock) {
        let cloud = EnlightenSimulator(email: "owner@example.com", password: "cloud-pw", lifetime: lifetime)
        try await cloud.start()
        let envoy = try EnphaseSimulator(folder: Fixtures.path("enphase", "7.6.175_with_cts"), token: "unused")
        try await envoy.start()
        let log = EventLog()
        let clock = ManualClock()
        let login = EnphaseOptions.Enlighten(username: "owner@example.com", password: VendorSecret(password),
                                             enlightenURL: await cloud.baseURL, entrezURL: await cloud.baseURL + "/")
        let network = NetworkOptions(url: await envoy.baseURL, timeout: .seconds(5), pollInterval: .seconds(60))
        let vendor = try EnphaseVendor(instanceID: "envoy", options: EnphaseOptions(network: network, token: nil, enlighten: login),
                                       sink: log.sink, context: VendorContext(clock: clock))
        return (cloud, envoy, vendor, log, clock)
    }

    @Test func theLoginGetsATokenForTheSerialAndRenewsItBeforeItExpires() async throws {
        let (cloud, envoy, vendor, log, clock) = try await start(lifetime: 1000)
        defer { Task { await cloud.stop(); await envoy.stop() } }
        try await vendor.poll()
        #expect(cloud.logins == 1 && cloud.tokensIssued == 1 && envoy.tokenChecks == 1)
        #expect(log.states.values.first?["solar_power"] != nil)
        clock.advance(by: .seconds(500))
        try await vendor.poll()
        #expect(cloud.tokensIssued == 1, "half its life left: kept")
        clock.advance(by: .seconds(450))
        try await vendor.poll()
        #expect(cloud.tokensIssued == 2, "renewed at 90 % of its life, before it expires")
    }

    @Test func aRefusedPasswordOrMFAIsAuthFailedWithWhatToDo() async throws {
        let (cloud, envoy, vendor, _, _) = try await start(password: "wrong-pw")
        defer { Task { await cloud.stop(); await envoy.stop() } }
        let refused = await gatewayError { try await vendor.poll() }
        #expect(refused?.code == .authFailed && refused?.message.contains("Enlighten refused the login") == true)
        #expect(refused?.message.contains("wrong-pw") == false)

        let (mfaCloud, mfaEnvoy, mfaVendor, _, _) = try await start()
        defer { Task { await mfaCloud.stop(); await mfaEnvoy.stop() } }
        mfaCloud.requireMFA(true)
        let mfa = await gatewayError { try await mfaVendor.poll() }
        #expect(mfa?.code == .authFailed && mfa?.message.contains("multi-factor") == true)
    }

    @Test func theEntryTakesEitherATokenOrALogin() {
        func parse(_ pairs: [(String, String)], environment: [String: String] = [:]) -> (EnphaseOptions?, [String]) {
            var reader = ConfigReader()
            let entry = VendorSettings(type: "enphase", id: "envoy", options: .mapping(
                [(key: "url", value: .scalar("https://envoy.local", line: 1))] + pairs.map { (key: $0.0, value: ConfigNode.scalar($0.1, line: 2)) }))
            let options = EnphaseVendorFactory.parse(entry, reader: &reader, environment: environment)
            return (options, reader.problems.map(\.path))
        }
        let login = parse([("username", "me@example.com"), ("password_env", "PW"), ("entrez_url", "http://127.0.0.1:9/")], environment: ["PW": "x"])
        #expect(login.1.isEmpty && login.0?.enlighten?.username == "me@example.com" && login.0?.enlighten?.entrezURL == "http://127.0.0.1:9/")
        #expect(login.0?.enlighten?.enlightenURL == "https://enlighten.enphaseenergy.com")
        #expect(parse([("username", "me@example.com")]).1 == ["vendors[0].password_file"])
        #expect(parse([("password_env", "PW")], environment: ["PW": "x"]).1 == ["vendors[0].username"])
        let token = parse([], environment: ["LBS_ENVOY_TOKEN": "jwt"]).0
        #expect(token?.network.tls == .firstUse && token?.token?.reveal() == "jwt" && token?.network.timeout == .seconds(45) && token?.enlighten == nil)
    }
}
