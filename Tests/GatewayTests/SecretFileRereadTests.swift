import ConsciousnessSimulator
import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayTesting
import MQTT
import Resilience
import TestTraits
import Testing
import VendorKit

/// A secret given as a file follows the file: a password fixed after a refused sign-in is used by the next
/// attempt, with no restart (the consciousness backend once kept refusing a fixed password for 9.5 minutes).
@Suite(.integration, .serialized, .timeLimit(.minutes(2))) struct SecretFileRereadTests {
    @Test func aSecretFileIsReadAgainWhenItChangesAndTheRedactorLearnsTheNewValue() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("password")
        try "old-password\n".write(toFile: path, atomically: true, encoding: .utf8)
        var reader = ConfigReader()
        let read = reader.readSecretFile("password", at: "x.password_file", baseDirectory: directory.path)
        let secret = try #require(read)
        #expect(secret.reveal() == "old-password")
        let redactor = SecretRedactor()
        redactor.set("password", secret)
        try "new-password\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(secret.reveal() == "new-password")
        #expect(redactor.redact("old-password and new-password") == "[redacted] and [redacted]")
        // An unreadable file keeps the last value.
        try FileManager.default.removeItem(atPath: path)
        #expect(secret.reveal() == "new-password")
        #expect("\(secret)" == "<redacted>")
    }

    @Test func aPasswordFixedInItsFileIsUsedByTheNextSignIn() async throws {
        let simulator = ConsciousnessSimulator(configuration: .init(password: "backend-secret"))
        _ = try await simulator.start()
        let directory = try TemporaryDirectory()
        try "wrong-password\n".write(toFile: directory.file("backend-password"), atomically: true, encoding: .utf8)
        let vendors = """
              - type: consciousness
                id: house
                url: \(await simulator.baseURL)
                username: admin
                password_file: backend-password
                poll_interval: 0.5
                timeout: 1
            """
        let gateway = try await GatewayHarness.start(directory: directory, vendors: vendors)
        defer { Task { await gateway.stop(); await simulator.stop() } }
        let client = try await gateway.observer("lbs/bridge/vendors/house")
        let refused = try await client.waitForMessage(topic: "lbs/bridge/vendors/house", timeout: .seconds(15)) {
            (($0.json?["last_error"] as? [String: Any])?["code"] as? String) == "auth_failed"
        }
        #expect(!refused.text.contains("wrong-password"))
        // The operator fixes the file; the next attempt (after the refused-login pause of 15 s) signs in.
        try "backend-secret\n".write(toFile: directory.file("backend-password"), atomically: true, encoding: .utf8)
        try await client.waitForMessage(topic: "lbs/bridge/vendors/house", timeout: .seconds(40)) { $0.json?["state"] as? String == "ok" }
        await client.shutdown()
    }
}
