import Foundation
import GatewayModel
import GatewayTesting
@testable import LBSGatewayApp
import TestTraits
import Testing

/// `lbs-gateway self-test`: the answers the gateway needs from the system's time zone database and its YAML reader.
/// deploy/build-release.sh runs it on the static build, deploy/install.sh on the box.
@Suite struct RuntimeSelfTestTests {
    @Test func everyCheckPassesWithTheRuntimesData() {
        let checks = RuntimeSelfTest.run()
        #expect(checks.count >= 10)
        #expect(Set(checks.map(\.name)).count == checks.count, "names are unique")
        for check in checks {
            #expect(check.passed, "\(check.name): got \(check.actual), want \(check.expected)")
        }
    }

    @Test func aZoneIsDescribedByItsOffsetSeasonAndNextChange() throws {
        let instant = RuntimeSelfTest.instant
        #expect(RuntimeSelfTest.describe(nil, at: instant) == "unknown")
        #expect(RuntimeSelfTest.describe(LocalZone(identifier: "America/St_Johns"), at: instant)
            == "UTC-02:30, daylight saving, next change 2025-11-02T04:30:00.000Z")
        #expect(RuntimeSelfTest.describe(LocalZone.utc, at: instant) == "UTC+00:00, standard time, no change ahead")
        #expect(RuntimeSelfTest.offset(-9000) == "UTC-02:30" && RuntimeSelfTest.offset(20700) == "UTC+05:45" && RuntimeSelfTest.offset(0) == "UTC+00:00")
    }

    @Test func aWrongAnswerFailsItsCheck() {
        let check = RuntimeSelfTest.Check(name: "zone", expected: "UTC+02:00", actual: "unknown")
        #expect(!check.passed)
    }
}

/// The command as deploy/build-release.sh and deploy/install.sh run it.
@Suite(.integration, .timeLimit(.minutes(1))) struct SelfTestCommandTests {
    @Test func theCommandPrintsEachCheckAndTheLocalZoneAndExitsZero() async throws {
        let binary = try #require(Binaries.gateway, "lbs-gateway is not built")
        let directory = try TemporaryDirectory()
        var environment = ProcessInfo.processInfo.environment
        environment["TZ"] = "America/New_York"
        let process = try ProcessRunner(executable: binary, arguments: ["self-test"], environment: environment,
                                        outputDirectory: directory.path, name: "self-test")
        #expect(await process.waitForExit(timeout: .seconds(30)) == .exited(0), "\(process.standardOutput())\(process.standardError())")
        let lines = process.standardOutput().split(separator: "\n")
        #expect(lines.filter { $0.hasPrefix("ok   ") }.count == RuntimeSelfTest.run().count)
        #expect(!lines.contains { $0.hasPrefix("FAIL") })
        #expect(lines.contains { $0.hasPrefix("local time zone: America/New_York (UTC-0") }, "\(lines)")
        #expect(lines.last?.hasPrefix("self-test: \(RuntimeSelfTest.run().count) checks passed") == true)
    }
}
