import ConsciousnessSimulator
import Foundation
import GatewayModel
import GatewayTesting
import Logging
import Resilience
import TestTraits
import Testing
import VendorConsciousness
import VendorKit
import VendorTesting

/// A backend that echoes the password does not leak it; colliding ids keep every device.
@Suite(.integration, .timeLimit(.minutes(2))) struct ConsciousnessSecretsAndIdsTests {
    /// Short and punctuated, so the generic "long token" heuristic does not catch it: only the redactor can.
    static let password = #"Hunter2 "x" &y/z"#
    static let fragments = ["Hunter2", "&y/z", "&amp;y"]

    /// Every text a health event or error carries, as it would be logged, published and stored.
    static func texts(_ rig: Rig, _ errors: [GatewayError?]) -> [String] {
        let health = rig.log.health.compactMap(\.lastError) + [rig.vendor.http.health.lastError].compactMap { $0 }
        return (health + errors.compactMap { $0 }).flatMap { [$0.jsonText, $0.message, $0.suggestion, "\($0)"] }
    }

    @Test(arguments: [
        (SimulatorFault.echoCredentials401, "/api/v1/auth/login"),
        (SimulatorFault.echoInput422, "/api/v1/auth/login"),
        (SimulatorFault.echoPasswordHTML500, "/api/v1/devices"),
    ])
    func echoedPasswordNeverReachesHealthOrErrors(fault: SimulatorFault, path: String) async throws {
        let rig = try await Rig.start(password: Self.password)
        defer { Task { await rig.stop() } }
        rig.simulator.inject(fault, times: 1, matching: FaultMatch(pathPrefix: path))
        let errors = [await gatewayError { try await rig.vendor.poll() }]
        #expect(rig.simulator.counters.faultsServed == 1)
        #expect(errors.first??.code != nil)
        let texts = Self.texts(rig, errors)
        #expect(!texts.isEmpty)
        for text in texts {
            for fragment in Self.fragments {
                #expect(!text.contains(fragment), "leaked '\(fragment)' in: \(text)")
            }
        }
        // The excerpt is still quoted (readable), with the password cut out; a refused login has a fixed text.
        #expect(texts.contains { $0.contains(SecretRedactor.replacement) } || fault == .echoCredentials401)
    }

    @Test func bearerTokenIsRedactedToo() async throws {
        let rig = try await Rig.start()
        defer { Task { await rig.stop() } }
        try await rig.vendor.poll()
        // The redactor knows the current token as soon as the login succeeded.
        let probe = rig.vendor.http.redactor.redact("Bearer 0123 and the password \(rig.password)")
        #expect(!probe.contains(rig.password))
        #expect(probe.contains(SecretRedactor.replacement))
    }

    // MARK: Point 10: colliding ids

    static let hostileIDs = ["a/b", "a+b", "A/B", "a_b", "#", "+", "/", "..", ".", "", "house", "House", "HOUSE", "x y", "x_y", "ü", "-", "Lights-Kitchen"]

    @Test func collidingIDsKeepEveryDeviceAndTheHubIsReserved() async throws {
        let logs = LogCapture()
        let rig = try await Rig.start(logger: logs.logger, prepare: { simulator in
            for id in Self.hostileIDs { simulator.addDevice(id: id) }
        })
        defer { Task { await rig.stop() } }
        try await rig.vendor.poll()
        try await rig.vendor.poll()

        let inventory = try #require(rig.log.inventories.last)
        // 7 seeded + 17 hostile (the empty id is skipped) + the hub, every one with its own id.
        #expect(inventory.count == 25)
        #expect(Set(inventory.map(\.id)).count == inventory.count)
        #expect(inventory.allSatisfy { Slug.isValid($0.id.rawValue) })
        let byRaw = Dictionary(inventory.map { ($0.vendorDeviceID + ($0.type == .hub ? "#hub" : ""), $0) }, uniquingKeysWith: { first, _ in first })
        #expect(byRaw["house#hub"]?.id.rawValue == "consciousness_house")
        #expect(byRaw["house"]?.id.rawValue != "consciousness_house")
        #expect(byRaw["house"]?.id.rawValue.hasPrefix("consciousness_house_") == true)
        // Ids already in topic form keep them; the others in a collision get a stable suffix.
        #expect(byRaw["a_b"]?.id.rawValue == "consciousness_a_b")
        #expect(byRaw["lights-kitchen"]?.id.rawValue == "consciousness_lights-kitchen")
        #expect(byRaw["Lights-Kitchen"]?.id.rawValue.hasPrefix("consciousness_lights-kitchen_") == true)
        #expect(byRaw["x_y"]?.id.rawValue == "consciousness_x_y")
        #expect(byRaw[""] == nil)

        // Stable: a second simulator with the same ids gives the same topic ids.
        let again = try await Rig.start(prepare: { simulator in
            for id in Self.hostileIDs.reversed() { simulator.addDevice(id: id) }
        })
        defer { Task { await again.stop() } }
        try await again.vendor.poll()
        #expect(Set(try #require(again.log.inventories.last).map(\.id)) == Set(inventory.map(\.id)))

        // Reported once (two polls), as warnings that name the ids.
        let warnings = logs.all.filter { $0.level == .warning }.map(\.message)
        #expect(warnings.contains { $0.contains("collide") && $0.contains("'a/b'") })
        #expect(warnings.contains { $0.contains("empty id") })
        #expect(warnings.contains { $0.contains("built-in hub") })
        #expect(Set(warnings).count == warnings.count, "repeated warnings: \(warnings)")
    }
}
