import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayModel
import Logging
import Testing
import VendorConsciousness
import VendorKit
import VendorTesting

@Suite struct TLSConfigTests {
    static let environment = ["LBS_HOUSE_PASSWORD": "secret"]
    static let pin = Data((0..<32).map { UInt8($0 * 3) }).base64EncodedString()

    private func parse(_ tls: String, url: String = "https://192.168.1.20:8443", storage: Bool = true) -> Result<GatewayConfig, ConfigLoader.Failure> {
        let yaml = """
        mqtt: {url: mqtt://localhost:1883}
        \(storage ? "storage: {path: /tmp/lbs-tls-config-test.sqlite}" : "")
        vendors:
          - {type: consciousness, id: house, url: "\(url)", username: admin, tls: \(tls)}
        """
        return ConfigLoader.parse(yaml: yaml, environment: Self.environment)
    }

    private func problems(_ tls: String, url: String = "https://192.168.1.20:8443", storage: Bool = true) -> [ConfigProblem] {
        guard case .failure(let failure) = parse(tls, url: url, storage: storage) else { return [] }
        return failure.problems
    }

    private func policy(_ tls: String) throws -> TLSPolicy {
        let config = try parse(tls).get()
        var reader = ConfigReader()
        let options = try #require(ConsciousnessVendorFactory.parse(config.vendors[0], reader: &reader, environment: Self.environment))
        return options.tls
    }

    @Test func theThreeFormsParse() throws {
        #expect(try policy("system") == .system)
        #expect(try policy("first_use") == .firstUse)
        #expect(try policy("{pin: \"\(Self.pin)\"}") == .pinned(Self.pin))
        #expect(try policy("{pin: \"sha256//\(Self.pin)\"}") == .pinned(Self.pin))
        let config = try ConfigLoader.parse(
            yaml: "mqtt: {url: mqtt://localhost:1883}\nvendors:\n  - {type: consciousness, id: house, url: https://h, username: admin}\n",
            environment: Self.environment
        ).get()
        var reader = ConfigReader()
        #expect(ConsciousnessVendorFactory.parse(config.vendors[0], reader: &reader, environment: Self.environment)?.tls == .system)
    }

    @Test func pinningAPlainHTTPURLIsRefusedWithAFix() {
        for tls in ["first_use", "{pin: \"\(Self.pin)\"}"] {
            let found = problems(tls, url: "http://192.168.1.20:8000")
            #expect(found.map(\.path) == ["vendors[0].tls"], "\(tls): \(found)")
            #expect(found.first?.message.contains("https://") == true)
            #expect(found.first?.fix.contains("https://") == true)
        }
        #expect(problems("system", url: "http://192.168.1.20:8000").isEmpty)
    }

    @Test func badPinsAndUnknownFormsAreNamedByKeyPath() {
        let short = Data(repeating: 1, count: 16).base64EncodedString()
        for bad in ["abc", short, "sha256//\(short)", "sha1//\(Self.pin)", "\(Self.pin);sha256//\(Self.pin)"] {
            let found = problems("{pin: \"\(bad)\"}")
            #expect(found.map(\.path) == ["vendors[0].tls.pin"], "\(bad): \(found)")
            #expect(found.first?.fix.contains("SHA-256") == true)
        }
        #expect(problems("{pin: \"\"}").map(\.path) == ["vendors[0].tls.pin"])
        #expect(problems("{}").map(\.path) == ["vendors[0].tls.pin"])
        #expect(problems("insecure").map(\.path) == ["vendors[0].tls"])
        #expect(problems("off").map(\.path) == ["vendors[0].tls"])
        #expect(problems("[first_use]").map(\.path) == ["vendors[0].tls"])
        #expect(problems("{pin: \"\(Self.pin)\", verify: false}").map(\.path) == ["vendors[0].tls.verify"])
        // A bare pin is a likely slip: the fix shows the right form.
        #expect(problems("\"\(Self.pin)\"").first?.fix.contains("{pin:") == true)
    }

    @Test func firstUseWithoutStorageIsRefused() throws {
        let found = problems("first_use", storage: false)
        #expect(found.map(\.path) == ["vendors[0].tls"])
        #expect(found.first?.fix.contains("storage") == true)
        #expect(problems("{pin: \"\(Self.pin)\"}", storage: false).isEmpty)
        #expect(problems("system", storage: false).isEmpty)

        // The gateway refuses to start on such a config even when it was built in code, not loaded.
        var unchecked = try ConfigLoader.parse(
            yaml: "mqtt: {url: mqtt://localhost:1883}\nstorage: {path: /tmp/unused.sqlite}\nvendors:\n  - {type: consciousness, id: house, url: https://h, username: admin, tls: first_use}\n",
            environment: Self.environment
        ).get()
        unchecked.storage = nil
        #expect(throws: ConfigLoader.Failure.self) {
            _ = try GatewayService.services(config: unchecked, logger: Logger(label: "test"))
        }
    }
}
