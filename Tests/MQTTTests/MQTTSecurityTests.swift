import GatewayTesting
import MQTT
import Testing

@Suite("MQTT over TLS", .timeLimit(.minutes(1)))
struct MQTTTLSTests {
    /// Runs openssl and fails with its stderr if it does not exit 0.
    private func openssl(_ arguments: [String], in directory: TemporaryDirectory) async throws {
        let process = try ProcessRunner(executable: "openssl", arguments: arguments, workingDirectory: directory.path,
                                        outputDirectory: directory.path, name: "openssl")
        let status = await process.waitForExit(timeout: .seconds(30))
        guard status == .exited(0) else {
            throw TestSupportError("openssl \(arguments.first ?? "") failed: \(process.standardError())")
        }
    }

    /// A throw-away CA and a server certificate for 127.0.0.1.
    private func makeCertificates(in directory: TemporaryDirectory) async throws {
        try await openssl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=lbs-test-ca",
                           "-keyout", "ca.key", "-out", "ca.pem"], in: directory)
        try await openssl(["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
                           "-keyout", "server.key", "-out", "server.csr"], in: directory)
        try await openssl(["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                           "-days", "2", "-extfile", "san.cnf", "-out", "server.pem"], in: directory)
    }

    @Test func connectsWithCAFileAndRejectsUnknownCA() async throws {
        let certificates = try TemporaryDirectory(prefix: "lbs-tls")
        try await ProcessRunner(executable: "sh", arguments: ["-c", "echo 'subjectAltName=IP:127.0.0.1' > san.cnf"],
                                workingDirectory: certificates.path, outputDirectory: certificates.path, name: "san")
            .waitForExit(timeout: .seconds(5))
        try await makeCertificates(in: certificates)
        let broker = try await MosquittoBroker.started(extraConfiguration: """
            certfile \(certificates.file("server.pem"))
            keyfile \(certificates.file("server.key"))
            """)
        let url = "mqtts://127.0.0.1:\(broker.port)"

        let client = try await TestMQTTClient.connect(to: url) { configuration in
            configuration.tls = MQTTTLSOptions(caFile: certificates.file("ca.pem"))
        }
        try await client.subscribe("tls/echo")
        try await client.publish("tls/echo", "over tls")
        #expect(try await client.waitForMessage(topic: "tls/echo").payloadString == "over tls")
        await client.shutdown()

        // The OS trust store does not know our CA: every attempt fails and is reported.
        let untrusted = try MQTTClient(configuration: MQTTConfiguration(url: url, clientID: TestMQTTClient.uniqueClientID()))
        untrusted.start()
        var events = untrusted.connectionEvents.makeAsyncIterator()
        let first = await events.next()
        guard case .connectFailed = first else {
            Issue.record("expected connectFailed, got \(String(describing: first))")
            return
        }
        #expect(!untrusted.isConnected)
        await untrusted.shutdown()
    }
}

@Suite("MQTT authentication", .timeLimit(.minutes(1)))
struct MQTTAuthenticationTests {
    @Test func passwordLoginWorksAndRefusalIsReportedWithoutThePassword() async throws {
        let files = try TemporaryDirectory(prefix: "lbs-auth")
        let passwd = try ProcessRunner(executable: "mosquitto_passwd",
                                       arguments: ["-c", "-b", files.file("passwd"), "gateway", "c0rrect-h0rse"],
                                       outputDirectory: files.path)
        #expect(await passwd.waitForExit(timeout: .seconds(10)) == .exited(0))
        let broker = try await MosquittoBroker.started(extraConfiguration: """
            allow_anonymous false
            password_file \(files.file("passwd"))
            """)

        let good = try await TestMQTTClient.connect(to: broker.url) { configuration in
            configuration.username = "gateway"
            configuration.password = "c0rrect-h0rse"
        }
        #expect(good.client.isConnected)
        #expect(!String(describing: good.client.configuration).contains("c0rrect-h0rse"))
        await good.shutdown()

        var configuration = try MQTTConfiguration(url: broker.url, clientID: TestMQTTClient.uniqueClientID())
        configuration.username = "gateway"
        configuration.password = "wr0ng-pa55word"
        let refused = try MQTTClient(configuration: configuration)
        refused.start()
        var events = refused.connectionEvents.makeAsyncIterator()
        let first = await events.next()
        guard case .connectFailed(let error, _) = first else {
            Issue.record("expected connectFailed, got \(String(describing: first))")
            return
        }
        #expect(error.kind == .rejected)
        #expect(error.code == 0x86 || error.code == 0x87)  // bad user name or password / not authorized
        #expect(!error.description.contains("wr0ng-pa55word"))
        await refused.shutdown()
    }
}
