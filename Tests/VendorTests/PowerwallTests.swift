import CurlHTTP
import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayModel
import GatewayTesting
import Resilience
import TestTraits
import Testing
import VendorKit
@testable import VendorPowerwall
import VendorSimulators
import VendorTesting

/// `type: powerwall` against the simulator, which serves the recorded responses of a real Backup Gateway 2
/// (Tests/Fixtures/powerwall) and the real gateway's traps.
@Suite(.integration) struct PowerwallTests {
    struct Rig {
        let simulator: PowerwallSimulator
        let vendor: PowerwallVendor
        let clock: ManualClock
        let log: EventLog
        var site: DeviceID { vendor.siteID }

        static func start(
            model: PowerwallSimulator.Model = .powerwall2, writable: Bool = false, loginPassword: String? = nil
        ) async throws -> Rig {
            let password = "pw-\(UUID().uuidString.prefix(5))"
            let simulator = try PowerwallSimulator(configuration: .init(
                password: password, fixtures: Fixtures.path("powerwall", ""), model: model, customerMayWriteOperation: writable
            ))
            try await simulator.start()
            let clock = ManualClock()
            let log = EventLog()
            let network = NetworkOptions(url: await simulator.baseURL, timeout: .seconds(5), pollInterval: .seconds(5))
            let options = PowerwallOptions(network: network, password: VendorSecret(loginPassword ?? password))
            let vendor = try PowerwallVendor(instanceID: "pw", options: options, sink: log.sink, context: VendorContext(clock: clock))
            return Rig(simulator: simulator, vendor: vendor, clock: clock, log: log)
        }
    }

    /// The recorded file as the gateway must publish it: W to 0.1, Wh → kWh, Tesla's signs kept.
    static func expectedFromFixtures() throws -> [String: StateValue] {
        let meters = try #require(try JSONSerialization.jsonObject(with: Fixtures.data("powerwall", "meters_aggregates.json")) as? [String: [String: Any]])
        func number(_ meter: String, _ field: String) throws -> Double { try #require(meters[meter]?[field] as? Double ?? (meters[meter]?[field] as? Int).map(Double.init)) }
        func watts(_ meter: String) throws -> StateValue { .number((try number(meter, "instant_power") * 10).rounded() / 10) }
        func kWh(_ meter: String, _ field: String) throws -> StateValue { .number((try number(meter, field)).rounded() / 1000) }
        let operation = try #require(try JSONSerialization.jsonObject(with: Fixtures.data("powerwall", "operation.json")) as? [String: Any])
        let reserve = try #require(operation["backup_reserve_percent"] as? Double)
        return [
            "solar_power": try watts("solar"), "grid_power": try watts("site"), "battery_power": try watts("battery"), "home_power": try watts("load"),
            "solar_energy": try kWh("solar", "energy_exported"), "grid_import_energy": try kWh("site", "energy_imported"),
            "grid_export_energy": try kWh("site", "energy_exported"), "battery_discharge_energy": try kWh("battery", "energy_exported"),
            "battery_charge_energy": try kWh("battery", "energy_imported"), "home_energy": try kWh("load", "energy_imported"),
            "battery_level": .number(42.4), "grid_status": .string("connected"),
            "backup_reserve": .number((reserve * 10).rounded() / 10), "operation_mode": .string(try #require(operation["real_mode"] as? String)),
        ]
    }

    @Test func aPollPublishesTheSiteAsTheRecordedGatewayReportsIt() async throws {
        let rig = try await Rig.start()
        try await rig.vendor.poll()
        let device = try #require(rig.log.inventories.last?.first)
        #expect(device.id.rawValue == "pw_site" && device.type == .energyMeter)
        #expect(device.name == "test" && device.swVersion == "1.50.1", "site_info's name and status's firmware")
        #expect(device.isWritable("backup_reserve") && device.isWritable("operation_mode") && !device.isWritable("grid_power"))
        let expected = try Self.expectedFromFixtures()
        #expect(rig.log.states[rig.site] == expected)
        #expect(Set(device.keys) == Set(expected.keys))
        // Tesla's signs are the gateway's: the recorded site exports (−5347.5 W) while the battery charges (−10 W).
        #expect(rig.log.states[rig.site]?["grid_power"] == .number(-5347.5))
        #expect(rig.log.states[rig.site]?["battery_power"] == .number(-10))
        #expect(rig.vendor.http.health.lastError == nil)
        #expect(rig.simulator.counters.logins == 1)
    }

    @Test func aPowerwall3GivesEveryPowerKeyWithoutAnErrorAndAsksForTheRestHourly() async throws {
        let rig = try await Rig.start(model: .powerwall3)
        try await rig.vendor.poll()
        let device = try #require(rig.log.inventories.last?.first)
        #expect(device.name == "Powerwall" && device.swVersion == nil)
        for key in ["solar_power", "grid_power", "battery_power", "home_power", "battery_level", "grid_status", "solar_energy"] {
            #expect(rig.log.states[rig.site]?[key] != nil, "\(key)")
        }
        #expect(!device.keys.contains("backup_reserve") && !device.isWritable("operation_mode"))
        #expect(rig.vendor.http.health.lastError == nil && rig.vendor.http.health.state == .ok)
        #expect(rig.log.health.allSatisfy { $0.lastError == nil })
        let asked = rig.simulator.counters.requests["/api/operation"]
        try await rig.vendor.poll()
        #expect(rig.simulator.counters.requests["/api/operation"] == asked, "a 404 is remembered")
        rig.clock.advance(by: .seconds(3601))
        try await rig.vendor.poll()
        #expect(rig.simulator.counters.requests["/api/operation"] == (asked ?? 0) + 1)
    }

    @Test func anExpiredSessionLogsInOnceMoreAndTheCallGoesThrough() async throws {
        let rig = try await Rig.start()
        try await rig.vendor.poll()
        rig.simulator.expireSessions()
        try await rig.vendor.poll()
        #expect(rig.simulator.counters.logins == 2)
        #expect(rig.vendor.http.health.lastError == nil)
    }

    @Test func aWrongPasswordIsAuthFailedAndIsTriedOnlyOnceEveryFiveMinutes() async throws {
        let rig = try await Rig.start(loginPassword: "wrong")
        let error = await gatewayError { try await rig.vendor.poll() }
        #expect(error?.code == .authFailed)
        #expect(error?.message.contains("refused the customer password") == true)
        #expect(error?.message.contains("wrong") == false, "the password never shows")
        #expect(rig.simulator.counters.failedLogins == 1)
        for _ in 0..<5 { _ = await gatewayError { try await rig.vendor.poll() } }
        #expect(rig.simulator.counters.failedLogins == 1, "no second login with the same password within 5 minutes")
        let health = rig.vendor.http.health
        #expect(health.state == .down && health.lastError?.code == .authFailed && health.nextAttempt != nil)
        rig.clock.advance(by: .seconds(299))
        _ = await gatewayError { try await rig.vendor.poll() }
        #expect(rig.simulator.counters.failedLogins == 1)
        rig.clock.advance(by: .seconds(1))
        _ = await gatewayError { try await rig.vendor.poll() }
        #expect(rig.simulator.counters.failedLogins == 2)
    }

    @Test(arguments: [PowerwallSimulator.Fault.rateLimited(retryAfter: nil), .serviceUnavailable])
    func aRateLimitOrBusyGatewayStartsAFiveMinuteCooldown(fault: PowerwallSimulator.Fault) async throws {
        let rig = try await Rig.start()
        try await rig.vendor.poll()
        rig.simulator.inject(fault)
        let error = await gatewayError { try await rig.vendor.poll() }
        #expect(error?.message.contains("pauses all requests for 5 min") == true)
        let requests = rig.simulator.counters.requests.values.reduce(0, +)
        let health = rig.vendor.http.health
        #expect(health.state == .down && health.nextAttempt.map { $0.timeIntervalSinceNow > 250 } == true)
        // Polls every 5 s meanwhile: none reaches the gateway, and none pushes the end of the cooldown further.
        for _ in 0..<59 {
            rig.clock.advance(by: .seconds(5))
            _ = await gatewayError { try await rig.vendor.poll() }
        }
        #expect(rig.simulator.counters.requests.values.reduce(0, +) == requests, "never a tight loop")
        rig.clock.advance(by: .seconds(5))
        try await rig.vendor.poll()
        #expect(rig.vendor.http.health.state == .ok)
    }

    @Test func aStoppedSitemasterIsVendorUnavailableAndBrokenAnswersAreMalformed() async throws {
        let rig = try await Rig.start()
        rig.simulator.inject(.sitemasterStopped)
        #expect(await gatewayError { try await rig.vendor.poll() }?.code == .vendorUnavailable)
        rig.simulator.inject(.htmlError(status: 200))
        let html = await gatewayError { try await rig.vendor.poll() }
        #expect(html?.code == .malformedResponse || html?.code == .vendorServerError)
        rig.simulator.inject(.malformedJSON)
        #expect(await gatewayError { try await rig.vendor.poll() }?.code == .malformedResponse)
        try await rig.vendor.poll()
        #expect(rig.log.states[rig.site]?["grid_status"] == .string("connected"))
    }

    @Test func theGridStatusFollowsTesla() async throws {
        #expect(PowerwallMapping.gridStatus("SystemGridConnected") == "connected")
        #expect(PowerwallMapping.gridStatus("SystemIslandedActive") == "islanded")
        #expect(PowerwallMapping.gridStatus("SystemIslandedReady") == "islanded")
        #expect(PowerwallMapping.gridStatus("SystemTransitionToGrid") == "transitioning")
        #expect(PowerwallMapping.gridStatus("SystemTransitionToIsland") == "transitioning")
        #expect(PowerwallMapping.gridStatus("SystemWaitForUser") == "waiting")
        #expect(PowerwallMapping.gridStatus("Whatever") == nil)
        let rig = try await Rig.start()
        rig.simulator.setGridStatus("SystemIslandedActive")
        try await rig.vendor.poll()
        #expect(rig.log.states[rig.site]?["grid_status"] == .string("islanded"))
    }

    func command(_ rig: Rig, _ changes: [String: StateValue]) -> DeviceCommand {
        DeviceCommand(id: UUID().uuidString, device: rig.site, vendorID: "pw", vendorDeviceID: "site", changes: changes,
                      issuedAt: Date(), expiresAt: Date().addingTimeInterval(60))
    }

    @Test func aReserveChangeIsCarriedOutWhereTheFirmwareAllowsIt() async throws {
        let rig = try await Rig.start(writable: true)
        try await rig.vendor.poll()
        let outcome = try await rig.vendor.execute(command(rig, ["backup_reserve": .number(20), "operation_mode": .string("backup")]))
        #expect(outcome.confirmed["backup_reserve"] == .number(20) && outcome.confirmed["operation_mode"] == .string("backup"))
        #expect(rig.simulator.counters.operationWrites == 1)
        try await rig.vendor.poll()
        #expect(rig.log.states[rig.site]?["backup_reserve"] == .number(20))
    }

    @Test func whereTheAPIRefusesTheAnswerIsVendorRejectedWithTheReason() async throws {
        let refusing = try await Rig.start()
        try await refusing.vendor.poll()
        let refused = await gatewayError { _ = try await refusing.vendor.execute(command(refusing, ["backup_reserve": .number(20)])) }
        #expect(refused?.code == .vendorRejected)
        #expect(refused?.message.contains("installer") == true && refused?.message.contains("HTTP 403") == true)
        #expect(refusing.vendor.http.health.state == .ok, "a refused write is not a vendor failure")
        #expect(refusing.simulator.counters.logins == 1, "403 on a write is not an expired session")

        let powerwall3 = try await Rig.start(model: .powerwall3)
        let missing = await gatewayError { _ = try await powerwall3.vendor.execute(command(powerwall3, ["operation_mode": .string("backup")])) }
        #expect(missing?.code == .vendorRejected && missing?.message.contains("Powerwall 3") == true)
    }

    @Test func theEntryReadsItsPasswordFromAFileAndTrustsAnHTTPSDeviceOnFirstUse() throws {
        let directory = try TemporaryDirectory()
        try "TESLA\n".write(toFile: directory.path + "/pw", atomically: true, encoding: .utf8)
        let yaml = """
        mqtt: {url: mqtt://localhost}
        storage: {path: \(directory.path)/cache.sqlite}
        vendors:
          - {type: powerwall, id: pw, url: "https://192.168.91.1", password_file: pw, email: me@example.com}
          - {type: powerwall, id: lan, url: "http://10.0.0.5", password_file: pw, poll_interval: 10}
        """
        let config = try ConfigLoader.parse(yaml: yaml, baseDirectory: directory.path).get()
        var reader = ConfigReader()
        let https = try #require(PowerwallVendorFactory.parse(config.vendors[0], reader: &reader, environment: [:]))
        #expect(https.network.tls == .firstUse && https.network.pollInterval == .seconds(5) && https.email == "me@example.com")
        #expect(https.password.reveal() == "TESLA")
        let http = try #require(PowerwallVendorFactory.parse(config.vendors[1], reader: &reader, environment: [:]))
        #expect(http.network.tls == .system && http.network.pollInterval == .seconds(10))
        #expect(VendorCatalog.all.tlsEndpoint(config.vendors[0])?.policy == .firstUse)
        // Without storage the first-use pin could not survive a restart: a config error names the key.
        guard case .failure(let failure) = ConfigLoader.parse(yaml: """
            mqtt: {url: mqtt://localhost}
            vendors: [{type: powerwall, id: pw, url: "https://192.168.91.1", password_env: PW}]
            """, environment: ["PW": "x"]) else {
            Issue.record("first_use by default without storage was accepted")
            return
        }
        #expect(failure.problems.map(\.path) == ["vendors[0].tls"])
    }
}
