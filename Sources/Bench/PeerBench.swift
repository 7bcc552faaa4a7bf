import Foundation
import GatewayModel
import GatewayTesting
import MQTT

/// `lbs-bench peer`: lbs-gateway side by side with a peer of the kind people run today (deploy/bench/peer-bridge.py:
/// paho-mqtt + requests, no durability). Each system gets its own broker and its own consciousness-sim process
/// (the backend fake, in a process of its own), the same light switched by `/set` → backend → state, and rounds
/// alternate the systems (their order rotating) so background load hits all alike. Absolute numbers are noisy
/// on a shared 2-core box; the ratios per round are the figures.
struct PeerSetupError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

enum PeerBench {
    enum System: String, CaseIterable {
        case peer
        case gatewayWithStorage = "gateway_with_storage"
        case gatewayWithoutStorage = "gateway_without_storage"
        /// Another build of the gateway (LBS_BENCH_BASELINE_GATEWAY, e.g. the previous release) in the same rounds,
        /// for before/after figures measured side by side.
        case baselineWithStorage = "baseline_with_storage"
        case baselineWithoutStorage = "baseline_without_storage"

        var storage: Bool { self == .gatewayWithStorage || self == .baselineWithStorage }

        var executable: String {
            switch self {
            case .baselineWithStorage, .baselineWithoutStorage: ProcessInfo.processInfo.environment["LBS_BENCH_BASELINE_GATEWAY"] ?? ""
            default: PeerBench.binary("lbs-gateway", variable: "LBS_BENCH_GATEWAY")
            }
        }

        /// The systems of a run: the baseline only when one is given.
        static var measured: [System] {
            ProcessInfo.processInfo.environment["LBS_BENCH_BASELINE_GATEWAY"] == nil
                ? [.peer, .gatewayWithStorage, .gatewayWithoutStorage] : allCases
        }
    }

    struct RoundResult {
        var p50: Double
        var p99: Double
        var max: Double
        /// VmRSS after the round trips and an idle settle.
        var rssKB: Int
    }

    static let device = "house_lights-kitchen"
    static let password = "bench-peer-password"

    static func binary(_ name: String, variable: String) -> String {
        ProcessInfo.processInfo.environment[variable]
            ?? URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(name).path
    }

    /// The peer's Python: LBS_BENCH_PEER_PYTHON, else the venv deploy/bench/peer-setup.sh makes (made now if missing).
    static func peerPython() throws -> String {
        if let python = ProcessInfo.processInfo.environment["LBS_BENCH_PEER_PYTHON"] { return python }
        let directory = try TemporaryDirectory(prefix: "lbs-bench-peer-setup")
        defer { directory.remove() }
        let setup = try ProcessRunner(executable: "/bin/sh", arguments: ["-c", "./deploy/bench/peer-setup.sh"], outputDirectory: directory.path, name: "setup")
        let deadline = ContinuousClock.now + .seconds(300)
        while setup.isRunning, ContinuousClock.now < deadline { usleep(100_000) }
        guard case .exited(0)? = setup.exitStatus else {
            throw PeerSetupError(message: "deploy/bench/peer-setup.sh failed (run lbs-bench from the repository root): \(setup.standardError())")
        }
        return setup.standardOutput().trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// One round of one system: its own broker and backend, `iterations` round trips after 20 warm-ups, then RSS.
    static func round(_ system: System, iterations: Int, python: String) async throws -> RoundResult {
        let directory = try TemporaryDirectory(prefix: "lbs-bench-peer")
        defer { directory.remove() }
        let broker = try await MosquittoBroker.started()
        try password.write(toFile: directory.file("password"), atomically: true, encoding: .utf8)
        let backend = try ProcessRunner(executable: binary("consciousness-sim", variable: "LBS_BENCH_CONSCIOUSNESS_SIM"),
                                        arguments: ["--port", "0", "--password-file", directory.file("password")],
                                        outputDirectory: directory.path, name: "backend")
        var backendURL = ""
        try await waitUntil("consciousness-sim listening", timeout: .seconds(10)) {
            let output = backend.standardOutput()
            guard let range = output.range(of: "listening on ") else { return false }
            backendURL = String(output[range.upperBound...].prefix { !$0.isWhitespace })
            return true
        }
        let base = "lbs"
        let process: ProcessRunner
        switch system {
        case .peer:
            let script = URL(fileURLWithPath: "deploy/bench/peer-bridge.py").path
            process = try ProcessRunner(executable: python, arguments: [
                script, "--broker-port", "\(broker.port)", "--base", base, "--backend", backendURL, "--password-file", directory.file("password"),
            ], outputDirectory: directory.path, name: "peer")
        case .gatewayWithStorage, .gatewayWithoutStorage, .baselineWithStorage, .baselineWithoutStorage:
            let config = directory.file("config.yaml")
            try """
            mqtt: {url: \(broker.url), client_id: bench-peer-gateway, base_topic: \(base)}
            log_level: error
            \(system.storage ? "storage: {path: \(directory.file("gateway.sqlite"))}" : "")
            vendors: [{type: consciousness, id: house, url: "\(backendURL)", username: admin, password_file: \(directory.file("password")), poll_interval: 3600}]
            """.write(toFile: config, atomically: true, encoding: .utf8)
            process = try ProcessRunner(executable: system.executable, arguments: ["run", "--config", config],
                                        outputDirectory: directory.path, name: "gateway")
        }

        var samples = try await StorageBench.switchRoundTrips(brokerURL: broker.url, clientID: "bench-peer-client",
                                                              stateTopic: "\(base)/device/\(device)", iterations: iterations)
        try await Task.sleep(for: .seconds(3))
        let status = (try? String(contentsOfFile: "/proc/\(process.pid)/status", encoding: .utf8)) ?? ""
        let rss = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
            .flatMap { Int($0.split(separator: " ").dropFirst().first { !$0.isEmpty } ?? "") } ?? -1
        _ = await process.stop()
        _ = await backend.stop()
        await broker.stop()
        samples.sort()
        return RoundResult(p50: GatewayBench.percentile(samples, 0.5), p99: GatewayBench.percentile(samples, 0.99), max: samples.last ?? .nan, rssKB: rss)
    }

    /// `rounds` rounds of every system, the order rotating each round; prints each round and the medians of the ratios.
    static func run(rounds: Int, iterations: Int) async throws {
        let python = try peerPython()
        var results: [System: [RoundResult]] = [:]
        let systems = System.measured
        for roundIndex in 0..<rounds {
            let order = (0..<systems.count).map { systems[($0 + roundIndex) % systems.count] }
            for system in order {
                let result = try await round(system, iterations: iterations, python: python)
                results[system, default: []].append(result)
                print(String(format: "round %d %@: p50 %.3f ms, p99 %.3f ms, max %.2f ms, rss %.1f MB",
                             roundIndex + 1, system.rawValue, result.p50, result.p99, result.max, Double(result.rssKB) / 1024))
            }
        }
        func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
        func ratios(_ system: System, _ value: (RoundResult) -> Double) -> [Double] {
            zip(results[system] ?? [], results[.peer] ?? []).map { value($0) / value($1) }
        }
        func describe(_ values: [Double]) -> String {
            String(format: "%.2f median", median(values)) + " (rounds: " + values.map { String(format: "%.2f", $0) }.joined(separator: ", ") + ")"
        }
        let peer = results[.peer] ?? []
        print(String(format: "peer_set_to_state: p50 %.3f ms, p99 %.3f ms (medians of %d rounds, %d round trips each); rss %.1f MB",
                     median(peer.map(\.p50)), median(peer.map(\.p99)), rounds, iterations, median(peer.map { Double($0.rssKB) / 1024 })))
        for system in systems where system != .peer {
            let own = results[system] ?? []
            print(String(format: "%@_set_to_state: p50 %.3f ms, p99 %.3f ms; rss %.1f MB", system.rawValue,
                         median(own.map(\.p50)), median(own.map(\.p99)), median(own.map { Double($0.rssKB) / 1024 })))
            print("\(system.rawValue)_p50_vs_peer: " + describe(ratios(system, \.p50)))
            print("\(system.rawValue)_p99_vs_peer: " + describe(ratios(system, \.p99)))
            print("\(system.rawValue)_rss_vs_peer: " + describe(ratios(system) { Double($0.rssKB) }))
        }
    }
}
