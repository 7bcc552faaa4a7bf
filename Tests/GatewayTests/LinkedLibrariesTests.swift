import Foundation
import Testing

@Suite("What the lbs-gateway binary links")
struct LinkedLibrariesTests {
    /// libcurl and the ~25 libraries it brings (GnuTLS, Kerberos, LDAP …) are loaded only when a vendor first uses
    /// HTTP (CCurl's loader): not linked, so a gateway without HTTP vendors never maps them (~3.8 MB resident).
    @Test func libcurlIsLoadedOnFirstUseNotLinked() throws {
        let binary = try #require(Binaries.gateway, "lbs-gateway is built next to the tests")
        let ldd = Process()
        ldd.executableURL = URL(fileURLWithPath: "/usr/bin/ldd")
        ldd.arguments = [binary]
        let output = Pipe()
        ldd.standardOutput = output
        try ldd.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        ldd.waitUntilExit()
        #expect(ldd.terminationStatus == 0, "ldd \(binary): \(text)")
        #expect(text.contains("libmosquitto"), "ldd lists what is linked: \(text)")
        for library in ["libcurl", "libgnutls", "libkrb5", "libldap"] {
            #expect(!text.contains(library), "\(library) is linked: \(text)")
        }
    }
}

extension LinkedLibrariesTests {
    /// A libcurl that cannot be used (here a stand-in without its functions, found first through LD_LIBRARY_PATH) fails
    /// `lbs-gateway self-test`, which install.sh runs, with the reason, instead of a vendor's first poll failing later.
    @Test func anUnusableLibcurlFailsTheSelfTestWithTheReason() throws {
        let binary = try #require(Binaries.gateway, "lbs-gateway is built next to the tests")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("lbs-fake-curl-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let source = directory.appendingPathComponent("empty.c")
        try "int lbs_not_curl = 1;\n".write(to: source, atomically: true, encoding: .utf8)
        let compile = Process()
        compile.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        compile.arguments = ["clang", "-shared", "-fPIC", "-o", directory.appendingPathComponent("libcurl.so.4").path, source.path]
        try compile.run()
        compile.waitUntilExit()
        try #require(compile.terminationStatus == 0, "clang builds the stand-in library")

        let selfTest = Process()
        selfTest.executableURL = URL(fileURLWithPath: binary)
        selfTest.arguments = ["self-test"]
        var environment = ProcessInfo.processInfo.environment
        environment["LD_LIBRARY_PATH"] = directory.path
        selfTest.environment = environment
        let output = Pipe()
        selfTest.standardOutput = output
        selfTest.standardError = output
        try selfTest.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        selfTest.waitUntilExit()
        #expect(selfTest.terminationStatus != 0, "\(text)")
        #expect(text.contains("libcurl.so.4 lacks curl_global_init"), "\(text)")
    }
}

extension LinkedLibrariesTests {
    /// GnuTLS comes in with Debian's libcurl (through librtmp and libldap) but is never used: the gateway's own
    /// `_gnutls_global_init_skip` must be what GnuTLS's constructor calls, so it skips its set-up (~1 MB resident).
    /// The dynamic loader's binding trace shows which object answered the call.
    @Test func gnuTLSSkipsItsImplicitSetUpWhenLibcurlIsLoaded() throws {
        let binary = try #require(Binaries.gateway, "lbs-gateway is built next to the tests")
        guard FileManager.default.fileExists(atPath: "/usr/lib/x86_64-linux-gnu/libgnutls.so.30")
            || FileManager.default.fileExists(atPath: "/lib/x86_64-linux-gnu/libgnutls.so.30") else { return }
        let selfTest = Process()
        selfTest.executableURL = URL(fileURLWithPath: binary)
        // self-test loads libcurl (and with it GnuTLS), as a vendor's first HTTP request does.
        selfTest.arguments = ["self-test"]
        var environment = ProcessInfo.processInfo.environment
        environment["LD_DEBUG"] = "bindings"
        selfTest.environment = environment
        let output = Pipe()
        selfTest.standardOutput = FileHandle.nullDevice
        selfTest.standardError = output
        try selfTest.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        selfTest.waitUntilExit()
        let binding = text.split(separator: "\n").first { $0.contains("`_gnutls_global_init_skip'") }
        let line = try #require(binding.map(String.init), "GnuTLS was loaded and asked whether to skip its set-up")
        #expect(line.contains("to \(binary) "), "answered by the executable, not GnuTLS's own default: \(line)")
    }
}
