import Foundation
import Glibc
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayTesting
import Logging
import MQTT
import Resilience
import ServiceLifecycle
import TestTraits
import Testing
import GatewayModel

/// The start-up and stop paths a systemd unit depends on: an empty broker password file (what install.sh leaves
/// for a broker without logins) once made the gateway hang at start, print nothing, and ignore SIGTERM.
@Suite(.integration, .serialized, .timeLimit(.minutes(2))) struct StartAndStopTests {
    func config(_ directory: TemporaryDirectory, broker: MosquittoBroker, mqtt extra: String) throws -> String {
        let path = directory.file("config.yaml")
        try """
        mqtt:
          url: \(broker.url)
          client_id: start-\(UInt32.random(in: 0...UInt32.max))
          \(extra)
        http: {enabled: false}
        vendors: [{type: demo, id: demo}]
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test func anEmptyPasswordFileMeansNoPasswordAndSIGTERMStopsTheGateway() async throws {
        let binary = try #require(Binaries.gateway, "lbs-gateway is not built")
        let broker = try await MosquittoBroker.started()
        let directory = try TemporaryDirectory()
        #expect(FileManager.default.createFile(atPath: directory.file("mqtt-password"), contents: Data()))
        chmod(directory.file("mqtt-password"), 0o600)
        let path = try config(directory, broker: broker, mqtt: "password_file: mqtt-password")
        let watcher = try await TestMQTTClient.connect(to: broker.url)
        try await watcher.subscribe("lbs/bridge/state")
        let gateway = try ProcessRunner(executable: binary, arguments: ["run", "--config", path], outputDirectory: directory.path, name: "gateway")
        defer { gateway.kill() }
        try await watcher.waitForMessage(topic: "lbs/bridge/state", timeout: .seconds(15)) { $0.text.contains("online") }
        let stopping = ContinuousClock.now
        gateway.terminate()
        let status = await gateway.waitForExit(timeout: .seconds(10))
        #expect(status == .exited(0), "\(String(describing: status)): \(gateway.standardError().suffix(500))")
        #expect(ContinuousClock.now - stopping < .seconds(5))
        await watcher.shutdown()
    }

    @Test func aPasswordWithoutAUsernameIsAConfigErrorNotAHang() async throws {
        let binary = try #require(Binaries.gateway, "lbs-gateway is not built")
        let broker = try await MosquittoBroker.started()
        let directory = try TemporaryDirectory()
        try "secret".write(toFile: directory.file("mqtt-password"), atomically: true, encoding: .utf8)
        chmod(directory.file("mqtt-password"), 0o600)
        let path = try config(directory, broker: broker, mqtt: "password_file: mqtt-password")
        let check = try ProcessRunner(executable: binary, arguments: ["check-config", "--config", path], outputDirectory: directory.path, name: "check")
        #expect(await check.waitForExit(timeout: .seconds(10)) == .exited(1))
        #expect(check.standardOutput().contains("mqtt.username"), "\(check.standardOutput())")
        let run = try ProcessRunner(executable: binary, arguments: ["run", "--config", path], outputDirectory: directory.path, name: "run")
        defer { run.kill() }
        #expect(await run.waitForExit(timeout: .seconds(10)) == .exited(78))
        #expect(run.standardError().contains("mqtt.username"), "\(run.standardError())")
    }

    /// `run` with only `--config`/`-c`/`--config=` and `--log-level` is parsed without ArgumentParser (start-up
    /// time); every other form still goes through it, with its usage errors.
    @Test func runArgumentsParsedDirectlyOrByArgumentParserBehaveAlike() async throws {
        let binary = try #require(Binaries.gateway, "lbs-gateway is not built")
        let directory = try TemporaryDirectory()
        try "mqtt: {url: mqtt://127.0.0.1:1}\nvendors: [{type: nonsense, id: x}]\n".write(toFile: directory.file("bad.yaml"), atomically: true, encoding: .utf8)
        for (index, arguments) in [["run", "--config=\(directory.file("bad.yaml"))"], ["run", "-c", directory.file("bad.yaml"), "--log-level", "debug"],
                                   ["run", "--log-level=error", "--config", directory.file("bad.yaml")]].enumerated() {
            let run = try ProcessRunner(executable: binary, arguments: arguments, outputDirectory: directory.path, name: "plain\(index)")
            defer { run.kill() }
            #expect(await run.waitForExit(timeout: .seconds(10)) == .exited(78), "\(arguments)")
            #expect(run.standardError().contains("config error"), "\(arguments): \(run.standardError())")
        }
        // Not the plain form: ArgumentParser answers (usage error 64, help 0).
        let unknown = try ProcessRunner(executable: binary, arguments: ["run", "--bogus"], outputDirectory: directory.path, name: "unknown")
        #expect(await unknown.waitForExit(timeout: .seconds(10)) == .exited(64))
        let missing = try ProcessRunner(executable: binary, arguments: ["run", "--config"], outputDirectory: directory.path, name: "missing")
        #expect(await missing.waitForExit(timeout: .seconds(10)) == .exited(64))
        let help = try ProcessRunner(executable: binary, arguments: ["run", "--help"], outputDirectory: directory.path, name: "help")
        #expect(await help.waitForExit(timeout: .seconds(10)) == .exited(0))
        #expect(help.standardOutput().contains("--config"))
    }

    /// The vendors wait for the gateway service; when it fails before it is ready, the group's shutdown must
    /// end that wait (it once waited for ever, and the whole process with it).
    @Test func theVendorSupervisorDoesNotOutliveAGatewayThatNeverStarted() async throws {
        let runtime = GatewayService.SharedRuntime(inbox: EventInbox<VendorEvent>(capacity: 8, coalescing: .deviceStates), vendors: [])
        let supervisor = VendorSupervisor(runtime: runtime, logger: Logger(label: "test"))
        struct Failed: Error {}
        struct FailingService: Service {
            func run() async throws { throw Failed() }
        }
        let group = ServiceGroup(configuration: .init(services: [.init(service: FailingService()), .init(service: supervisor)], logger: Logger(label: "test")))
        let outcome = Task { try await group.run() }
        let ended = try await withThrowingTaskGroup(of: Bool.self) { tasks in
            tasks.addTask { _ = await outcome.result; return true }
            tasks.addTask { try await Task.sleep(for: .seconds(10)); return false }
            let first = try await tasks.next() ?? false
            tasks.cancelAll()
            return first
        }
        #expect(ended, "the service group never ended")
        #expect(!runtime.isReady)
    }

    @Test func aCancelledWaiterLeavesTheReadyGate() async {
        let gate = ReadyGate()
        let waiter = Task { await gate.wait() }
        waiter.cancel()
        await waiter.value
        #expect(!gate.isOpen)
        gate.open()
        await gate.wait()
    }
}
