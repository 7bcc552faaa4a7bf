#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import Logging
import Resilience

extension GatewayHub {
    /// Every inbound message ends in an action, or in a `command_failed` event (and an error response where
    /// the sender asked for one). The first extension that takes the message handles it. Nothing here throws or blocks.
    package func handle(_ message: InboundMessage) {
        counters.inboundMessages += 1
        if !pendingFences.isEmpty, pendingFences.remove(message.topic) != nil {
            fenceArrivals.signal()
            return
        }
        let route = topics.parse(message.topic)
        for item in extensions where item.receive(route, message) { return }
    }
}

extension GatewayHub {
    /// How long the SUBACK of a retained read-back is waited for, and how long after it the retained copies
    /// (sent by the broker right after the SUBACK, reaching extensions through the inbox) are waited for at most.
    package static let retainedReadTimeout = Duration.seconds(10)
    package static let retainedReadGrace = Duration.milliseconds(500)

    /// Publishes the (subscribed) fence and waits until it comes back, or until `retainedReadGrace` passed without
    /// any fence arriving. True when it came back.
    package func sendFence(_ fence: String) async -> Bool {
        pendingFences.insert(fence)
        transport.publish(fence, "", qos: 0, retain: false, correlationData: nil)
        // Each wake is a fence that arrived (this one, or another read-back's: then wait on) or the end of the grace.
        while pendingFences.contains(fence) {
            let seen = fenceArrivals.version
            await fenceArrivals.wait(after: seen, timeout: Self.retainedReadGrace, clock: clock)
            if fenceArrivals.version == seen || Task.isCancelled { break }
        }
        return pendingFences.remove(fence) == nil
    }

    /// Reads back what the broker retains on `topics` (an earlier run's messages): subscribes, waits for the SUBACK
    /// and then for the retained copies to arrive at `receive`, then unsubscribes. False when no SUBACK came (the
    /// connection went, or the broker is stuck): the caller tries again at the next connect.
    ///
    /// The end of the copies is marked by a fence: a topic of its own (`<base>/bridge/fence/<random>`, in the same
    /// SUBSCRIBE) that gets an empty QoS 0 message once the SUBACK is in. The broker queues a subscription's retained
    /// copies as it takes the SUBSCRIBE, and one connection delivers in order, so the fence comes back behind them.
    /// A broker or ACL that drops the fence costs the grace period, as before the fence.
    package func readRetained(_ topics: [String]) async -> Bool {
        let fence = self.topics.bridgeFence(UInt64.random(in: 0 ... .max))
        guard await transport.subscribeAndWait(topics + [fence], timeout: Self.retainedReadTimeout) else {
            logger.warning("no SUBACK within \(Self.retainedReadTimeout) for the retained read-back of \(topics.count == 1 ? topics[0] : "\(topics.count) topics"); tried again at the next connect")
            transport.unsubscribe([fence])
            return false
        }
        if !(await sendFence(fence)) { logger.debug("the fence of a retained read-back did not come back; waited \(Self.retainedReadGrace)") }
        transport.unsubscribe(topics + [fence])
        return true
    }
}
