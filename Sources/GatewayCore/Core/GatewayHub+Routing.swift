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
