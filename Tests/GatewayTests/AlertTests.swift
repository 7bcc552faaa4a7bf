import Cache
import Foundation
@testable import FeatureAlerts
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayModel
import GatewayTesting
import Logging
import TestTraits
import Testing
import VendorKit
import VendorSimulators

/// The alert rules on their own (time comes with each reading) and through the controller (events, retained
/// alert topics, Home Assistant binary sensors, the cache across a restart).
@Suite(.integration) struct AlertRuleTests {
    static let air = Device(vendorID: "air", vendorDeviceID: "office", name: "Office Air", type: .airQuality, room: "Office",
                            keys: ["temperature", "humidity", "co2", "pm25"])
    static let water = Device(vendorID: "flume", vendorDeviceID: "main", name: "Water", type: .waterMeter, keys: ["water_flow", "water_volume", "leak"])
    static let t0 = Date(timeIntervalSince1970: 1_790_000_000)

    func raised(_ changes: [AlertChange]) -> [String] { changes.compactMap { if case .raised(let a) = $0 { a.id } else { nil } } }
    func cleared(_ changes: [AlertChange]) -> [String] { changes.compactMap { if case .cleared(let a, _) = $0 { a.id } else { nil } } }

    @Test func aThresholdRaisesOnceAndClearsOnlyPastItsMargin() {
        var rules = AlertRules(settings: AlertSettings())
        let id = "co2_high_air_office"
        #expect(raised(rules.evaluate(Self.air, values: ["co2": .number(990)], at: Self.t0)).isEmpty)
        let up = rules.evaluate(Self.air, values: ["co2": .number(1200)], at: Self.t0 + 60)
        #expect(raised(up) == [id])
        guard case .raised(let alert)? = up.first else { Issue.record("no alert"); return }
        #expect(alert.severity == .warning && alert.threshold == 1000 && alert.value == 1200 && alert.room == "Office")
        #expect(alert.message.contains("1200 ppm") && alert.suggestion.contains("fresh air"))
        // Hovering just under the limit does not flap: it clears only below 1,000 − 50 ppm.
        #expect(rules.evaluate(Self.air, values: ["co2": .number(980)], at: Self.t0 + 120).isEmpty)
        #expect(rules.evaluate(Self.air, values: ["co2": .number(1010)], at: Self.t0 + 180).isEmpty, "still the same alert, not a second")
        #expect(cleared(rules.evaluate(Self.air, values: ["co2": .number(940)], at: Self.t0 + 240)) == [id])
        #expect(rules.active.isEmpty)
        // Twice the limit is critical.
        guard case .raised(let high)? = rules.evaluate(Self.air, values: ["co2": .number(2100)], at: Self.t0 + 300).first else { Issue.record("no alert"); return }
        #expect(high.severity == .critical)
    }

    /// The rules skip building alert ids for devices without an active alert: an alert restored from the cache, and
    /// the second of two alerts of one device, must still be found and cleared.
    @Test func restoredAlertsAndASecondAlertOfTheSameDeviceStillClear() {
        var rules = AlertRules(settings: AlertSettings())
        let raised = rules.evaluate(Self.air, values: ["co2": .number(1200), "humidity": .number(20)], at: Self.t0)
        #expect(Set(self.raised(raised)) == ["co2_high_air_office", "humidity_low_air_office"])
        #expect(cleared(rules.evaluate(Self.air, values: ["co2": .number(900), "humidity": .number(20)], at: Self.t0 + 60)) == ["co2_high_air_office"])
        #expect(cleared(rules.evaluate(Self.air, values: ["co2": .number(900), "humidity": .number(40)], at: Self.t0 + 120)) == ["humidity_low_air_office"])
        #expect(rules.active.isEmpty)
        // After a restart: the cache's alerts are active until a reading says otherwise, the leak's too.
        let restored = raised.compactMap { if case .raised(let alert) = $0 { alert } else { nil } }
        let leak = Alert(id: "water_leak_flume_main", rule: "water_leak", severity: .critical, device: Self.water.id, room: nil, key: "leak",
                         value: 1, threshold: 1, since: Self.t0, message: "leak", suggestion: "")
        var again = AlertRules(settings: AlertSettings(), active: restored + [leak])
        #expect(again.evaluate(Self.air, values: ["co2": .number(1100), "humidity": .number(20)], at: Self.t0 + 180).isEmpty, "still the same alerts")
        #expect(Set(cleared(again.evaluate(Self.air, values: ["co2": .number(800), "humidity": .number(45)], at: Self.t0 + 240)))
                == ["co2_high_air_office", "humidity_low_air_office"])
        #expect(cleared(again.evaluate(Self.water, values: ["water_flow": .number(0), "leak": .bool(false)], at: Self.t0 + 240)) == ["water_leak_flume_main"])
        #expect(again.active.isEmpty)
    }

    @Test func lowLimitsRoomOverridesAndOffSwitches() {
        var settings = AlertSettings()
        settings.rooms["office"] = ["co2": .init(above: 800), "pm25": .init()]
        var rules = AlertRules(settings: settings)
        let changes = rules.evaluate(Self.air, values: ["co2": .number(850), "humidity": .number(25), "temperature": .number(15), "pm25": .number(80)], at: Self.t0)
        #expect(Set(raised(changes)) == ["co2_high_air_office", "humidity_low_air_office", "temperature_low_air_office"], "pm25 is off in the office")
        #expect(settings.rules(for: Self.air).map(\.name) == ["co2_high", "humidity_high", "humidity_low", "temperature_high", "temperature_low"])
        #expect(settings.rules(for: Self.air).first { $0.name == "temperature_low" }?.deviceClass == "cold")
        var off = AlertSettings()
        off.enabled = false
        #expect(off.rules(for: Self.air).isEmpty)
    }

    /// Environment limits are the room's: they hold for devices that measure their surroundings (sensors, air
    /// monitors, motion sensors, a thermostat's room temperature), never for an appliance's own temperature (a water
    /// heater's 50 °C tank, a charger's or a fridge's) nor for a set-point (`target_temperature`), even with a limit
    /// configured for it. No rule, so no binary sensor and no retained alert topic either.
    @Test func environmentLimitsHoldForEnvironmentSensorsNotForAppliancesOrSetPoints() throws {
        var settings = AlertSettings()
        settings.environment["target_temperature"] = .init(above: 25)
        var rules = AlertRules(settings: settings)
        func device(_ type: DeviceType, _ name: String, keys: [String] = ["temperature", "target_temperature"]) -> Device {
            Device(vendorID: "matter", vendorDeviceID: name, name: name, type: type, room: "Office", keys: keys)
        }
        let hot: [String: StateValue] = ["temperature": .number(50), "target_temperature": .number(65)]
        for appliance in [device(.evCharger, "charger"), device(.plug, "plug"), device(.energyMeter, "meter")] {
            #expect(rules.evaluate(appliance, values: hot, at: Self.t0).isEmpty, "\(appliance.type)")
            #expect(settings.rules(for: appliance).isEmpty, "\(appliance.type)")
        }
        let heater = device(try #require(DeviceType(rawValue: "water_heater")), "heater")
        #expect(rules.evaluate(heater, values: hot, at: Self.t0).isEmpty)
        #expect(settings.rules(for: heater).isEmpty)
        let fridge = device(try #require(DeviceType(rawValue: "appliance")), "fridge")
        #expect(rules.evaluate(fridge, values: ["temperature": .number(4)], at: Self.t0).isEmpty)
        // A thermostat's own reading is the room's; its set-point is not a reading of the room.
        let thermostat = device(.thermostat, "thermostat")
        #expect(raised(rules.evaluate(thermostat, values: hot, at: Self.t0)) == ["temperature_high_matter_thermostat"])
        #expect(settings.rules(for: thermostat).map(\.name) == ["temperature_high", "temperature_low"])
        let sensor = device(.sensor, "sensor", keys: ["temperature"])
        #expect(raised(rules.evaluate(sensor, values: ["temperature": .number(12)], at: Self.t0)) == ["temperature_low_matter_sensor"])
    }

    @Test func aLeakFlagOrAnHourOfUnbrokenFlowIsAWaterLeak() {
        var rules = AlertRules(settings: AlertSettings())
        let id = "water_leak_flume_main"
        // Flow for 59 minutes, a break, then 60 unbroken minutes.
        for minute in 0..<59 { #expect(rules.evaluate(Self.water, values: ["water_flow": .number(1.5)], at: Self.t0 + Double(minute * 60)).isEmpty) }
        #expect(rules.evaluate(Self.water, values: ["water_flow": .number(0)], at: Self.t0 + 59 * 60).isEmpty)
        var raisedAt: Int?
        for minute in 60...125 where raisedAt == nil {
            if raised(rules.evaluate(Self.water, values: ["water_flow": .number(0.5)], at: Self.t0 + Double(minute * 60))) == [id] { raisedAt = minute }
        }
        #expect(raisedAt == 120, "raised after 60 minutes without a break, not before")
        #expect(rules.active[id]?.severity == .critical && rules.active[id]?.message.contains("60 min") == true)
        #expect(cleared(rules.evaluate(Self.water, values: ["water_flow": .number(0)], at: Self.t0 + 7300)) == [id])
        // The vendor's own leak flag: at once.
        #expect(raised(rules.evaluate(Self.water, values: ["leak": .bool(true), "water_flow": .number(0)], at: Self.t0 + 7400)) == [id])
        #expect(cleared(rules.evaluate(Self.water, values: ["leak": .bool(false), "water_flow": .number(0)], at: Self.t0 + 7500)) == [id])
    }

    @Test func anHourWellAboveTheSameHourOfEarlierDaysIsUnusual() {
        var rules = AlertRules(settings: AlertSettings())
        let meter = Device(vendorID: "pw", vendorDeviceID: "site", name: "Home", type: .energyMeter, keys: ["home_power", "home_energy"])
        let hour = Self.t0
        #expect(rules.evaluateConsumption(meter, key: "home_energy", use: 5, sameHourBefore: [1, 1], hour: hour).isEmpty, "two days are too few")
        #expect(rules.evaluateConsumption(meter, key: "home_energy", use: 1.9, sameHourBefore: [1, 0.8, 1.2], hour: hour).isEmpty, "under twice the mean")
        let up = rules.evaluateConsumption(meter, key: "home_energy", use: 2.5, sameHourBefore: [1, 0.8, 1.2], hour: hour)
        guard case .raised(let alert)? = up.first else { Issue.record("not raised"); return }
        #expect(alert.id == "unusual_consumption_pw_site" && alert.threshold == 2 && alert.value == 2.5 && alert.since == hour + 3600)
        #expect(alert.message.contains("usually takes 1 kWh"))
        // Tiny hours are never unusual: 0.2 kWh against 0.05 is under the 0.3 kWh floor.
        var quiet = AlertRules(settings: AlertSettings())
        #expect(quiet.evaluateConsumption(meter, key: "home_energy", use: 0.2, sameHourBefore: [0.05, 0.05, 0.05], hour: hour).isEmpty)
        #expect(cleared(rules.evaluateConsumption(meter, key: "home_energy", use: 1, sameHourBefore: [1, 0.8, 1.2], hour: hour + 3600)) == [alert.id])
    }

    /// A real day of an Awair's 5-minute averages (python_awair's recording), oldest first: CO2 crosses
    /// 1,000 ppm. The alert is raised at the first average above the limit and cleared at the first one back
    /// under 950 ppm after it, each at the recording's own time.
    @Test func aRecordedDayOfReadings() throws {
        let cassette = try Cassette(path: Fixtures.path("awair", "five_minute.yaml"))
        let body = try #require(cassette.interactions.first?.body)
        let data = try #require((try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])?["data"] as? [[String: Any]])
        let series: [(Date, Double)] = try data.map { entry in
            let stamp = try #require(entry["timestamp"] as? String)
            let at = try #require(ISOTime.parse(stamp))
            let co2 = try #require((entry["sensors"] as? [[String: Any]])?.first { $0["comp"] as? String == "co2" }?["value"] as? Double)
            return (at, co2)
        }.sorted { $0.0 < $1.0 }
        #expect(series.count == 288)
        var rules = AlertRules(settings: AlertSettings())
        var events: [(String, Date)] = []
        for (at, co2) in series {
            for change in rules.evaluate(Self.air, values: ["co2": .number(co2)], at: at) {
                switch change {
                case .raised(let alert): events.append(("raised", alert.since))
                case .cleared(_, let when): events.append(("cleared", when))
                }
            }
        }
        let firstAbove = try #require(series.first { $0.1 > 1000 })
        #expect(events.first?.0 == "raised" && events.first?.1 == firstAbove.0)
        if let firstBack = series.first(where: { $0.0 > firstAbove.0 && $0.1 < 950 }) {
            #expect(events.count >= 2 && events[1].0 == "cleared" && events[1].1 == firstBack.0)
        }
        // Every alternation is raise, clear, raise…: never two raises in a row.
        #expect(zip(events, events.dropFirst()).allSatisfy { $0.0 != $1.0 })
    }
}

@Suite(.integration) struct AlertControllerTests {
    struct Harness {
        let transport = RecordingTransport()
        let controller: GatewayController

        init(persistence: CacheLink? = nil) async {
            let config = GatewayConfig(mqtt: MQTTSettings(url: "mqtt://127.0.0.1"), vendors: [VendorSettings(type: "demo", id: "air")])
            controller = await GatewayController(config: config, transport: transport, logger: Logger(label: "test"), persistence: persistence)
            await controller.handle(.inventory(vendorID: "air", devices: [AlertRuleTests.air]))
            await controller.connected()
        }

        func reading(_ co2: Double, at: Date) async {
            await controller.handle(.state(AlertRuleTests.air.id, ["co2": .number(co2), "temperature": .number(21)], observedAt: at))
        }
    }

    @Test func anAlertIsAnEventARetainedTopicAndABinarySensor() async throws {
        let h = await Harness()
        let topic = "lbs/alert/co2_high_air_office"
        #expect(h.transport.json(topic)?["state"] as? String == "OFF", "announced off, so Home Assistant has a state")
        let discovery = try #require(h.transport.json("homeassistant/device/lbs_air_office/config"))
        let sensor = try #require((discovery["components"] as? [String: Any])?["alert_co2_high"] as? [String: Any])
        #expect(sensor["platform"] as? String == "binary_sensor" && sensor["state_topic"] as? String == topic)
        #expect(sensor["device_class"] as? String == "problem" && sensor["value_template"] as? String == "{{ value_json.state }}")

        await h.reading(1300, at: AlertRuleTests.t0)
        let raised = try #require(h.transport.messages.last { $0.topic == "lbs/bridge/event" && $0.payload.contains("alert_raised") })
        #expect(raised.payload.contains(#""alert":"co2_high_air_office""#) && raised.payload.contains(#""severity":"warning""#))
        let on = try #require(h.transport.last(topic))
        #expect(on.retain && on.payload.contains(#""state":"ON""#) && on.payload.contains(#""value":1300"#) && on.payload.contains(#""threshold":1000"#))

        await h.reading(900, at: AlertRuleTests.t0 + 600)
        #expect(h.transport.messages.contains { $0.topic == "lbs/bridge/event" && $0.payload.contains("alert_cleared") })
        #expect(h.transport.json(topic)?["state"] as? String == "OFF" && h.transport.json(topic)?["cleared_at"] != nil)

        // A device that goes away takes its alert topics with it.
        await h.controller.handle(.inventory(vendorID: "air", devices: []))
        #expect(h.transport.last(topic)?.payload == "")
    }

    @Test func activeAlertsSurviveARestartThroughTheCache() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("gateway.sqlite")
        do {
            let persistence = try CacheLink(path: path, logger: Logger(label: "test"))
            let h = await Harness(persistence: persistence)
            await h.reading(1500, at: AlertRuleTests.t0)
            try await waitUntil("alert stored") { (try? persistence.store.alerts().keys.sorted()) == ["co2_high_air_office"] }
            try persistence.store.close()
        }
        // After the restart the same high reading is no news; the alert is ON at once and clears normally.
        let persistence = try CacheLink(path: path, logger: Logger(label: "test"))
        defer { try? persistence.store.close() }
        let h = await Harness(persistence: persistence)
        #expect(h.transport.json("lbs/alert/co2_high_air_office")?["state"] as? String == "ON")
        await h.reading(1500, at: AlertRuleTests.t0 + 60)
        #expect(!h.transport.messages.contains { $0.topic == "lbs/bridge/event" && $0.payload.contains("alert_raised") })
        await h.reading(700, at: AlertRuleTests.t0 + 120)
        #expect(h.transport.messages.contains { $0.topic == "lbs/bridge/event" && $0.payload.contains("alert_cleared") })
        try await waitUntil("alert forgotten") { (try? persistence.store.alerts().isEmpty) == true }
    }

    /// Four days of an energy counter in a real cache: the last hour took 3 kWh where that hour took 1 kWh on the
    /// three days before; the hourly check raises `unusual_consumption` from the cache's hourly aggregates.
    @Test func unusualConsumptionIsFoundInTheCachesHourlyHistory() async throws {
        let directory = try TemporaryDirectory()
        let persistence = try CacheLink(path: directory.file("gateway.sqlite"), logger: Logger(label: "test"))
        defer { try? persistence.store.close() }
        let meter = Device(vendorID: "air", vendorDeviceID: "meter", name: "Meter", type: .energyMeter, keys: ["home_energy"])
        let hour = (AlertRuleTests.t0.timeIntervalSince1970 / 3600).rounded(.down) * 3600
        var readings: [Reading] = []
        var total = 100.0
        // One reading every 15 min for four days before the hour and through it: 0.25 kWh each (1 kWh an hour),
        // except in the hour checked, where each is 0.75 kWh (3 kWh).
        for step in stride(from: hour - 4 * 86_400 - 3600, through: hour + 3600, by: 900) {
            total += (step >= hour && step < hour + 3600) ? 0.75 : 0.25
            readings.append(Reading(deviceID: "air_meter", key: "home_energy", time: step, value: total, kind: .counter))
        }
        _ = try persistence.store.appendReadings(readings)
        let config = GatewayConfig(mqtt: MQTTSettings(url: "mqtt://127.0.0.1"), vendors: [VendorSettings(type: "demo", id: "air")])
        let transport = RecordingTransport()
        let controller = await GatewayController(config: config, transport: transport, logger: Logger(label: "test"), persistence: persistence)
        await controller.handle(.inventory(vendorID: "air", devices: [meter]))
        await controller.connected()
        await controller.checkConsumption(hour: Date(timeIntervalSince1970: hour))
        let alert = try #require(transport.json("lbs/alert/unusual_consumption_air_meter"))
        #expect(alert["state"] as? String == "ON" && alert["value"] as? Double == 3 && alert["threshold"] as? Double == 2)
        #expect(transport.messages.contains { $0.topic == "lbs/bridge/event" && $0.payload.contains("alert_raised") && $0.payload.contains("unusual_consumption") })
        // The hour before was ordinary.
        transport.clear()
        await controller.checkConsumption(hour: Date(timeIntervalSince1970: hour - 3600))
        #expect(transport.json("lbs/alert/unusual_consumption_air_meter")?["state"] as? String == "OFF")
    }

    @Test func theAlertsSectionIsReadAndCheckedWithKeyPaths() {
        let yaml = """
        mqtt: {url: "mqtt://127.0.0.1"}
        http: {enabled: false}
        vendors: [{type: demo, id: demo}]
        alerts:
          water_leak: {flow_above: 0.5, for: 1800}
          environment: {co2: {above: 1200}, pm25: false}
          rooms: {Bedroom: {co2: {above: 800}}}
        """
        let config = try? ConfigLoader.parse(yaml: yaml, baseDirectory: "/tmp").get()
        #expect(config?.alerts.leakFlowAbove == 0.5 && config?.alerts.leakFlowDuration == 1800)
        #expect(config?.alerts.environment["co2"]?.above == 1200 && config?.alerts.environment["pm25"] == AlertSettings.Threshold())
        #expect(config?.alerts.rooms["bedroom"]?["co2"]?.above == 800 && config?.alerts.environment["humidity"]?.below == 30)
        let badYAML = """
        mqtt: {url: "mqtt://127.0.0.1"}
        http: {enabled: false}
        vendors: [{type: demo}]
        alerts: {environment: {colour: {above: 1}}}
        """
        let bad = ConfigLoader.parse(yaml: badYAML, baseDirectory: "/tmp")
        guard case .failure(let failure) = bad else { Issue.record("accepted an unknown key"); return }
        #expect(failure.problems.map(\.path) == ["alerts.environment.colour"])
    }
}

/// The inactive alert state written directly is what rendering its JSON gives, escaping included.
@Suite struct InactiveAlertTextTests {
    @Test(arguments: [("low_battery_demo_lock", "low_battery", "demo_lock"), ("r\"q_d", "r\"q\\x", "d\u{1}e")])
    func matchesTheRenderedJSON(id: String, rule: String, device: String) {
        let rendered = JSON.object(["alert": .string(id), "rule": .string(rule), "device": .string(device), "state": "OFF"]).render()
        #expect(AlertsExtension.inactive(id: id, rule: rule, device: device) == rendered)
    }
}
