import GatewayTesting
import MQTT
import TestTraits
import Testing
import CMosquitto

@Suite("MQTT over TLS", .integration, .timeLimit(.minutes(1)))
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

@Suite("MQTT authentication", .integration, .timeLimit(.minutes(1)))
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

/// A throw-away CA and server certificates signed by it, made with `openssl`.
private struct TestCA {
    let directory: TemporaryDirectory

    private static func shell(_ script: String, in directory: TemporaryDirectory) async throws {
        let process = try ProcessRunner(executable: "/bin/sh", arguments: ["-c", script], workingDirectory: directory.path,
                                        outputDirectory: directory.path, name: "openssl-\(UInt32.random(in: 0 ... .max))")
        let status = await process.waitForExit(timeout: .seconds(60))
        guard status == .exited(0) else {
            throw TestSupportError("'\(script)' failed: \(process.standardError().suffix(500))")
        }
    }

    static func make() async throws -> TestCA {
        let directory = try TemporaryDirectory(prefix: "lbs-ca")
        try await shell("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=lbs-test-ca -keyout ca.key -out ca.pem",
                        in: directory)
        return TestCA(directory: directory)
    }

    var caFile: String { directory.file("ca.pem") }

    /// Issues `<name>.pem`/`<name>.key` for `subjectAltName=<san>`, valid for `days` (negative: already expired).
    func issue(_ name: String, commonName: String, san: String, days: Int) async throws -> (certificate: String, key: String) {
        try await Self.shell("""
            echo 'subjectAltName=\(san)' > \(name).cnf && \
            openssl req -newkey rsa:2048 -nodes -subj /CN=\(commonName) -keyout \(name).key -out \(name).csr && \
            openssl x509 -req -in \(name).csr -CA ca.pem -CAkey ca.key -CAcreateserial -days \(days) \
              -extfile \(name).cnf -out \(name).pem
            """, in: directory)
        return (directory.file("\(name).pem"), directory.file("\(name).key"))
    }

    /// A directory laid out like the OS store (`/etc/ssl/certs`): the CA under its `openssl rehash` name.
    func hashedDirectory() async throws -> String {
        try await Self.shell("mkdir -p store && cp ca.pem store/lbs-test-ca.pem && openssl rehash store", in: directory)
        return directory.file("store")
    }
}

@Suite("MQTT TLS trust store and failure reasons", .integration, .timeLimit(.minutes(2)))
struct MQTTTLSTrustTests {
    /// The first connect attempt's failure (the client keeps retrying; it is shut down here).
    private func firstFailure(url: String, configure: (inout MQTTConfiguration) -> Void) async throws -> MQTTError? {
        var configuration = try MQTTConfiguration(url: url, clientID: TestMQTTClient.uniqueClientID("tls"))
        configure(&configuration)
        let client = try MQTTClient(configuration: configuration)
        client.start()
        defer { Task { await client.shutdown() } }
        for await event in client.connectionEvents {
            switch event {
            case .connectFailed(let error, _): return error
            case .connected:
                Issue.record("connected although the certificate must be refused")
                return nil
            case .disconnected: continue
            }
        }
        return nil
    }

    /// Without `ca_file` the OS CA directory is used, and reconnects work too
    /// (MOSQ_OPT_TLS_USE_OS_CERTS alone connected once, then every reconnect failed with MOSQ_ERR_INVAL).
    @Test func anOSStyleHashedCADirectoryConnectsAndReconnects() async throws {
        let ca = try await TestCA.make()
        let server = try await ca.issue("server", commonName: "127.0.0.1", san: "IP:127.0.0.1", days: 2)
        let store = try await ca.hashedDirectory()
        let broker = try await MosquittoBroker.started(extraConfiguration: """
            certfile \(server.certificate)
            keyfile \(server.key)
            """)
        let client = try await TestMQTTClient.connect(to: "mqtts://127.0.0.1:\(broker.port)") { configuration in
            configuration.tls = MQTTTLSOptions(caPath: store)
            configuration.reconnect = MQTTReconnectPolicy(minDelay: .milliseconds(50), maxDelay: .milliseconds(200))
        }
        try await broker.restart()
        try await client.waitForConnects(2, timeout: .seconds(20))
        let failures = client.connectionEvents.compactMap { event -> MQTTError? in
            if case .connectFailed(let error, _) = event { error } else { nil }
        }
        #expect(!failures.contains { $0.code == Int32(MOSQ_ERR_INVAL.rawValue) }, "\(failures)")
        try await client.subscribe("tls/again")
        try await client.publish("tls/again", "reconnected over tls")
        #expect(try await client.waitForMessage(topic: "tls/again").payloadString == "reconnected over tls")
        await client.shutdown()
    }

    @Test func unknownCAHostnameMismatchAndExpiryEachGiveTheirOwnReason() async throws {
        let ca = try await TestCA.make()
        let good = try await ca.issue("good", commonName: "127.0.0.1", san: "IP:127.0.0.1", days: 2)
        let wrongHost = try await ca.issue("wrong", commonName: "broker.example", san: "DNS:broker.example", days: 2)
        let expired = try await ca.issue("expired", commonName: "127.0.0.1", san: "IP:127.0.0.1", days: -1)
        let wrongHostPort = try freeLoopbackPort()
        var expiredPort = try freeLoopbackPort()
        while expiredPort == wrongHostPort { expiredPort = try freeLoopbackPort() }
        let broker = try await MosquittoBroker.started(extraConfiguration: """
            certfile \(good.certificate)
            keyfile \(good.key)
            listener \(wrongHostPort) 127.0.0.1
            certfile \(wrongHost.certificate)
            keyfile \(wrongHost.key)
            listener \(expiredPort) 127.0.0.1
            certfile \(expired.certificate)
            keyfile \(expired.key)
            """)
        try await waitUntil("all listeners up") {
            loopbackPortAcceptsConnections(wrongHostPort) && loopbackPortAcceptsConnections(expiredPort)
        }

        // Our CA is not in the OS store.
        let unknown = try await firstFailure(url: "mqtts://127.0.0.1:\(broker.port)") { _ in }
        #expect(unknown?.kind == .tls)
        #expect(unknown?.tlsFailure == .unknownCA, "\(String(describing: unknown))")
        #expect(unknown?.message.contains("unknown CA") == true)

        let mismatch = try await firstFailure(url: "mqtts://127.0.0.1:\(wrongHostPort)") {
            $0.tls = MQTTTLSOptions(caFile: ca.caFile)
        }
        #expect(mismatch?.tlsFailure == .hostnameMismatch, "\(String(describing: mismatch))")
        #expect(mismatch?.message.contains("host name mismatch") == true)

        let stale = try await firstFailure(url: "mqtts://127.0.0.1:\(expiredPort)") {
            $0.tls = MQTTTLSOptions(caFile: ca.caFile)
        }
        #expect(stale?.tlsFailure == .expiredCertificate, "\(String(describing: stale))")
        #expect(stale?.message.contains("expired") == true)

        // A plain MQTT port: not a certificate problem, OpenSSL's reason is passed on.
        let plain = try await MosquittoBroker.started()
        let noTLS = try await firstFailure(url: "mqtts://127.0.0.1:\(plain.port)") {
            $0.tls = MQTTTLSOptions(caFile: ca.caFile)
        }
        #expect(noTLS?.kind == .tls, "\(String(describing: noTLS))")
        if case .handshakeFailed(let text)? = noTLS?.tlsFailure {
            #expect(!text.isEmpty)
        } else {
            Issue.record("expected handshakeFailed, got \(String(describing: noTLS))")
        }
    }
}
