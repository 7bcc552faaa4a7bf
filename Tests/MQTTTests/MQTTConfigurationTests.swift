import MQTT
import Testing

@Suite("MQTT configuration and back-off")
struct MQTTConfigurationTests {
    @Test func parsesBrokerURLs() throws {
        #expect(try MQTTBrokerAddress.parse("mqtt://broker.local") == MQTTBrokerAddress(host: "broker.local", port: 1883, usesTLS: false))
        #expect(try MQTTBrokerAddress.parse("mqtts://broker.local") == MQTTBrokerAddress(host: "broker.local", port: 8883, usesTLS: true))
        #expect(try MQTTBrokerAddress.parse("MQTT://10.0.0.2:1884/") == MQTTBrokerAddress(host: "10.0.0.2", port: 1884, usesTLS: false))
        #expect(try MQTTBrokerAddress.parse("mqtts://[::1]:8884") == MQTTBrokerAddress(host: "::1", port: 8884, usesTLS: true))
        #expect(try MQTTBrokerAddress.parse("mqtts://[::1]:8884").description == "mqtts://[::1]:8884")
    }

    @Test(arguments: [
        "http://broker", "broker:1883", "mqtt://", "mqtt://:1883", "mqtt://host:0", "mqtt://host:65536",
        "mqtt://host:abc", "mqtt://host/path", "mqtt://[::1", "mqtt://bad host",
    ])
    func rejectsBadURLs(url: String) {
        let error = #expect(throws: MQTTError.self) { try MQTTBrokerAddress.parse(url) }
        #expect(error?.kind == .invalidURL)
        #expect(error?.message.isEmpty == false)
    }

    @Test func urlErrorsNeverEchoCredentials() {
        let error = #expect(throws: MQTTError.self) { try MQTTBrokerAddress.parse("mqtt://gateway:s3cr3t@broker") }
        #expect(error?.kind == .invalidURL)
        #expect(error?.description.contains("s3cr3t") == false)
    }

    @Test func configurationValidationAndRedaction() throws {
        var configuration = try MQTTConfiguration(url: "mqtt://127.0.0.1:1", clientID: "gw")
        configuration.username = "gateway"
        configuration.password = "s3cr3t"
        try configuration.validate()
        #expect(!configuration.description.contains("s3cr3t"))
        #expect(!String(reflecting: configuration).contains("s3cr3t"))
        var dumped = ""
        dump(configuration, to: &dumped)
        #expect(!dumped.contains("s3cr3t"))

        func rejects(_ change: (inout MQTTConfiguration) -> Void) {
            var bad = configuration
            change(&bad)
            let error = #expect(throws: MQTTError.self) { try MQTTClient(configuration: bad) }
            #expect(error?.kind == .invalidConfiguration)
        }
        rejects { $0.keepAlive = .seconds(2) }
        rejects { $0.clientID = "" }
        rejects { $0.username = nil }
        rejects { $0.tls = MQTTTLSOptions(caFile: "/ca.pem") }
        rejects { $0.maxInflight = 0 }
        rejects { $0.inboundBufferSize = 0 }
        rejects { $0.reconnect = MQTTReconnectPolicy(minDelay: .seconds(2), maxDelay: .seconds(1)) }
        rejects { $0.will = MQTTWill(topic: "gw/#", payload: "x") }
    }

    @Test func tlsOptionsNeedCertificateAndKeyTogether() throws {
        var configuration = try MQTTConfiguration(url: "mqtts://127.0.0.1", clientID: "gw")
        configuration.tls = MQTTTLSOptions(certificateFile: "/client.pem")
        let error = #expect(throws: MQTTError.self) { try configuration.validate() }
        #expect(error?.kind == .invalidConfiguration)
        configuration.tls = MQTTTLSOptions()
        // OS CA store: the client can be created without any file.
        _ = try MQTTClient(configuration: configuration)
    }

    @Test func backoffStaysInBoundsGrowsAndResets() {
        let policy = MQTTReconnectPolicy(minDelay: .milliseconds(250), maxDelay: .seconds(30))
        var backoff = ReconnectBackoff(policy: policy)
        var generator = SplitMix64(seed: 42)
        var delays: [Duration] = []
        for _ in 0..<40 { delays.append(backoff.nextDelay(using: &generator)) }
        #expect(delays.allSatisfy { $0 >= policy.minDelay && $0 <= policy.maxDelay })
        #expect(delays.max() ?? .zero > .seconds(5))
        #expect(Set(delays).count > 10)
        backoff.reset()
        #expect(backoff.nextDelay(using: &generator) <= .milliseconds(750))
    }
}

/// Deterministic generator so the back-off test is reproducible.
private struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
