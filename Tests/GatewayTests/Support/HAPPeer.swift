import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import GatewayTesting

/// A real HomeKit accessory: HAP-python 5.0.0 serving a recorded `/accessories` dump (`deploy/homekit/hap-peer.py`),
/// with real pair-setup, pair-verify, encryption and events. Stock HAP-python's SRP (its K truncation included).
/// Needs `LBS_HAP_PYTHON`, the venv's python (`deploy/homekit/peer-setup.sh`; `.ci/run` sets it).
final class HAPPeer: Sendable {
    static let python = ProcessInfo.processInfo.environment["LBS_HAP_PYTHON"].flatMap { $0.isEmpty ? nil : $0 }
    static let enabled = python != nil

    let process: ProcessRunner
    let port: Int
    let controlPort: Int
    let accessoryID: String
    let setupCode: String
    let stateDirectory: String

    private init(process: ProcessRunner, port: Int, controlPort: Int, accessoryID: String, setupCode: String, stateDirectory: String) {
        self.process = process
        self.port = port
        self.controlPort = controlPort
        self.accessoryID = accessoryID
        self.setupCode = setupCode
        self.stateDirectory = stateDirectory
    }

    /// Starts the peer on `fixture` (a file in Tests/Fixtures/homekit); `port` 0 picks a free one. The same
    /// `stateDirectory` again keeps its id, keys and pairings (a restarted accessory).
    static func start(fixture: String, stateDirectory: String, port: Int = 0, setupCode: String = "031-45-154") async throws -> HAPPeer {
        guard let python else { throw TestSupportError("LBS_HAP_PYTHON is not set") }
        let script = (Fixtures.packageRoot() ?? ".") + "/deploy/homekit/hap-peer.py"
        try FileManager.default.createDirectory(atPath: stateDirectory, withIntermediateDirectories: true)
        let process = try ProcessRunner(
            executable: python,
            arguments: [script, "--fixture", Fixtures.path("homekit", fixture), "--state-dir", stateDirectory, "--port", String(port),
                        "--setup-code", setupCode, "--stock-srp"],
            outputDirectory: stateDirectory, name: "hap-peer-\(UInt32.random(in: 0...UInt32.max))"
        )
        var ready: [String: Any]?
        try await waitUntil("the HAP peer on \(fixture) is ready: \(process.standardError().suffix(2000))", timeout: .seconds(30)) {
            if !process.isRunning { throw TestSupportError("the HAP peer exited: \(process.standardError().suffix(2000))") }
            let line = process.standardOutput().split(separator: "\n").first.map(String.init) ?? ""
            ready = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
            return ready != nil
        }
        guard let ready, let port = ready["port"] as? Int, let control = ready["control_port"] as? Int, let id = ready["id"] as? String else {
            throw TestSupportError("the HAP peer's ready line is incomplete")
        }
        return HAPPeer(process: process, port: port, controlPort: control, accessoryID: id, setupCode: setupCode, stateDirectory: stateDirectory)
    }

    func stop() async {
        _ = await process.stop(grace: .seconds(5))
    }

    /// A change on the accessory's side (a person at the thermostat): subscribed controllers get an event.
    func set(aid: Int, iid: Int, value: Any) async throws {
        _ = try await control("POST", "/set", body: ["aid": aid, "iid": iid, "value": value, "force": true])
    }

    /// What controllers wrote, in order.
    func writes() async throws -> [[String: Any]] {
        try await control("GET", "/writes") as? [[String: Any]] ?? []
    }

    func pairings() async throws -> [[String: Any]] {
        try await control("GET", "/pairings") as? [[String: Any]] ?? []
    }

    /// Accessories added and removed behind a bridge: the served database becomes `fixture`'s, sessions stay
    /// open, `c#` goes up. Returns the new `c#`.
    func replaceDatabase(fixture: String) async throws -> Int {
        let answer = try await control("POST", "/database", body: ["fixture": Fixtures.path("homekit", fixture)]) as? [String: Any]
        guard let number = answer?["c#"] as? Int else { throw TestSupportError("POST /database answered \(String(describing: answer))") }
        return number
    }

    /// A reset on the accessory: every pairing forgotten, sessions closed.
    func unpairAll() async throws {
        _ = try await control("POST", "/unpair-all", body: [:])
    }

    private func control(_ method: String, _ path: String, body: [String: Any]? = nil) async throws -> Any {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(controlPort)\(path)")!)
        request.httpMethod = method
        if let body {
            request.httpBody = try JSONSerialization.data(withJSONObject: body)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let (data, _) = try await URLSession.shared.data(for: request)
        return try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
    }
}

/// The system's mDNS daemon: the peer's `_hap._tcp` record published through Avahi (`avahi-publish`), as an
/// accessory announces itself on the LAN; its host name resolves to 127.0.0.1, where the peer listens.
enum Avahi {
    /// True when `avahi-browse` can talk to a running avahi-daemon (`deploy/avahi.sh start`).
    static let available: Bool = {
        guard let probe = try? ProcessRunner(executable: "avahi-browse", arguments: ["--parsable", "--terminate", "_lbs-probe._tcp"],
                                             outputDirectory: NSTemporaryDirectory(), name: "avahi-probe-\(UInt32.random(in: 0...UInt32.max))") else { return false }
        let deadline = Date().addingTimeInterval(5)
        while probe.isRunning, Date() < deadline { usleep(20_000) }
        if probe.isRunning { probe.kill() }
        return probe.exitStatus == .exited(0)
    }()
    /// CI sets LBS_REQUIRE_AVAHI=1: the mDNS tests then run (and fail without Avahi) instead of being skipped.
    static let required = ProcessInfo.processInfo.environment["LBS_REQUIRE_AVAHI"] == "1"

    /// Publishes `peer` as `name` with the TXT record an unpaired accessory sends; stop the returned processes to withdraw it.
    static func publish(_ peer: HAPPeer, name: String, configNumber: Int = 2, statusFlags: Int = 1, directory: String) throws -> (host: String, processes: [ProcessRunner]) {
        let host = "lbs-peer-\(UInt32.random(in: 0...UInt32.max)).local"
        let address = try ProcessRunner(executable: "avahi-publish", arguments: ["-a", "-R", host, "127.0.0.1"], outputDirectory: directory, name: "avahi-a-\(host)")
        return (host, [address, try publishService(peer, name: name, host: host, configNumber: configNumber, statusFlags: statusFlags, directory: directory)])
    }

    /// The service record alone, on a host name `publish` announced (a new `c#` is a new record).
    static func publishService(_ peer: HAPPeer, name: String, host: String, configNumber: Int, statusFlags: Int = 1, directory: String) throws -> ProcessRunner {
        try ProcessRunner(
            executable: "avahi-publish",
            arguments: ["-s", "-H", host, name, "_hap._tcp", String(peer.port), "c#=\(configNumber)", "ff=0", "id=\(peer.accessoryID)", "md=Eve Energy",
                        "pv=1.1", "s#=1", "sf=\(statusFlags)", "ci=7"],
            outputDirectory: directory, name: "avahi-s-\(host)-\(configNumber)"
        )
    }
}

extension HAPController {
    /// aiohomekit with the venv of `LBS_HAP_PYTHON`.
    convenience init(logDirectory: String) throws {
        guard let python = HAPPeer.python else { throw TestSupportError("LBS_HAP_PYTHON is not set") }
        try self.init(python: python, logDirectory: logDirectory)
    }
}
