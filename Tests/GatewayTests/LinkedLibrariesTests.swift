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
