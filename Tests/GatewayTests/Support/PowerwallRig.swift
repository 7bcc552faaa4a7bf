import Foundation
import GatewayTesting
import VendorSimulators

/// A Powerwall simulator on a fixed loopback port (so a test can stop it and start another at the same URL) and
/// a directory with its password file, as `vendorLine` names it.
struct PowerwallRig {
    let port: Int
    let configuration: PowerwallSimulator.Configuration
    let simulator: PowerwallSimulator
    let directory: TemporaryDirectory

    static func started() async throws -> PowerwallRig {
        let port = try freeLoopbackPort()
        let configuration = PowerwallSimulator.Configuration(password: "TESLA", fixtures: Fixtures.path("powerwall", ""), port: UInt16(port))
        let simulator = try PowerwallSimulator(configuration: configuration)
        _ = try await simulator.start()
        let directory = try TemporaryDirectory()
        try "TESLA\n".write(toFile: directory.file("pw-password"), atomically: true, encoding: .utf8)
        return PowerwallRig(port: port, configuration: configuration, simulator: simulator, directory: directory)
    }

    /// A second simulator on the same port (the Powerwall back after an outage).
    func restarted() async throws -> PowerwallSimulator {
        let again = try PowerwallSimulator(configuration: configuration)
        _ = try await again.start()
        return again
    }

    func vendorLine(pollInterval: Double) -> String {
        "{type: powerwall, id: pw, url: \"http://127.0.0.1:\(port)\", password_file: pw-password, poll_interval: \(pollInterval), timeout: 1}"
    }
}
