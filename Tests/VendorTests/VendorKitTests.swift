import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayModel
import GatewayTesting
import Resilience
import Testing
import VendorConsciousness
import VendorDemo
import VendorKit

/// The vendor kit's shared option parser and the registry every vendor enters through.
@Suite struct VendorKitTests {
    private func settings(_ yaml: String, id: String = "pw") -> VendorSettings {
        // The gateway's loader turns YAML into nodes; here a mapping is built directly.
        var pairs: [(key: String, value: ConfigNode)] = []
        for part in yaml.split(separator: ",") {
            let kv = part.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            pairs.append((key: kv[0], value: .scalar(kv[1], line: 1)))
        }
        return VendorSettings(type: "sample", id: id, options: .mapping(pairs), path: "vendors[2]")
    }

    static let local = NetworkOptions.Defaults(urlExample: "https://192.168.91.1", pollInterval: 5, tls: .firstUse)
    static let cloud = NetworkOptions.Defaults(
        url: "https://api.example.com", urlExample: "https://api.example.com", pollInterval: 300, timeout: 20,
        quota: QuotaScheduler.Budgets(perDay: 300)
    )

    @Test func aLocalHTTPSDeviceIsTrustedOnFirstUseByDefaultAndPlainHTTPNeedsNoTLS() throws {
        var reader = ConfigReader()
        let https = try #require(NetworkOptions.parse(settings("url=https://192.168.91.1"), defaults: Self.local, reader: &reader))
        #expect(https.tls == .firstUse)
        #expect(https.pollInterval == .seconds(5) && https.timeout == .seconds(10))
        let http = try #require(NetworkOptions.parse(settings("url=http://192.168.1.9"), defaults: Self.local, reader: &reader))
        #expect(http.tls == .system)
        let written = try #require(NetworkOptions.parse(settings("url=https://192.168.91.1,tls=system"), defaults: Self.local, reader: &reader))
        #expect(written.tls == .system)
        #expect(reader.problems.isEmpty)
    }

    @Test func aCloudVendorHasItsURLAndQuotaUnlessTheEntryOverridesThem() throws {
        var reader = ConfigReader()
        let plain = try #require(NetworkOptions.parse(settings("timeout=3"), defaults: Self.cloud, reader: &reader))
        #expect(plain.url == "https://api.example.com" && plain.timeout == .seconds(3) && plain.pollInterval == .seconds(300))
        #expect(plain.quota == QuotaScheduler.Budgets(perDay: 300))
        var entry = settings("url=http://127.0.0.1:9000")
        entry.pollInterval = 0.5
        let simulated = try #require(NetworkOptions.parse(entry, defaults: Self.cloud, reader: &reader))
        #expect(simulated.url == "http://127.0.0.1:9000" && simulated.pollInterval == .milliseconds(500))
        #expect(reader.problems.isEmpty)
    }

    @Test func badSharedKeysAreReportedWithTheirPath() {
        var reader = ConfigReader()
        let options = NetworkOptions.parse(settings("url=ftp://x,timeout=0,tls=maybe"), defaults: Self.local, reader: &reader)
        #expect(options == nil)
        #expect(Set(reader.problems.map(\.path)) == ["vendors[2].url", "vendors[2].timeout", "vendors[2].tls"])
        #expect(reader.problems.first { $0.path == "vendors[2].url" }?.fix == "e.g. https://192.168.91.1")
        var missing = ConfigReader()
        #expect(NetworkOptions.parse(settings("timeout=5"), defaults: Self.local, reader: &missing) == nil)
        #expect(missing.problems.map(\.path) == ["vendors[2].url"])
    }

    @Test func secretsOfAnyNameComeFromAFileOrTheEnvironmentNeverTheEntry() throws {
        let directory = try TemporaryDirectory()
        try "jwt-token\n".write(toFile: directory.path + "/token", atomically: true, encoding: .utf8)
        var entry = settings("token_file=token")
        entry.baseDirectory = directory.path
        var reader = ConfigReader()
        #expect(reader.secret("token", of: entry, environment: [:])?.reveal() == "jwt-token")
        #expect(reader.secret("token", of: settings("x=1", id: "envoy-1"), environment: ["LBS_ENVOY_1_TOKEN": "t2"])?.reveal() == "t2")
        #expect(reader.secret("api_key", of: settings("api_key_env=KEY"), environment: ["KEY": "k"])?.reveal() == "k")
        #expect(reader.problems.isEmpty)
        // Optional secrets are simply absent; an inline secret is refused and named.
        #expect(reader.secret("token", of: settings("x=1"), environment: [:], required: false) == nil)
        #expect(reader.problems.isEmpty)
        _ = reader.secret("token", of: settings("token=abc"), environment: [:])
        #expect(reader.problems.first?.path == "vendors[2].token")
        #expect(reader.problems.first?.message == "tokens are not read from the config file")
        #expect(reader.problems.contains { $0.message == "no token: the environment variable LBS_PW_TOKEN is not set" })
    }

    @Test func theRegistryNamesEachTypeOnceAndDrivesTheCatalog() {
        let names = VendorRegistry.factories.map { $0.typeName }
        #expect(Set(names).count == names.count)
        #expect(VendorCatalog.all.types.starts(with: ["demo", "consciousness"]))
        #expect(VendorCatalog.all.networkTypes.contains("consciousness") && !VendorCatalog.all.networkTypes.contains("demo"))
        #expect(DemoVendorFactory.isNetworkVendor == false && ConsciousnessVendorFactory.isNetworkVendor)
    }

    @Test func anUnknownTypeIsRefusedWithTheKnownOnes() {
        guard case .failure(let failure) = ConfigLoader.parse(yaml: "mqtt: {url: mqtt://localhost}\nvendors:\n  - {type: teslla, id: x}\n") else {
            Issue.record("an unknown type was accepted")
            return
        }
        #expect(failure.problems.first?.path == "vendors[0].type")
        #expect(failure.problems.first?.fix.contains(VendorCatalog.all.types.joined(separator: ", ")) == true)
    }

    @Test func theCatalogBuildsARegisteredVendorFromItsEntry() throws {
        let config = try ConfigLoader.parse(yaml: "mqtt: {url: mqtt://localhost}\nvendors:\n  - {type: demo, id: lab, devices: 3, poll_interval: 2}\n").get()
        let vendor = try VendorCatalog.all.make(config.vendors[0], sink: VendorEventSink { _ in }, context: VendorContext(), environment: [:])
        #expect(vendor.instanceID == "lab" && vendor.typeName == "demo")
        let plain = DemoVendor(instanceID: "lab", options: DemoOptions(), sink: VendorEventSink { _ in })
        #expect((vendor as? DemoVendor)?.devices.count == plain.devices.count + 3)
    }
}

/// RFC 6238 / RFC 4226 one-time passwords against the RFCs' own test vectors.
@Suite struct TOTPTests {
    @Test func theRFCVectorsAreMet() {
        // RFC 4226 appendix D: secret "12345678901234567890", counters 0…9.
        let key = Array("12345678901234567890".utf8)
        let expected = ["755224", "287082", "359152", "969429", "338314", "254676", "287922", "162583", "399871", "520489"]
        #expect((0..<10).map { TOTP.code(key: key, counter: UInt64($0)) } == expected)
        // RFC 6238 appendix B (SHA-1, 8 digits) at T = 59 s, 1111111109 s, 2000000000 s.
        let secret = "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"   // base32 of "12345678901234567890"
        #expect(TOTP.base32Decode(secret) == key)
        #expect(TOTP.code(secret: secret, at: Date(timeIntervalSince1970: 59), digits: 8) == "94287082")
        #expect(TOTP.code(secret: secret, at: Date(timeIntervalSince1970: 1_111_111_109), digits: 8) == "07081804")
        #expect(TOTP.code(secret: secret, at: Date(timeIntervalSince1970: 2_000_000_000), digits: 8) == "69279037")
        #expect(TOTP.code(secret: "not base32!", at: Date()) == nil)
    }
}
