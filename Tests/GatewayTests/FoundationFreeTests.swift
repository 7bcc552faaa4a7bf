import Foundation
import GatewayTesting
import Testing

/// No module of the gateway imports full Foundation: one that did would pull it (and ICU) back into the installed
/// binary, about 15 MB (`.ci/run` gates the stripped size too, this says which file). Test helpers, simulators and
/// benchmarks may.
@Suite struct FoundationFreeTests {
    static let gatewayModules = ["Cache", "CommandParsing", "CurlHTTP", "Features", "GatewayCore", "GatewayModel", "HAP", "LBSGatewayApp",
                                 "LBSGatewayCLI", "MQTT", "ModularPower", "Resilience", "VendorKit", "Vendors"]

    @Test func gatewayModulesImportFoundationOnlyWhereFoundationEssentialsIsMissing() throws {
        let root = try #require(Fixtures.packageRoot())
        var offenders: [String] = []
        var files = 0
        for module in Self.gatewayModules {
            guard let walker = FileManager.default.enumerator(atPath: "\(root)/Sources/\(module)") else { continue }
            for case let path as String in walker where path.hasSuffix(".swift") {
                files += 1
                let lines = try String(contentsOfFile: "\(root)/Sources/\(module)/\(path)", encoding: .utf8).components(separatedBy: "\n")
                for (number, line) in lines.enumerated() where line.hasPrefix("import Yams") {
                    offenders.append("Sources/\(module)/\(path):\(number + 1): Yams imports full Foundation; the config has YAMLReader")
                }
                for (number, line) in lines.enumerated() where line.hasPrefix("import Foundation") || line.hasPrefix("@preconcurrency import Foundation") {
                    let word = line.split(separator: " ").last.map(String.init) ?? ""
                    // `#if canImport(FoundationEssentials) … #else import Foundation #endif` is the pattern; anything else
                    // (FoundationInternationalization, plain Foundation) links what the binary leaves out.
                    if word != "FoundationEssentials", !(number > 0 && lines[number - 1] == "#else") {
                        offenders.append("Sources/\(module)/\(path):\(number + 1): \(line)")
                    }
                }
            }
        }
        #expect(files > 200, "found \(files) files")
        #expect(offenders.isEmpty, "\(offenders.joined(separator: "\n"))")
    }
}
