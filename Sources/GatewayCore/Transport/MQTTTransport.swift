#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import MQTT
import VendorKit

/// `MessageTransport` over our libmosquitto client.
public struct MQTTTransport: MessageTransport {
    package let client: MQTTClient

    public init(client: MQTTClient) {
        self.client = client
    }

    public func publish(_ topic: String, _ payload: String, qos: Int, retain: Bool, correlationData: [UInt8]?) {
        client.publish(topic, payload, qos: qos == 0 ? .atMostOnce : .atLeastOnce, retain: retain,
                       properties: MQTTPublishProperties(correlationData: correlationData))
    }

    public func publish(_ topic: String, utf8 payload: [UInt8], qos: Int, retain: Bool) {
        client.publish(topic, payload, qos: qos == 0 ? .atMostOnce : .atLeastOnce, retain: retain)
    }

    public func publishAndWait(_ topic: String, _ payload: String, retain: Bool, timeout: Duration) async -> Bool {
        do {
            try await client.publishAndWait(topic, Array(payload.utf8), qos: .atLeastOnce, retain: retain, timeout: timeout)
            return true
        } catch {
            return false
        }
    }

    /// What people send the gateway (`Topics.priorityFilters`) is subscribed at QoS 1; what the gateway reads back
    /// of its own topics (the retained sweep) at QoS 0. mosquitto queues at most `max_queued_messages` (1,000) QoS 1
    /// messages per client: the echo of a thousand devices' discovery and availability filled that queue, and the
    /// broker then dropped the commands that came next. QoS 0 is not queued that way.
    public func subscribe(_ filters: [String]) {
        let priority = Set(client.configuration.priorityFilters)
        let commands = filters.filter { priority.contains($0) }
        let echoes = filters.filter { !priority.contains($0) }
        if !commands.isEmpty { try? client.subscribe(commands, qos: .atLeastOnce) }
        if !echoes.isEmpty { try? client.subscribe(echoes, qos: .atMostOnce) }
    }

    /// Only the retained read-backs wait for a SUBACK: at QoS 0, for the same reason as the sweep.
    public func subscribeAndWait(_ filters: [String], timeout: Duration) async -> Bool {
        do {
            _ = try await client.subscribeAndWait(filters, qos: .atMostOnce, timeout: timeout)
            return true
        } catch {
            return false
        }
    }

    public func unsubscribe(_ filters: [String]) {
        try? client.unsubscribe(filters)
    }

    public var outgoingBacklog: Int { client.outgoingBacklog }

    public var acknowledgementMarks: (handedOver: UInt64, acknowledged: UInt64) { client.acknowledgementMarks }

    public var isConnected: Bool { client.isConnected }

    public var loopsBack: Bool { true }

    public func coalescingWrites(_ body: () -> Void) { client.coalescingWrites(body) }

    public var stats: TransportStats {
        TransportStats(droppedInbound: client.droppedInboundMessages, droppedOffline: client.droppedOfflineMessages)
    }

    /// Maps the gateway's settings to the client's, including the Last Will on `<base>/bridge/state`.
    public static func configuration(for config: GatewayConfig) throws -> MQTTConfiguration {
        var mqtt = try MQTTConfiguration(url: config.mqtt.url, clientID: config.mqtt.clientID)
        mqtt.protocolVersion = config.mqtt.version == .v5 ? .v5 : .v311
        mqtt.keepAlive = .seconds(config.mqtt.keepAlive)
        mqtt.username = config.mqtt.username
        mqtt.password = config.mqtt.password?.reveal()
        if config.mqtt.caFile != nil || config.mqtt.caPath != nil || config.mqtt.certFile != nil || mqtt.broker.usesTLS {
            mqtt.tls = MQTTTLSOptions(caFile: config.mqtt.caFile, caPath: config.mqtt.caPath,
                                      certificateFile: config.mqtt.certFile, keyFile: config.mqtt.keyFile)
        }
        mqtt.will = MQTTWill(topic: Topics(base: config.mqtt.baseTopic).bridgeState, payload: #"{"state":"offline"}"#, qos: .atLeastOnce, retain: true)
        if config.mqtt.sessionExpiry > 0 {
            mqtt.cleanStart = false
            mqtt.sessionExpiry = .seconds(config.mqtt.sessionExpiry)
        }
        if let pair = config.highAvailability {
            // The standby takes over this very session when the active dies: the commands queued for it meanwhile
            // are delivered, and the delayed will is dropped, so Home Assistant never sees the pair offline.
            mqtt.cleanStart = false
            mqtt.sessionExpiry = .seconds(max(pair.sessionExpiry, config.mqtt.sessionExpiry))
            mqtt.will?.delay = .seconds(pair.willDelay)
        }
        mqtt.reconnect = MQTTReconnectPolicy(
            minDelay: .milliseconds(Int64(config.mqtt.reconnectMinDelay * 1000)),
            maxDelay: .milliseconds(Int64(config.mqtt.reconnectMaxDelay * 1000)))
        mqtt.inboundBufferSize = 4096
        let topics = Topics(base: config.mqtt.baseTopic, haStatus: config.homeAssistant.statusTopic)
        mqtt.priorityFilters = topics.priorityFilters
        mqtt.offlineQueueLimit = config.mqtt.offlineQueueSize
        return mqtt
    }
}
