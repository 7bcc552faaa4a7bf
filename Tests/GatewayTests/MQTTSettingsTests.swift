import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import MQTT
import Testing
import VendorKit

/// `mqtt.ca_path` and `mqtt.offline_queue_size` reach the MQTT client.
@Suite struct MQTTSettingsTests {
    @Test func caPathAndOfflineQueueSizeAreReadAndPassedToTheClient() throws {
        let yaml = "mqtt: {url: mqtts://broker:8883, ca_path: /etc/ssl/certs, offline_queue_size: 250}\nvendors: [{type: demo, id: demo}]\n"
        let config = try ConfigLoader.parse(yaml: yaml).get()
        #expect(config.mqtt.caPath == "/etc/ssl/certs")
        #expect(config.mqtt.offlineQueueSize == 250)
        let client = try MQTTTransport.configuration(for: config)
        #expect(client.tls?.caPath == "/etc/ssl/certs")
        #expect(client.tls?.caFile == nil)
        #expect(client.offlineQueueLimit == 250)
    }

    @Test func defaultsAndProblems() throws {
        let plain = try ConfigLoader.parse(yaml: "mqtt: {url: mqtts://broker}\nvendors: [{type: demo, id: demo}]\n").get()
        #expect(plain.mqtt.caPath == nil)
        #expect(try MQTTTransport.configuration(for: plain).offlineQueueLimit == 10_000)

        let yaml = "mqtt: {url: mqtts://broker, ca_path: /nonexistent/lbs-ca-dir, offline_queue_size: -1}\nvendors: [{type: demo, id: demo}]\n"
        guard case .failure(let failure) = ConfigLoader.parse(yaml: yaml) else {
            Issue.record("a missing CA directory and a negative queue size were accepted")
            return
        }
        let paths = Set(failure.problems.map(\.path))
        #expect(paths.isSuperset(of: ["mqtt.ca_path", "mqtt.offline_queue_size"]))
    }
}
