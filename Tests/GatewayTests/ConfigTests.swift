import Cache
import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayTesting
import Testing
import VendorKit

@Suite struct ConfigTests {
    @Test func minimalConfigLoadsWithDefaults() throws {
        let config = try ConfigLoader.parse(yaml: "mqtt: {url: mqtt://localhost:1883}\nvendors: [{type: demo, id: demo}]\n").get()
        #expect(config.mqtt.baseTopic == "lbs")
        #expect(config.mqtt.version == .v5)
        #expect(config.mqtt.retainState)
        #expect(config.homeAssistant.enabled && config.homeAssistant.mode == .device)
        #expect(config.vendors.map(\.id) == ["demo"])
        #expect(config.storage == nil)
    }

    @Test func everyProblemIsReportedWithItsKeyPath() {
        let yaml = """
        mqtt:
          url: http://broker
          keepalive: often
          versoin: 5
        homeassistant:
          discovery_mode: sideways
        vendors:
          - type: teleporter
          - type: demo
            id: Demo Vendor
            devices: lots
        """
        guard case .failure(let failure) = ConfigLoader.parse(yaml: yaml) else {
            Issue.record("a broken config was accepted")
            return
        }
        let paths = Set(failure.problems.map(\.path))
        #expect(paths.isSuperset(of: ["mqtt.url", "mqtt.keepalive", "mqtt.versoin", "homeassistant.discovery_mode",
                                      "vendors[0].type", "vendors[1].id", "vendors[1].devices"]))
        #expect(failure.problems.first { $0.path == "mqtt.versoin" }?.fix.contains("version") == true)
    }

    /// Found by the config fuzzer in CI: `type:` holding nothing (empty, or only an anchor) was neither a
    /// vendor nor a problem, so a config without any vendor was accepted.
    @Test(arguments: ["{type: &emo, id: demo}", "{type: , id: demo}", "{type: null, id: demo}", "{type: ~}"])
    func aVendorTypeWithNothingInItIsMissing(item: String) {
        guard case .failure(let failure) = ConfigLoader.parse(yaml: "mqtt: {url: mqtt://localhost:1883}\nvendors: [\(item)]\n") else {
            Issue.record("accepted a vendor without a type: \(item)")
            return
        }
        #expect(failure.problems.contains { $0.path == "vendors[0].type" && $0.message == "missing" })
    }

    @Test func passwordsComeFromFilesOrEnvironmentNeverTheFile() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lbs-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try "s3cret\n".write(to: dir.appendingPathComponent("pw"), atomically: true, encoding: .utf8)
        let fromFile = try ConfigLoader.parse(yaml: "mqtt: {url: mqtt://h, username: u, password_file: pw}\nvendors: [{type: demo}]", baseDirectory: dir.path).get()
        #expect(fromFile.mqtt.password?.reveal() == "s3cret")
        #expect("\(fromFile.mqtt.password as Any)".contains("s3cret") == false)

        let fromEnv = try ConfigLoader.parse(yaml: "mqtt: {url: mqtt://h, username: u}\nvendors: [{type: demo}]",
                                             environment: ["LBS_MQTT_PASSWORD": "envpw", "LBS_MQTT_URL": "mqtt://other:1884"]).get()
        #expect(fromEnv.mqtt.password?.reveal() == "envpw")
        #expect(fromEnv.mqtt.url == "mqtt://other:1884")

        guard case .failure(let failure) = ConfigLoader.parse(yaml: "mqtt: {url: mqtt://h, password: plain}\nvendors: [{type: demo}]") else {
            Issue.record("a plain-text password in the file was accepted")
            return
        }
        #expect(failure.problems.contains { $0.path == "mqtt.password" })
    }

    @Test func brokenYAMLAndEmptyFilesGiveOneClearLine() {
        guard case .failure(let broken) = ConfigLoader.parse(yaml: "mqtt: [unclosed\n") else { Issue.record("accepted"); return }
        #expect(broken.problems.count == 1 && broken.problems[0].message.contains("YAML"))
        guard case .failure(let empty) = ConfigLoader.parse(yaml: "") else { Issue.record("accepted"); return }
        #expect(empty.problems.count == 1)
    }

    @Test func urlCredentialsAreRedacted() {
        #expect(ConfigReader.redactURL("mqtt://user:pw@host:1883") == "mqtt://host:1883")
        #expect(ConfigReader.redactURL("mqtt://host") == "mqtt://host")
    }
}

@Suite struct RetentionConfigTests {
    @Test func retentionDefaultsToTheSeedPolicyAndCanBeSet() throws {
        let defaults = try ConfigLoader.parse(yaml: "mqtt: {url: mqtt://h}\nstorage: {path: /tmp/x.sqlite}\nvendors: [{type: demo}]\n").get()
        #expect(defaults.storage?.retention == RetentionSettings())
        #expect(defaults.storage?.retention.policy == .standard)

        let yaml = """
        mqtt: {url: mqtt://h}
        storage:
          path: /tmp/x.sqlite
          retention: {raw_days: 2, energy_days: 400, environment_days: 90, outbox_days: 1, interval: 60, max_rows_per_run: 5000}
        vendors: [{type: demo}]
        """
        let retention = try #require(try ConfigLoader.parse(yaml: yaml).get().storage?.retention)
        #expect(retention.rawDays == 2 && retention.energyDays == 400 && retention.environmentDays == 90)
        #expect(retention.outboxDays == 1 && retention.interval == 60 && retention.maxRowsPerRun == 5000)
        #expect(retention.policy.rawReadings == 2 * 86_400)
        #expect(retention.policy.environmentAggregates == 90 * 86_400)
    }

    @Test func badRetentionValuesAreReportedByKeyPath() {
        let yaml = """
        mqtt: {url: mqtt://h}
        storage:
          path: /tmp/x.sqlite
          retention: {raw_days: 30, environment_days: 10, energy_days: -1, interval: soon, keep: forever}
        vendors: [{type: demo}]
        """
        guard case .failure(let failure) = ConfigLoader.parse(yaml: yaml) else {
            Issue.record("a broken retention config was accepted")
            return
        }
        let paths = Set(failure.problems.map(\.path))
        #expect(paths == ["storage.retention.environment_days", "storage.retention.energy_days",
                          "storage.retention.interval", "storage.retention.keep"])
        #expect(failure.problems.contains { $0.message.contains("shorter than raw_days") })
    }
}

/// Inputs the config fuzz target found (`Fuzz/corpus/config/fuzz-found-*`): every problem names where it is.
@Suite struct ConfigFuzzFindingsTests {
    @Test func anEmptyKeyIsAProblemWithAPath() throws {
        for yaml in ["\"\": 1\nmqtt: {url: \"mqtt://127.0.0.1:1883\"}\nvendors: [{type: demo, id: demo}]",
                     "mqtt: {url: \"mqtt://127.0.0.1:1883\", \"\": 2}\nvendors: [{type: demo, id: demo}]"] {
            guard case .failure(let failure) = ConfigLoader.parse(yaml: yaml) else {
                Issue.record("an empty key must be refused")
                continue
            }
            #expect(failure.problems.allSatisfy { !$0.path.isEmpty && !$0.message.isEmpty && !$0.fix.isEmpty }, "\(failure)")
            #expect(failure.problems.contains { $0.message == "an empty key" && $0.path.hasSuffix("\"\"") })
        }
        let root = try #require(Fixtures.packageRoot())
        let found = try String(contentsOfFile: root + "/Fuzz/corpus/config/fuzz-found-empty-key.yaml", encoding: .utf8)
        if case .failure(let failure) = ConfigLoader.parse(yaml: found) {
            #expect(failure.problems.allSatisfy { !$0.path.isEmpty && !$0.message.isEmpty && !$0.fix.isEmpty }, "\(failure)")
        }
    }

    /// Found by the config fuzz target: `vendors:` with an item that is only `-` and a comment was accepted as a
    /// config without vendors.
    @Test func anEmptyVendorItemIsAProblem() throws {
        guard case .failure(let failure) = ConfigLoader.parse(yaml: "mqtt: {url: \"mqtt://127.0.0.1:1883\"}\nvendors:\n  -   # nothing\n") else {
            Issue.record("a config whose only vendor item is empty must be refused")
            return
        }
        #expect(failure.problems.map(\.path) == ["vendors[0]"], "\(failure)")
        let root = try #require(Fixtures.packageRoot())
        let found = try String(contentsOfFile: root + "/Fuzz/corpus/config/fuzz-found-empty-vendor-item.yaml", encoding: .utf8)
        guard case .failure = ConfigLoader.parse(yaml: found) else {
            Issue.record("the fuzz finding must be refused")
            return
        }
    }
}
