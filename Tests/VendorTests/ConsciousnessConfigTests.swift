import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayModel
import Resilience
import Testing
import VendorConsciousness
import VendorKit
import VendorTesting

@Suite struct ConsciousnessConfigTests {
    private func problems(_ vendor: String, environment: [String: String] = [:], baseDirectory: String = ".") -> [ConfigProblem] {
        let yaml = "mqtt: {url: mqtt://localhost:1883}\nvendors:\n  - \(vendor)\n"
        guard case .failure(let failure) = ConfigLoader.parse(yaml: yaml, environment: environment, baseDirectory: baseDirectory) else {
            return []
        }
        return failure.problems
    }

    @Test func missingURLUsernameAndPasswordAreNamedByKeyPath() {
        let found = problems("{type: consciousness, id: house}")
        let paths = Set(found.map(\.path))
        #expect(paths.isSuperset(of: ["vendors[0].url", "vendors[0].username", "vendors[0].password_file"]))
        let password = found.first { $0.path == "vendors[0].password_file" }
        #expect(password?.message.contains("LBS_HOUSE_PASSWORD") == true)
    }

    @Test func badValuesAreReportedWithFixes() {
        let found = problems(
            "{type: consciousness, url: ftp://h, username: admin, password: plain, password_env: NOPE_PW, timeout: 0, "
                + "quota: {per_hour: -1, per_weak: 3}, breaker: {failure_ratio: 2}}"
        )
        let paths = Set(found.map(\.path))
        #expect(paths.isSuperset(of: [
            "vendors[0].url", "vendors[0].password", "vendors[0].password_env", "vendors[0].timeout",
            "vendors[0].quota.per_hour", "vendors[0].quota.per_weak", "vendors[0].breaker.failure_ratio",
        ]))
        // A password written into the file is refused without being repeated.
        #expect(found.allSatisfy { !$0.description.contains("plain") })
    }

    @Test func passwordFileIsRelativeToTheConfigAndNeverShown() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lbs-consc-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try "s3cret-house\n".write(to: dir.appendingPathComponent("house.pw"), atomically: true, encoding: .utf8)

        let yaml = """
        mqtt: {url: mqtt://localhost:1883}
        vendors:
          - type: consciousness
            id: house
            url: http://127.0.0.1:8000/api/v1
            username: admin
            password_file: house.pw
            poll_interval: 12
            timeout: 3
            quota: {per_day: 2000}
            breaker: {minimum_calls: 4, open_duration: 45}
        """
        let config = try ConfigLoader.parse(yaml: yaml, baseDirectory: dir.path).get()
        var reader = ConfigReader()
        let options = try #require(ConsciousnessVendorFactory.parse(config.vendors[0], reader: &reader, environment: [:]))
        #expect(reader.problems.isEmpty)
        #expect(options.password.reveal() == "s3cret-house")
        #expect(options.apiBase == "http://127.0.0.1:8000/api/v1")
        #expect(options.pollInterval == .seconds(12))
        #expect(options.timeout == .seconds(3))
        #expect(options.quota?.perDay == 2000)
        #expect(options.breaker.minimumCalls == 4)
        #expect(options.breaker.openDuration == .seconds(45))
        #expect(!"\(options)".contains("s3cret"))
        #expect(!String(reflecting: options).contains("s3cret"))
    }

    @Test func passwordComesFromTheNamedOrTheDefaultEnvironmentVariable() throws {
        let base = "{type: consciousness, id: house-1, url: 'http://h:8000', username: admin"
        let named = try ConfigLoader.parse(
            yaml: "mqtt: {url: mqtt://h}\nvendors:\n  - \(base), password_env: HOUSE_PW}\n", environment: ["HOUSE_PW": "from-env"]
        ).get()
        var reader = ConfigReader()
        #expect(ConsciousnessVendorFactory.parse(named.vendors[0], reader: &reader, environment: ["HOUSE_PW": "from-env"])?
            .password.reveal() == "from-env")

        let fallback = try ConfigLoader.parse(
            yaml: "mqtt: {url: mqtt://h}\nvendors:\n  - \(base)}\n", environment: ["LBS_HOUSE_1_PASSWORD": "default-env"]
        ).get()
        #expect(ConsciousnessVendorFactory.parse(fallback.vendors[0], reader: &reader, environment: ["LBS_HOUSE_1_PASSWORD": "default-env"])?
            .password.reveal() == "default-env")
        #expect(ConfigReader.defaultSecretVariable("password", vendorID: "house-1") == "LBS_HOUSE_1_PASSWORD")
    }
}
