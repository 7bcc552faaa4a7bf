import Foundation
import GatewayModel
import GatewayTesting
import SimulatorKit
import TestTraits
import Testing
import VendorKit
@testable import VendorEnphase
import VendorSimulators
import VendorTesting

/// `type: enphase` against pyenphase's recorded firmware folders (Tests/Fixtures/enphase), each served by the
/// simulator: the published numbers are the numbers in the files, taken from the source pyenphase takes them from.
@Suite(.integration) struct EnphaseTests {
    static let token = "eyJhbGciOiJFUzI1NiJ9.eyJhdWQiOiIxMjIyMzgwODI3NjMiLCJlbnBoYXNlVXNlciI6Im93bmVyIn0.c2ln"

    func start(
        _ folder: String, token: String? = EnphaseTests.token, inverters: Bool = false, outage: ExpectedOutage? = nil,
        timeout: Duration = .seconds(5), now: @escaping @Sendable () -> Date = { Date() }
    ) async throws -> (EnphaseSimulator, EnphaseVendor, EventLog) {
        let simulator = try EnphaseSimulator(folder: Fixtures.path("enphase", folder), token: Self.token)
        try await simulator.start()
        let log = EventLog()
        let network = NetworkOptions(url: await simulator.baseURL, timeout: timeout, pollInterval: .seconds(60))
        let options = EnphaseOptions(network: network, token: token.map(VendorSecret.init), inverters: inverters, nightlyOutage: outage)
        let vendor = try EnphaseVendor(instanceID: "envoy", options: options, sink: log.sink, context: VendorContext(clock: ManualClock(), now: now))
        return (simulator, vendor, log)
    }

    /// A JSON number as Double (whole numbers decode as Int).
    func number(_ value: Any?) throws -> Double {
        if let int = value as? Int { return Double(int) }
        return try #require(value as? Double)
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
            // One phase: the grid meter's voltage and frequency.
            "voltage": .number(try number(netReading["voltage"])), "frequency": .number(try number(netReading["freq"])),
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

    /// Only AC Batteries (pyenphase's 8.3.5169_ACB_inventory: no IQ Battery in `/ivp/ensemble/inventory`, secctrl's
    /// `agg_soc` 0 beside `ACB_agg_soc` 1): the level is the AC Batteries' own `percentFull`, as pyenphase's
    /// `acb_power.state_of_charge` (it has no aggregate then), not the aggregate's 0.
    @Test func anACBOnlyGatewayGivesTheACBsOwnLevel() async throws {
        let folder = "8.3.5169_ACB_inventory"
        let (simulator, vendor, log) = try await start(folder)
        defer { Task { await simulator.stop() } }
        try await vendor.poll()
        let device = try #require(log.inventories.last?.first)
        let storage = try #require(((try json(folder, "production.json")) as? [String: Any])?["storage"] as? [[String: Any]])
        let acb = try #require(storage.first)
        let secctrl = try #require(try json(folder, "ivp_ensemble_secctrl") as? [String: Any])
        #expect(try number(secctrl["agg_soc"]) == 0 && (try number(acb["percentFull"])) == 1, "the recording's shape")
        #expect(log.states[device.id]?["battery_level"] == .number(try number(acb["percentFull"])))
        #expect(log.states[device.id]?["battery_power"] == .number(try number(acb["wNow"])))
        #expect(device.keys.contains("battery_level"))
    }

    /// The level per battery kind, pyenphase's rules: IQ Batteries with AC Batteries → secctrl's `agg_soc` (every
    /// battery together); IQ Batteries only → `ENC_agg_soc`; AC Batteries only → production.json's `percentFull`.
    /// The answers are decoded as the Envoy sends them (the shapes of pyenphase's recordings).
    @Test func theBatteryLevelComesFromTheSourcePyenphaseTrustsPerBatteryKind() throws {
        func decode<T: Decodable>(_ type: T.Type, _ json: String) throws -> T { try JSONDecoder().decode(type, from: Data(json.utf8)) }
        let secctrl = try decode(WireSecCtrl.self, #"{"agg_soc": 39, "Max_energy": 7220, "ENC_agg_soc": 54, "ACB_agg_soc": 25}"#)
        let acb = try decode(WireProductionJSON.self, #"{"storage": [{"type": "acb", "activeCount": 3, "wNow": 260, "percentFull": 25}]}"#)
        let noACB = try decode(WireProductionJSON.self, #"{"storage": [{"type": "acb", "activeCount": 0, "wNow": 0, "percentFull": 0}]}"#)
        let unconfigured = try decode(WireProductionJSON.self, #"{"storage": [{"type": "acb", "activeCount": 2, "wNow": 0}]}"#)
        let iq = try decode(WireEnsemblePower.self, #"{"devices:": [{"serial_num": "122311091641", "real_power_mw": 105000, "soc": 54}]}"#)
        let noIQ = try decode(WireEnsemblePower.self, #"{"devices:": []}"#)
        func state(_ production: WireProductionJSON, _ power: WireEnsemblePower) -> [String: StateValue] {
            var reading = EnphaseMapping.Reading()
            reading.production = production
            reading.secctrl = secctrl
            reading.ensemblePower = power
            return EnphaseMapping.state(reading)
        }
        #expect(state(acb, iq)["battery_level"] == .number(39) && state(acb, iq)["battery_power"] == .number(365))
        #expect(state(noACB, iq)["battery_level"] == .number(54) && state(noACB, iq)["battery_power"] == .number(105))
        #expect(state(acb, noIQ)["battery_level"] == .number(25) && state(acb, noIQ)["battery_power"] == .number(260))
        #expect(state(noACB, noIQ)["battery_level"] == nil && state(noACB, noIQ)["battery_power"] == nil)
        // An ACB entry without `percentFull` is not a configured AC Battery (pyenphase ignores it).
        #expect(state(unconfigured, noIQ)["battery_level"] == nil && state(unconfigured, noIQ)["battery_power"] == nil)
    }

    /// Three phases: every flow also per phase from production.json's `lines` (details=1), the grid meter's energy
    /// and voltage per channel, and no summed `voltage` (the meter's is the three phases added up).
    @Test func aThreePhaseSupplyGivesPerPhaseKeys() async throws {
        let folder = "7.6.175_with_cts_3phase"
        let (simulator, vendor, log) = try await start(folder)
        defer { Task { await simulator.stop() } }
        try await vendor.poll()
        let device = try #require(log.inventories.last?.first)
        let state = try #require(log.states[device.id])
        let production = try json(folder, "production.json")
        let sections: [(String, String, String, String?)] = [
            ("production", "production", "solar_power", "solar_energy"), ("consumption", "total-consumption", "home_power", "home_energy"),
            ("consumption", "net-consumption", "grid_power", nil),
        ]
        for (section, measurement, power, energy) in sections {
            let lines = try #require(try entry(production, section, "eim", measurement)["lines"] as? [[String: Any]])
            #expect(lines.count == 3)
            for (index, line) in lines.enumerated() {
                #expect(state["\(power)_l\(index + 1)"] == .number((try number(line["wNow"]) * 1000).rounded() / 1000))
                if let energy { #expect(state["\(energy)_l\(index + 1)"] == .number((try number(line["whLifetime"])).rounded() / 1000)) }
            }
        }
        let readings = try #require(try json(folder, "ivp_meters_readings") as? [[String: Any]])
        let net = try #require(readings.first { $0["eid"] as? Int == 704643584 })
        let channels = try #require(net["channels"] as? [[String: Any]])
        for (index, channel) in channels.enumerated() {
            #expect(state["voltage_l\(index + 1)"] == .number(try number(channel["voltage"])))
            #expect(state["grid_import_energy_l\(index + 1)"] == .number((try number(channel["actEnergyDlvd"])).rounded() / 1000))
            #expect(state["grid_export_energy_l\(index + 1)"] == .number((try number(channel["actEnergyRcvd"])).rounded() / 1000))
        }
        let frequency = try number(net["freq"])
        #expect(state["voltage"] == nil && state["frequency"] == .number(frequency))
        #expect(state["solar_power_l1"] == .number(-2.864), "night-time: a small negative value is real")
        #expect(device.keys.contains("grid_power_l3") && device.keys.allSatisfy { StateKeys.spec($0) != nil })
        #expect(device.keys.firstIndex(of: "solar_power")! < device.keys.firstIndex(of: "solar_power_l1")!)
    }

    /// Firmware 8.3.5433 copies net consumption into total consumption; the home's use is net + production again,
    /// for the whole and per phase. A split-phase supply (`phaseCount` 2) gives two phases, not the three `lines`.
    @Test func firmware8_3_5433TotalConsumptionIsRepaired() async throws {
        let folder = "8.3.5433_tot_is_net_cons"
        let (simulator, vendor, log) = try await start(folder)
        defer { Task { await simulator.stop() } }
        try await vendor.poll()
        let state = try #require(log.states.values.first)
        let production = try json(folder, "production.json")
        let solar = try entry(production, "production", "eim", "production")
        let net = try entry(production, "consumption", "eim", "net-consumption")
        func sum(_ a: Any?, _ b: Any?, _ scale: Double = 1) throws -> StateValue {
            .number(((try number(a) + number(b)) * scale * 1000).rounded() / 1000)
        }
        #expect(state["home_power"] == (try sum(net["wNow"], solar["wNow"])))
        #expect(state["home_energy"] == (try sum(net["whLifetime"], solar["whLifetime"], 0.001)))
        #expect(state["grid_power"] == .number(try number(net["wNow"])))
        let netLines = try #require(net["lines"] as? [[String: Any]]), solarLines = try #require(solar["lines"] as? [[String: Any]])
        #expect(state["home_power_l1"] == (try sum(netLines[0]["wNow"], solarLines[0]["wNow"])))
        #expect(state["solar_power_l2"] != nil && state["solar_power_l3"] == nil)
    }

    /// The Envoy goes dark shortly after 23:00 every night: inside the window a failure to reach it is
    /// `vendor_unavailable` (info), the breaker stays closed and the vendor never turns `down`; outside it the
    /// same failures are a fault.
    @Test func theNightlyOutageIsQuietInsideItsWindowOnly() async throws {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let night = try #require(calendar.date(from: DateComponents(year: 2026, month: 11, day: 25, hour: 23, minute: 10)))
        let noon = try #require(calendar.date(from: DateComponents(year: 2026, month: 11, day: 25, hour: 12)))
        let window = try #require(DailyWindow("22:55-00:30", timeZone: .utc))
        #expect(window.start == 1375 && window.end == 30 && window.text == "22:55-00:30")
        #expect(window.contains(night) && !window.contains(noon) && window.contains(night.addingTimeInterval(3600)))
        #expect(!window.contains(night.addingTimeInterval(7200)), "01:10 is after it")
        #expect(DailyWindow("25:00-01:00") == nil && DailyWindow("23:00") == nil && DailyWindow("23:00-23:00") == nil)
        let utc = EnphaseOptions.nightly(window)

        // At night the simulator goes dark (connections hang: timeouts); at noon it is gone (connections refused).
        for (moment, quiet) in [(night, true), (noon, false)] {
            let (simulator, vendor, log) = try await start("7.6.175_with_cts", outage: utc, timeout: .seconds(1), now: { moment })
            try await vendor.poll()
            if quiet { simulator.setDark(true) } else { await simulator.stop() }
            defer { Task { await simulator.stop() } }
            for _ in 0..<3 { _ = await gatewayError { try await vendor.poll() } }
            let error = await gatewayError { try await vendor.poll() }
            let health = vendor.http.health
            if quiet {
                #expect(error?.code == .vendorUnavailable && error?.severity == .info && error?.message.contains("23:00") == true)
                #expect(health.state == .degraded && health.breaker == "closed", "expected and quiet: never down")
                #expect(log.states.values.first?["solar_power"] != nil, "the last state stays")
            } else {
                #expect(error?.code == .vendorUnreachable || error?.code == .breakerOpen)
                #expect(health.state == .down)
            }
        }
    }

    /// Broken answers are errors with a code, and the next good answer clears them: a truncated body, an HTML
    /// error page, an answer slower than the timeout, a dropped session (the token is checked again once).
    @Test func brokenAnswersAreClassifiedAndTheNextPollRecovers() async throws {
        let (simulator, vendor, log) = try await start("7.6.175_with_cts", timeout: .seconds(2))
        defer { Task { await simulator.stop() } }
        try await vendor.poll()
        simulator.inject(.malformedJSON)
        #expect(await gatewayError { try await vendor.poll() }?.code == .malformedResponse)
        simulator.inject(.htmlError(status: 500))
        #expect(await gatewayError { try await vendor.poll() }?.code == .vendorServerError)
        simulator.inject(.slow(seconds: 3))
        #expect(await gatewayError { try await vendor.poll() }?.code == .vendorTimeout)
        simulator.inject(.unauthorized)
        try await vendor.poll()
        #expect(simulator.tokenChecks == 2, "one 401: the token is checked again and the call repeated")
        #expect(vendor.http.health.lastError == nil || vendor.http.health.state != .down)
        #expect(log.states.values.first?["solar_power"] != nil)
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
@Suite(.integration) struct EnphaseEnlightenTests {
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
