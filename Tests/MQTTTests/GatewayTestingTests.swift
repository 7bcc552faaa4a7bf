import GatewayTesting
import MQTT
import TestTraits
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite("GatewayTesting helpers", .integration, .timeLimit(.minutes(1)))
struct GatewayTestingTests {
    @Test func processRunnerCapturesOutputEnvironmentAndExitCode() async throws {
        let directory = try TemporaryDirectory()
        let process = try ProcessRunner(
            executable: "sh", arguments: ["-c", "echo out; echo err >&2; echo \"$LBS_TEST_VALUE\"; pwd; exit 3"],
            environment: ["LBS_TEST_VALUE": "from-env", "PATH": "/usr/bin:/bin"],
            workingDirectory: directory.path, outputDirectory: directory.path)
        let status = await process.waitForExit(timeout: .seconds(10))
        #expect(status == .exited(3))
        let lines = process.standardOutput().split(separator: "\n")
        #expect(lines.first == "out")
        #expect(lines.contains("from-env"))
        #expect(lines.last.map { String($0).hasSuffix(directory.path.split(separator: "/").last.map(String.init) ?? "?") } == true)
        #expect(process.standardError() == "err\n")
    }

    @Test func processRunnerTerminatesAndKills() async throws {
        let directory = try TemporaryDirectory()
        let sleeper = try ProcessRunner(executable: "sleep", arguments: ["30"], outputDirectory: directory.path)
        #expect(await sleeper.waitForExit(timeout: .milliseconds(50)) == nil)
        #expect(sleeper.isRunning)
        #expect(await sleeper.stop() == .signaled(SIGTERM))

        let stubborn = try ProcessRunner(executable: "sh", arguments: ["-c", "trap '' TERM; echo trapped; while :; do sleep 0.05; done"],
                                         outputDirectory: directory.path, name: "stubborn")
        try await waitUntil("the shell's trap installed") { stubborn.standardOutput().contains("trapped") }
        #expect(await stubborn.stop(grace: .milliseconds(200)) == .signaled(SIGKILL))
        #expect(throws: ProcessRunnerError.self) {
            try ProcessRunner(executable: "/nonexistent/binary", outputDirectory: directory.path)
        }
    }

    @Test func sigkilledClientProcessMakesTheBrokerPublishItsWill() async throws {
        let broker = try await MosquittoBroker.started()
        let observer = try await TestMQTTClient.connect(to: broker.url)
        try await observer.subscribe("child/bridge/state")
        let directory = try TemporaryDirectory()
        let clientID = TestMQTTClient.uniqueClientID("child")
        let child = try ProcessRunner(
            executable: "mosquitto_sub",
            arguments: ["-h", "127.0.0.1", "-p", "\(broker.port)", "-i", clientID, "-V", "mqttv5", "-t", "child/cmd",
                        "--will-topic", "child/bridge/state", "--will-payload", "{\"state\":\"offline\"}",
                        "--will-qos", "1", "--will-retain"],
            outputDirectory: directory.path)
        try await waitUntil("child connected; broker log: \(broker.log())") { broker.log().contains(clientID) }

        child.kill()
        #expect(await child.waitForExit(timeout: .seconds(5)) == .signaled(SIGKILL))
        let will = try await observer.waitForMessage(topic: "child/bridge/state")
        #expect(will.payloadString == "{\"state\":\"offline\"}")
        let snapshot = try await TestMQTTClient.retainedSnapshot(url: broker.url, filter: "child/#")
        #expect(snapshot["child/bridge/state"]?.retain == true)
        await observer.shutdown()
    }

    @Test func brokerRestartKeepsPortAndStopEndsProcess() async throws {
        let broker = try await MosquittoBroker.started()
        let port = broker.port
        #expect(broker.url == "mqtt://127.0.0.1:\(port)")
        #expect(loopbackPortAcceptsConnections(port))
        try await broker.restart()
        #expect(broker.port == port)
        #expect(loopbackPortAcceptsConnections(port))
        await broker.stop()
        #expect(!broker.isRunning)
        #expect(!loopbackPortAcceptsConnections(port))
    }

    @Test func temporaryDirectoryAndFixtures() throws {
        let path: String
        do {
            let directory = try TemporaryDirectory(prefix: "lbs-helper")
            path = directory.path
            #expect(access(path, F_OK) == 0)
        }
        #expect(access(path, F_OK) != 0)
        #expect(try freeLoopbackPort() > 0)
        #expect(Fixtures.packageRoot().map { access("\($0)/Package.swift", F_OK) == 0 } == true)
        #expect(Fixtures.path("awair", "devices.yaml").hasSuffix("Tests/Fixtures/awair/devices.yaml"))
        #expect(try Fixtures.data("awair", "devices.yaml").isEmpty == false)
        #expect(throws: TestSupportError.self) { try Fixtures.data("awair", "missing.yaml") }
    }
}
