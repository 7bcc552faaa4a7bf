import Crypto
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif
import HAP
import Logging
import Synchronization
import VendorKit

/// Announces the bridge as `_hap._tcp` through the system's Avahi daemon (`avahi-publish`), so the Home app finds
/// it; the record is published again whenever `c#` or the paired flag changes. Without Avahi the bridge still
/// works for controllers given its address, and the log says so once.
///
/// The publisher is a child process that must not outlive the gateway (a stale record would make the next start's
/// record "LBS Gateway #2"): it runs under `setpriv --pdeathsig KILL`, is stopped with SIGKILL (at once, with
/// nothing to clean up), and `keepAlive` starts it again if it ended.
final class BridgeAdvertiser: Sendable {
    let name: String
    let port: Int
    let deviceID: String
    let setupID: String
    let logger: Logger
    private let state = Mutex(State())

    private struct State {
        var process: ChildProcess?
        var record: [String]?
        var warned = false
        var stopped = false
    }

    init(name: String, port: Int, deviceID: String, setupID: String, logger: Logger) {
        self.name = name
        self.port = port
        self.deviceID = deviceID
        self.setupID = setupID
        self.logger = logger
    }

    /// The TXT record: config number, no MFi (`ff`), id, model, protocol version, state number, status flags (1 while
    /// unpaired), category 2 (bridge), and the setup hash that ties the record to the setup code's QR payload.
    static func record(configNumber: Int, paired: Bool, deviceID: String, setupID: String, model: String) -> [String] {
        let hash = Array(SHA512.hash(data: Array((setupID + deviceID.uppercased()).utf8))).prefix(4)
        return ["c#=\(configNumber)", "ff=0", "id=\(deviceID)", "md=\(model)", "pv=1.1", "s#=1", "sf=\(paired ? 0 : 1)", "ci=2",
                "sh=\(Data(hash).base64EncodedString())"]
    }

    func update(configNumber: Int, paired: Bool) async {
        let record = Self.record(configNumber: configNumber, paired: paired, deviceID: deviceID, setupID: setupID, model: "LBS Gateway")
        let old = state.withLock { state -> ChildProcess? in
            guard !state.stopped, state.record != record else { return nil }
            state.record = record
            defer { state.process = nil }
            return state.process
        }
        if let old {
            // The old record must be withdrawn before the new one takes the name, or Avahi renames it ("… #2").
            await Self.kill(old)
        }
        start(record: record, configNumber: configNumber, paired: paired)
    }

    /// Starts the publisher again if it ended (Avahi restarted, or it was killed); called every few seconds.
    func keepAlive() {
        let record = state.withLock { state -> [String]? in
            guard !state.stopped, let record = state.record, state.process?.isRunning != true else { return nil }
            state.process = nil
            return record
        }
        guard let record else { return }
        let paired = record.contains("sf=0")
        let configNumber = record.first { $0.hasPrefix("c#=") }.flatMap { Int($0.dropFirst(3)) } ?? 1
        start(record: record, configNumber: configNumber, paired: paired)
    }

    static func kill(_ process: ChildProcess) async {
        guard process.isRunning else { return }
        process.kill(SIGKILL)
        for _ in 0..<100 where process.isRunning { try? await Task.sleep(for: .milliseconds(20)) }
    }

    private func start(record: [String], configNumber: Int, paired: Bool) {
        guard state.withLock({ $0.record == record && $0.process == nil && !$0.stopped }) else { return }
        let publish = ["avahi-publish", "-s", name, "_hap._tcp", String(port)] + record
        let arguments = FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") ? ["setpriv", "--pdeathsig", "KILL", "--"] + publish : publish
        do {
            let process = try ChildProcess.spawn(arguments, captureOutput: false)
            state.withLock { $0.process = process }
            logger.info("homekit bridge: announced as '\(name)' on port \(port) (c# \(configNumber), \(paired ? "paired" : "not paired"))")
        } catch {
            let warn = state.withLock { state -> Bool in
                defer { state.warned = true }
                return !state.warned
            }
            if warn {
                logger.warning("homekit bridge: cannot announce itself over mDNS (\(error)); the Home app will not find it. Install and start Avahi: apt-get install avahi-daemon avahi-utils")
            }
        }
    }

    func stop() {
        let process = state.withLock { state -> ChildProcess? in
            state.stopped = true
            defer { state.process = nil }
            return state.process
        }
        if let process, process.isRunning { process.kill(SIGKILL) }
    }
}
