import Foundation
import GatewayModel
import Logging

extension GatewayHub {
    /// Every inbound message ends in an action, or in a `command_failed` event (and an error response where
    /// the sender asked for one). The first extension that takes the message handles it. Nothing here throws or blocks.
    package func handle(_ message: InboundMessage) {
        counters.inboundMessages += 1
        let route = topics.parse(message.topic)
        for item in extensions where item.receive(route, message) { return }
    }
}

extension GatewayHub {
    /// How long the SUBACK of a retained read-back is waited for, and how long after it the retained copies
    /// (sent by the broker right after the SUBACK, reaching extensions through the inbox) are collected.
    package static let retainedReadTimeout = Duration.seconds(10)
    package static let retainedReadGrace = Duration.milliseconds(500)

    /// Reads back what the broker retains on `topics` (an earlier run's messages): subscribes, waits for the SUBACK
    /// and a grace period while the copies arrive at `receive`, then unsubscribes. False when no SUBACK came (the
    /// connection went, or the broker is stuck): the caller tries again at the next connect.
    package func readRetained(_ topics: [String]) async -> Bool {
        guard await transport.subscribeAndWait(topics, timeout: Self.retainedReadTimeout) else {
            logger.warning("no SUBACK within \(Self.retainedReadTimeout) for the retained read-back of \(topics.count == 1 ? topics[0] : "\(topics.count) topics"); tried again at the next connect")
            return false
        }
        try? await clock.sleep(for: Self.retainedReadGrace)
        transport.unsubscribe(topics)
        return true
    }
}

