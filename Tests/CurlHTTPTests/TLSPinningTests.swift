import CurlHTTP
import Foundation
import GatewayTesting
import Testing

/// A throwaway self-signed TLS server (`openssl s_server -www`) on a loopback port, like a LAN device.
private final class SelfSignedServer: Sendable {
    let url: String
    let expectedPin: String
    private let process: Process
    private let directory: URL

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("curlhttp-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let key = directory.appendingPathComponent("key.pem").path
        let cert = directory.appendingPathComponent("cert.pem").path
        try Self.run("/usr/bin/openssl", [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=powerwall.local",
        ])
        // The reference value computed independently of the code under test.
        expectedPin = try Self.run("/bin/sh", ["-c",
            "openssl x509 -in '\(cert)' -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64",
        ]).trimmingCharacters(in: .whitespacesAndNewlines)

        let port = try UInt16(freeLoopbackPort())
        url = "https://127.0.0.1:\(port)/"
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["s_server", "-accept", "127.0.0.1:\(port)", "-cert", cert, "-key", key, "-www", "-quiet"]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    func stop() {
        if process.isRunning {
            // SIGKILL: the child inherits the test runner's blocked signal mask, so SIGTERM would never arrive.
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: directory)
    }

    @discardableResult
    private static func run(_ executable: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw HTTPError(kind: .other(-1), message: "\(executable) \(arguments.first ?? "") failed")
        }
        return String(decoding: data, as: UTF8.self)
    }
}

/// Runs `body` with a started self-signed server and the pin the client fetched on first use.
private func withSelfSignedServer(_ body: (SelfSignedServer, HTTPClient, String) async throws -> Void) async throws {
    let server = try SelfSignedServer()
    let client = try HTTPClient()
    defer {
        client.shutdown()
        server.stop()
    }
    var fetched: String?
    // s_server needs a moment to listen; poll instead of sleeping a fixed time.
    try await waitUntil("s_server to serve its certificate", timeout: .seconds(10)) {
        fetched = try? await client.fetchPublicKeyPin(url: server.url, connectTimeout: .seconds(1))
        return fetched != nil
    }
    try await body(server, client, try #require(fetched))
}

@Suite("CurlHTTP TLS pinning", .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl")))
struct TLSPinningTests {
    @Test func trustOnFirstUseFetchesTheKeyPinAndPinnedRequestsSucceed() async throws {
        try await withSelfSignedServer { server, client, pin in
            #expect(pin == server.expectedPin)
            let response = try await client.send(HTTPClientRequest(url: server.url, tls: .pinned(spkiSHA256Base64: pin)))
            #expect(response.status == 200)
        }
    }

    @Test func wrongPinAndSystemTrustAreRejected() async throws {
        try await withSelfSignedServer { server, client, _ in
            let otherKey = Data(repeating: 7, count: 32).base64EncodedString()
            await expectHTTPError(.pinMismatch) {
                try await client.send(HTTPClientRequest(url: server.url, tls: .pinned(spkiSHA256Base64: otherKey)))
            }
            await expectHTTPError(.tls) {
                try await client.send(HTTPClientRequest(url: server.url))
            }
        }
    }

    @Test func pinFetchNeedsHTTPS() async throws {
        let client = try HTTPClient()
        defer { client.shutdown() }
        await expectHTTPError(.invalidRequest) { try await client.fetchPublicKeyPin(url: "http://127.0.0.1:9/") }
    }
}
