import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayTesting
import Testing
import VendorKit
@testable import VendorHomeKit

/// What `check-config` says about a `type: homekit` entry: each problem at its key path, with a fix.
@Suite struct HomeKitConfigTests {
    static func problems(_ vendors: String, storage: Bool = true, environment: [String: String] = [:], directory: String = "") -> [ConfigProblem] {
        let yaml = "mqtt: {url: mqtt://localhost:1883}\n" + (storage ? "storage: {path: /tmp/lbs-hk-test.sqlite}\n" : "") + "vendors:\n" + vendors
        switch ConfigLoader.parse(yaml: yaml, environment: environment, baseDirectory: directory) {
        case .success: return []
        case .failure(let failure): return failure.problems
        }
    }

    @Test func aGoodEntryLoads() throws {
        let directory = try TemporaryDirectory()
        _ = FileManager.default.createFile(atPath: directory.file("code"), contents: Data("031 45 154\n".utf8), attributes: [.posixPermissions: 0o600])
        let vendors = """
          - type: homekit
            id: hk
            accessories:
              - {name: thermostat, host: 192.168.1.20, port: 51826, setup_code_file: code}
              - {name: plug-2, host: 192.168.1.21, port: 51827, device_id: "aa:bb:cc:dd:ee:ff"}
        """
        #expect(Self.problems(vendors, directory: directory.path).isEmpty)
        var reader = ConfigReader()
        var settings = VendorSettings(type: "homekit", id: "hk", options: try #require(ConfigLoader.parse(
            yaml: "mqtt: {url: mqtt://localhost:1883}\nstorage: {path: /tmp/x.sqlite}\nvendors:\n" + vendors, baseDirectory: directory.path
        ).get().vendors.first?.options))
        settings.baseDirectory = directory.path
        let options = try #require(HomeKitVendorFactory.parse(settings, reader: &reader, environment: [:]))
        #expect(options.accessories.map(\.name) == ["thermostat", "plug-2"])
        #expect(options.accessories[0].setupCode?.reveal() == "031-45-154")
        #expect(options.accessories[1].deviceID == "AA:BB:CC:DD:EE:FF")
    }

    @Test func storageIsRequired() {
        let problems = Self.problems("  - {type: homekit, id: hk, accessories: [{name: a, host: h, port: 1}]}", storage: false)
        let problem = problems.first { $0.path == "vendors[0].type" }
        #expect(problem?.message.contains("needs storage") == true, "\(problems)")
        #expect(problem?.fix.contains("storage:") == true)
    }

    @Test func aMissingOrMalformedSetupCodeIsExplained() throws {
        let directory = try TemporaryDirectory()
        _ = FileManager.default.createFile(atPath: directory.file("bad"), contents: Data("12345\n".utf8), attributes: [.posixPermissions: 0o600])
        let problems = Self.problems("""
          - type: homekit
            id: hk
            accessories:
              - {name: a, host: h, port: 1, setup_code_file: bad}
              - {name: b, host: h, port: 2, setup_code_file: missing}
              - {name: c, host: h, port: 3, setup_code_env: NOT_SET}
        """, directory: directory.path)
        #expect(problems.contains { $0.path == "vendors[0].accessories[0].setup_code_file" && $0.message.contains("8 digits") && $0.fix.contains("031-45-154") }, "\(problems)")
        #expect(problems.contains { $0.path == "vendors[0].accessories[1].setup_code_file" && $0.message.contains("cannot read") }, "\(problems)")
        #expect(problems.contains { $0.path == "vendors[0].accessories[2].setup_code_env" && $0.message.contains("NOT_SET") }, "\(problems)")
        // The code given in the environment instead, by the default variable name.
        let fromEnvironment = Self.problems("  - {type: homekit, id: hk, accessories: [{name: plug, host: h, port: 1}]}",
                                            environment: ["LBS_HK_PLUG_SETUP_CODE": "031-45-154"])
        #expect(fromEnvironment.isEmpty, "\(fromEnvironment)")
    }

    @Test func namesAddressesAndIDsAreChecked() {
        let problems = Self.problems("""
          - type: homekit
            id: hk
            accessories:
              - {name: Living Room, host: h, port: 1}
              - {name: twice, host: h, port: 1}
              - {name: twice, host: h, port: 2}
              - {name: noaddress}
              - {name: byid, device_id: "AA:BB:CC:DD:EE:FF"}
              - {name: badid, host: h, port: 1, device_id: "AABBCC"}
              - {name: badport, host: h, port: 70000}
              - {name: half, host: h, device_id: "AA:BB:CC:DD:EE:00"}
        """)
        #expect(problems.contains { $0.path == "vendors[0].accessories[0].name" && $0.message.contains("[a-z0-9_-]+") })
        #expect(problems.contains { $0.path == "vendors[0].accessories[2].name" && $0.message.contains("twice") })
        #expect(problems.contains { $0.path == "vendors[0].accessories[3].host" && $0.message.contains("host and port") })
        // By its id alone: the address comes from mDNS.
        #expect(!problems.contains { $0.path.hasPrefix("vendors[0].accessories[4]") }, "\(problems)")
        #expect(problems.contains { $0.path == "vendors[0].accessories[7].port" && $0.message.contains("go together") })
        #expect(problems.contains { $0.path == "vendors[0].accessories[5].device_id" })
        #expect(problems.contains { $0.path == "vendors[0].accessories[6].port" })
        #expect(problems.allSatisfy { !$0.fix.isEmpty })
        #expect(!Self.problems("  - {type: homekit, id: hk}").isEmpty)
        #expect(!Self.problems("  - {type: homekit, id: hk, accessories: []}").isEmpty)
    }

    @Test func setupCodesAreNormalized() {
        #expect(HomeKitVendorFactory.normalizedSetupCode("03145154") == "031-45-154")
        #expect(HomeKitVendorFactory.normalizedSetupCode("031-45-154") == "031-45-154")
        #expect(HomeKitVendorFactory.normalizedSetupCode("031-45-15") == nil)
        #expect(HomeKitVendorFactory.normalizedSetupCode("031-45-15x") == nil)
        #expect(HomeKitVendorFactory.normalizedSetupCode("٠٣١-٤٥-١٥٤") == nil)
    }
}
