import Foundation
import GatewayTesting
import Testing

/// The SRP arithmetic (`Sources/CModExp`, Emporia's Cognito sign-in) takes the same branches and touches the same
/// memory whatever the secret exponent and base are: `Tests/ConstantTime/modexp_ct.c` marks them undefined for
/// valgrind's memcheck, which reports any branch or address that depends on them. Compiled at -O0 (debug builds)
/// and -O2 (release: where the compiler turns a mask select back into a branch unless it is kept opaque).
@Suite(.serialized, .timeLimit(.minutes(3))) struct ConstantTimeTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func compiler() -> String? {
        ["/opt/swift/usr/bin/clang", "/usr/bin/clang", "/usr/bin/cc"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    @Test(arguments: ["-O0", "-O2"]) func modularExponentiationIsConstantTime(optimization: String) async throws {
        let valgrind = "/usr/bin/valgrind"
        try #require(FileManager.default.isExecutableFile(atPath: valgrind), "valgrind is needed (deploy/install-deps.sh installs it)")
        let cc = try #require(Self.compiler(), "no C compiler")
        let directory = try TemporaryDirectory()
        let binary = directory.file("modexp_ct")
        // DWARF 4: valgrind 3.19 (Debian 12) cannot read clang's default DWARF 5.
        let build = try ProcessRunner(
            executable: cc,
            arguments: [optimization, "-gdwarf-4", "-I", Self.root.appendingPathComponent("Sources/CModExp/include").path,
                        Self.root.appendingPathComponent("Tests/ConstantTime/modexp_ct.c").path,
                        Self.root.appendingPathComponent("Sources/CModExp/modexp.c").path, "-o", binary],
            outputDirectory: directory.path, name: "cc")
        let built = await build.waitForExit(timeout: .seconds(60))
        try #require(built == .exited(0), "compiling the check failed: \(build.standardError())")
        let check = try ProcessRunner(
            executable: valgrind, arguments: ["-q", "--error-exitcode=9", binary], outputDirectory: directory.path, name: "valgrind")
        let status = await check.waitForExit(timeout: .seconds(120))
        let report = check.standardError().split(separator: "\n").filter { $0.contains("uninitialised") || $0.contains(" at 0x") }.prefix(12)
        #expect(status == .exited(0), "secret-dependent branches or addresses (\(optimization)):\n\(report.joined(separator: "\n"))")
    }
}
