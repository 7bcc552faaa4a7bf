#if canImport(Glibc)
import Glibc
#endif
import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayTesting
import Synchronization
import TestTraits
import Testing

/// systemd integration without systemd running: the real binary talks sd_notify to a datagram socket the test
/// binds (READY=1 after the broker is connected, WATCHDOG=1 from the core, STATUS=, STOPPING=1 on SIGTERM), and
/// the unit file passes `systemd-analyze verify` and has its exposure scored by `systemd-analyze security`.
@Suite(.integration, .serialized) struct SystemdTests {
    /// A bound AF_UNIX datagram socket that collects what arrives.
    final class NotifySocket: Sendable {
        let path: String
        private let descriptor: Int32
        final class Received: Sendable {
            let list = Mutex<[String]>([])
        }

        private let received = Received()
        private let reader: Task<Void, Never>

        init(path: String, abstract: Bool = false) throws {
            self.path = path
            let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
            guard fd >= 0 else { throw POSIXError(.EIO) }
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            var bytes = Array(path.utf8)
            if abstract { bytes[0] = 0 }
            withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
            let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (abstract ? 0 : 1))
            let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
            guard bound == 0 else { Glibc.close(fd); throw POSIXError(.EADDRINUSE) }
            var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            descriptor = fd
            let box = received
            reader = Task.detached { [fd] in
                var buffer = [UInt8](repeating: 0, count: 4096)
                while !Task.isCancelled {
                    let count = recv(fd, &buffer, buffer.count, 0)
                    if count > 0 { box.list.withLock { $0.append(String(decoding: buffer[0..<count], as: UTF8.self)) } }
                }
            }
        }

        var messages: [String] { received.list.withLock { $0 } }

        func close() {
            reader.cancel()
            Glibc.close(descriptor)
        }
    }

    @Test func theGatewayNotifiesReadyWatchdogStatusAndStopping() async throws {
        let binary = try #require(Binaries.gateway, "lbs-gateway is not built")
        let broker = try await MosquittoBroker.started()
        let directory = try TemporaryDirectory()
        let socket = try NotifySocket(path: directory.file("notify"))
        defer { socket.close() }
        let config = directory.file("config.yaml")
        try """
        mqtt: {url: \(broker.url), client_id: notify-\(UInt32.random(in: 0...UInt32.max))}
        http: {enabled: false}
        log_level: warning
        vendors: [{type: demo, id: demo, poll_interval: 3600}]
        """.write(toFile: config, atomically: true, encoding: .utf8)
        var environment = ProcessInfo.processInfo.environment
        environment["NOTIFY_SOCKET"] = socket.path
        environment["WATCHDOG_USEC"] = "400000"
        let process = try ProcessRunner(executable: binary, arguments: ["run", "--config", config], environment: environment,
                                        outputDirectory: directory.path, name: "notify")
        defer { process.kill() }
        try await waitUntil("READY=1", timeout: .seconds(15)) { socket.messages.contains { $0.contains("READY=1") } }
        let ready = try #require(socket.messages.first { $0.contains("READY=1") })
        #expect(ready.contains("STATUS=") && ready.contains("devices"), "\(ready)")
        // WATCHDOG_USEC 0.4 s: a ping every 0.2 s, with the status.
        try await waitUntil("watchdog pings", timeout: .seconds(5)) { socket.messages.filter { $0.contains("WATCHDOG=1") }.count >= 3 }
        #expect(socket.messages.first { $0.contains("WATCHDOG=1") }?.contains("vendor") == true)
        process.terminate()
        _ = await process.waitForExit(timeout: .seconds(10))
        #expect(socket.messages.contains { $0.contains("STOPPING=1") })
        await broker.stop()
    }

    @Test func anAbstractSocketAndNoSocketAtAll() async throws {
        let name = "@lbs-notify-test-\(UInt32.random(in: 0...UInt32.max))"
        let socket = try NotifySocket(path: name, abstract: true)
        defer { socket.close() }
        let notifier = SystemdNotifier(environment: ["NOTIFY_SOCKET": name, "WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"])
        #expect(notifier.isEnabled && notifier.watchdogInterval == nil, "WATCHDOG_PID names another process")
        #expect(notifier.notify(["STATUS=hello\nworld"]))
        try await waitUntil("the status", timeout: .seconds(15)) { !socket.messages.isEmpty }
        #expect(socket.messages == ["STATUS=hello world"], "a newline inside a line cannot start another")
        let outside = SystemdNotifier(environment: [:])
        #expect(!outside.isEnabled && !outside.notify(["READY=1"]))
        #expect(SystemdNotifier(environment: ["WATCHDOG_USEC": "30000000"]).watchdogInterval == .seconds(15))
    }

    static var analyze: String? {
        ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// The shipped unit, with its binary path pointed at the build (verify checks that ExecStart exists).
    static func unit(in directory: TemporaryDirectory) throws -> String {
        let binary = try #require(Binaries.gateway)
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("deploy/lbs-gateway.service").path
        let text = try String(contentsOfFile: source, encoding: .utf8).replacingOccurrences(of: "/usr/local/bin/lbs-gateway", with: binary)
        let path = directory.file("lbs-gateway.service")
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test(.enabled(if: analyze != nil, "systemd-analyze is not installed"))
    func theUnitVerifiesAndIsHardened() async throws {
        let analyze = try #require(Self.analyze)
        let directory = try TemporaryDirectory()
        let unit = try Self.unit(in: directory)
        let verify = try ProcessRunner(executable: analyze, arguments: ["verify", "--man=no", unit], outputDirectory: directory.path, name: "verify")
        let verified = await verify.waitForExit(timeout: .seconds(60))
        // Only the unit's own problems count; a container without systemd running may warn about the system's units.
        let complaints = (verify.standardError() + verify.standardOutput()).split(separator: "\n").filter { $0.contains("lbs-gateway.service") }
        #expect(verified == .exited(0) || complaints.isEmpty, "systemd-analyze verify: \(complaints)")
        #expect(complaints.isEmpty, "\(complaints)")
        let security = try ProcessRunner(executable: analyze, arguments: ["security", "--offline=yes", "--no-pager", unit],
                                         outputDirectory: directory.path, name: "security")
        _ = await security.waitForExit(timeout: .seconds(60))
        let report = security.standardOutput()
        // "→ Overall exposure level for lbs-gateway.service: 1.9 OK"
        let line = report.split(separator: "\n").first { $0.contains("Overall exposure level") }.map(String.init) ?? ""
        let score = line.split(separator: ":").last.flatMap { $0.split(separator: " ").first }.flatMap { Double($0) }
        #expect(score.map { $0 <= 2.5 } == true, "exposure: \(line)")
    }
}

/// `deploy/install.sh` and `deploy/uninstall.sh`, staged into a folder (`--root`): what lands where with which
/// mode, what an upgrade keeps, and that the cache survives an uninstall unless asked.
@Suite(.integration) struct InstallScriptTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    func run(_ script: String, _ arguments: [String], in directory: TemporaryDirectory, environment extra: [String: String] = [:]) async throws -> String {
        var environment = ProcessInfo.processInfo.environment
        environment.merge(extra) { $1 }
        let process = try ProcessRunner(executable: "/bin/bash", arguments: [Self.repository + "/deploy/" + script] + arguments,
                                        environment: environment, outputDirectory: directory.path, name: script + "-\(UInt32.random(in: 0...UInt32.max))")
        let status = await process.waitForExit(timeout: .seconds(60))
        #expect(status == .exited(0), "\(script): \(process.standardError())")
        return process.standardOutput()
    }

    static func mode(_ path: String) -> Int { ((try? FileManager.default.attributesOfItem(atPath: path)[.posixPermissions]) as? Int) ?? -1 }

    @Test func installKeepsConfigAndSecretsOnUpgradeAndUninstallKeepsTheCache() async throws {
        let binary = try #require(Binaries.gateway)
        let directory = try TemporaryDirectory()
        let root = directory.file("root")
        let environment = ["LBS_INSTALL_BINARY": binary, "LBS_MQTT_PASSWORD": "broker-secret-1"]
        _ = try await run("install.sh", ["--root", root, "--no-build"], in: directory, environment: environment)
        let installed = root + "/usr/local/bin/lbs-gateway", debug = root + "/usr/local/lib/debug/usr/local/bin/lbs-gateway.debug"
        #expect(FileManager.default.isExecutableFile(atPath: installed))
        #expect(FileManager.default.fileExists(atPath: root + "/etc/systemd/system/lbs-gateway.service"))
        #expect(try String(contentsOfFile: root + "/etc/lbs-gateway/mqtt-password", encoding: .utf8) == "broker-secret-1")
        // Root's only: the service reads the config and the password as credentials.
        #expect(Self.mode(root + "/etc/lbs-gateway/mqtt-password") == 0o600 && Self.mode(root + "/etc/lbs-gateway/config.yaml") == 0o600)
        // Stripped, the symbols beside it in the debug tree.
        #expect(Self.size(installed) < Self.size(binary) * 3 / 4 && Self.size(debug) > Self.size(binary) / 4, "\(Self.size(installed)) of \(Self.size(binary))")
        let dropIn = root + "/etc/systemd/system/lbs-gateway.service.d/credentials.conf"
        #expect(try !String(contentsOfFile: dropIn, encoding: .utf8).contains("LoadCredential="), "the example config names no file")
        // An upgrade keeps what the operator changed; a secret file the config now names becomes a credential bound
        // over its path (relative paths are the config folder's); a file that does not exist is left out, with a warning.
        try """
        mqtt: {url: mqtt://broker.lan:1883, ca_file: /etc/lbs-gateway/missing-ca.pem}
        http: {token_file: http-token}
        vendors: [{type: demo, id: demo}]
        """.write(toFile: root + "/etc/lbs-gateway/config.yaml", atomically: true, encoding: .utf8)
        try "token".write(toFile: root + "/etc/lbs-gateway/http-token", atomically: true, encoding: .utf8)
        try "cache".write(toFile: root + "/var/lib/lbs-gateway/gateway.sqlite", atomically: true, encoding: .utf8)
        let again = try await run("install.sh", ["--root", root, "--no-build"], in: directory, environment: ["LBS_INSTALL_BINARY": binary, "LBS_MQTT_PASSWORD": "other"])
        #expect(again.contains("kept the existing"))
        #expect(try String(contentsOfFile: root + "/etc/lbs-gateway/config.yaml", encoding: .utf8).contains("broker.lan"))
        #expect(try String(contentsOfFile: root + "/etc/lbs-gateway/mqtt-password", encoding: .utf8) == "broker-secret-1")
        let lines = try String(contentsOfFile: dropIn, encoding: .utf8).split(separator: "\n").filter { !$0.hasPrefix("#") }
        #expect(lines == [
            "[Service]",
            "LoadCredential=file_etc_lbs-gateway_http-token:/etc/lbs-gateway/http-token",
            "BindReadOnlyPaths=%d/file_etc_lbs-gateway_http-token:/etc/lbs-gateway/http-token",
        ], "\(lines)")

        _ = try await run("uninstall.sh", ["--root", root], in: directory)
        for gone in [installed, debug, dropIn, root + "/etc/systemd/system/lbs-gateway.service", root + "/etc/systemd/system/lbs-gateway.service.d",
                     root + "/usr/local/lib/debug"] {
            #expect(!FileManager.default.fileExists(atPath: gone), "\(gone)")
        }
        #expect(FileManager.default.fileExists(atPath: root + "/var/lib/lbs-gateway/gateway.sqlite"), "the cache is kept")
        #expect(FileManager.default.fileExists(atPath: root + "/etc/lbs-gateway/config.yaml"))
        _ = try await run("uninstall.sh", ["--root", root, "--purge-cache", "--purge-config"], in: directory)
        #expect(!FileManager.default.fileExists(atPath: root + "/var/lib/lbs-gateway") && !FileManager.default.fileExists(atPath: root + "/etc/lbs-gateway"))
    }

    /// A binary whose self-test fails (a build whose ICU data lacks time zones) is not installed.
    @Test func installRefusesABinaryThatFailsItsSelfTest() async throws {
        let directory = try TemporaryDirectory()
        let root = directory.file("root")
        let binary = directory.file("lbs-gateway")
        try """
        #!/bin/sh
        [ "$1" = self-test ] && { echo "FAIL time zone Europe/Berlin: got unknown"; exit 1; }
        exit 0
        """.write(toFile: binary, atomically: true, encoding: .utf8)
        _ = chmod(binary, 0o755)
        var environment = ProcessInfo.processInfo.environment
        environment["LBS_INSTALL_BINARY"] = binary
        let process = try ProcessRunner(executable: "/bin/bash", arguments: [Self.repository + "/deploy/install.sh", "--root", root, "--no-build"],
                                        environment: environment, outputDirectory: directory.path, name: "install-refused")
        #expect(await process.waitForExit(timeout: .seconds(60)) == .exited(1))
        #expect(process.standardError().contains("failed its self-test") && process.standardError().contains("Europe/Berlin"), "\(process.standardError())")
        #expect(!FileManager.default.fileExists(atPath: root + "/usr/local/bin/lbs-gateway"))
    }

    static func size(_ path: String) -> Int { ((try? FileManager.default.attributesOfItem(atPath: path)[.size]) as? Int) ?? -1 }

    /// What install.sh turns into credentials: every file the config names, valid config or not, existing or not,
    /// relative paths resolved against the config's folder, without the environment's overrides.
    @Test func configPathsListsEveryFileTheConfigNames() throws {
        let directory = try TemporaryDirectory()
        let config = directory.file("config.yaml")
        try """
        mqtt: {url: "mqtt://localhost:1884", password_file: mqtt-password, ca_file: /etc/ssl/broker-ca.pem, cert_file: c.pem, key_file: c.key}
        http: {username: admin, password_file: http-password}
        vendors:
          - {type: demo, id: demo}
          - {type: enphase, id: envoy, url: "https://envoy.local", token_file: /etc/lbs-gateway/envoy-token}
          - {type: sense, id: sense, email: a@example.com, password_file: sense-password, totp_file: sense-code}
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let references = try ConfigLoader.references(path: config).get()
        #expect(references.brokerURL == "mqtt://localhost:1884")
        #expect(references.files == [
            directory.file("mqtt-password"), "/etc/ssl/broker-ca.pem", directory.file("c.pem"), directory.file("c.key"),
            directory.file("http-password"), "/etc/lbs-gateway/envoy-token", directory.file("sense-password"), directory.file("sense-code"),
        ])
        #expect(throws: ConfigLoader.Failure.self) { try ConfigLoader.references(path: directory.file("absent.yaml")).get() }
    }
}
