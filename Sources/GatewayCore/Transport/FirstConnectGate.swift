import Synchronization

/// Until the first connect's announcements, retained messages with a payload are not handed to the connection:
/// those announcements publish every retained topic anew (discovery, availability, states, bridge topics,
/// alerts) once the retained sweep has read what an earlier run left (`RetainedSweep.holdConnect`). Queued or
/// sent during the sweep, they only went out twice, and the broker sent them back to the sweep (5,000 devices'
/// worth overran mosquitto's queue for the gateway and stalled the connection). What passes: empty retained
/// messages (clearing a topic), non-retained ones (events, replies, the sweep's fence), `bridge/state`
/// (`publishAlways`), and device states, which the state publisher sends before the announcements only for a
/// command (its confirmed state goes out before its reply). Only over a broker (`loopsBack`).
package final class FirstConnectGate: MessageTransport {
    private let inner: any MessageTransport
    private let deviceStatePrefix: String
    private let closed = Atomic<Bool>(true)

    package init(_ inner: any MessageTransport, topics: Topics) {
        self.inner = inner
        deviceStatePrefix = topics.base + "/device/"
    }

    /// Called when the first connect's announcements start; from then on every message passes.
    package func open() {
        closed.store(false, ordering: .relaxed)
    }

    package func publish(_ topic: String, _ payload: String, qos: Int, retain: Bool, correlationData: [UInt8]?) {
        if retain, !payload.isEmpty, closed.load(ordering: .relaxed), !isDeviceState(topic) { return }
        inner.publish(topic, payload, qos: qos, retain: retain, correlationData: correlationData)
    }

    package func publish(_ topic: String, utf8 payload: [UInt8], qos: Int, retain: Bool) {
        if retain, !payload.isEmpty, closed.load(ordering: .relaxed), !isDeviceState(topic) { return }
        inner.publish(topic, utf8: payload, qos: qos, retain: retain)
    }

    /// What goes out whether or not the gate is open (`bridge/state`).
    package func publishAlways(_ topic: String, _ payload: String, qos: Int, retain: Bool) {
        inner.publish(topic, payload, qos: qos, retain: retain, correlationData: nil)
    }

    private func isDeviceState(_ topic: String) -> Bool {
        topic.hasPrefix(deviceStatePrefix) && !topic.utf8.dropFirst(deviceStatePrefix.utf8.count).contains(UInt8(ascii: "/"))
    }

    package func publishAndWait(_ topic: String, _ payload: String, retain: Bool, timeout: Duration) async -> Bool {
        await inner.publishAndWait(topic, payload, retain: retain, timeout: timeout)
    }

    package func subscribe(_ filters: [String]) { inner.subscribe(filters) }
    package func subscribeAndWait(_ filters: [String], timeout: Duration) async -> Bool { await inner.subscribeAndWait(filters, timeout: timeout) }
    package func unsubscribe(_ filters: [String]) { inner.unsubscribe(filters) }
    package var stats: TransportStats { inner.stats }
    package var outgoingBacklog: Int { inner.outgoingBacklog }
    package var acknowledgementMarks: (handedOver: UInt64, acknowledged: UInt64) { inner.acknowledgementMarks }
    package var isConnected: Bool { inner.isConnected }
    package var loopsBack: Bool { inner.loopsBack }
    package func coalescingWrites(_ body: () -> Void) { inner.coalescingWrites(body) }
}
