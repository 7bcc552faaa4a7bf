import Foundation
import GatewayCore
import Synchronization

/// A unit-test transport that records what the controller publishes (integration tests use a real broker).
final class RecordingTransport: MessageTransport {
    struct Published: Sendable, Hashable {
        var topic: String
        var payload: String
        var qos: Int
        var retain: Bool
        var correlationData: [UInt8]?
    }

    private let log = Mutex<[Published]>([])
    private let subscribed = Mutex<[String]>([])
    private let unsubscribed = Mutex<[String]>([])
    private let droppedCounts = Mutex(TransportStats())
    private let backlog = Mutex(0)
    /// As a broker would: what is published on a subscribed topic comes back (the test hands it back itself).
    let loopsBack: Bool

    init(loopsBack: Bool = false) {
        self.loopsBack = loopsBack
    }

    /// What the test says the connection has waiting (a slow broker).
    var outgoingBacklog: Int { backlog.withLock { $0 } }
    func setBacklog(_ count: Int) { backlog.withLock { $0 = count } }

    var stats: TransportStats { droppedCounts.withLock { $0 } }
    func setStats(_ stats: TransportStats) { droppedCounts.withLock { $0 = stats } }
    func unsubscribe(_ filters: [String]) { unsubscribed.withLock { $0.append(contentsOf: filters) } }
    var unsubscriptions: [String] { unsubscribed.withLock { $0 } }

    func publish(_ topic: String, _ payload: String, qos: Int, retain: Bool, correlationData: [UInt8]?) {
        log.withLock { $0.append(Published(topic: topic, payload: payload, qos: qos, retain: retain, correlationData: correlationData)) }
    }

    func publishAndWait(_ topic: String, _ payload: String, retain: Bool, timeout: Duration) async -> Bool {
        publish(topic, payload, qos: 1, retain: retain, correlationData: nil)
        return true
    }

    func subscribe(_ filters: [String]) { subscribed.withLock { $0.append(contentsOf: filters) } }

    var messages: [Published] { log.withLock { $0 } }
    var subscriptions: [String] { subscribed.withLock { $0 } }
    func clear() { log.withLock { $0.removeAll() } }

    func last(_ topic: String) -> Published? { messages.last { $0.topic == topic } }

    func json(_ topic: String) -> [String: Any]? {
        guard let payload = last(topic)?.payload, let data = payload.data(using: .utf8) else { return nil }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
    }

    /// Polls until a message on `topic` satisfies `predicate` (commands run on their own task). Returns as soon as
    /// it is there; the bound only matters when it never comes, so it is wide: at the start of a parallel run on two
    /// cores the whole pool can stall for seconds, and a 500 ms grace timer then fires late.
    func wait(for topic: String, timeout: Duration = .seconds(20), where predicate: (Published) -> Bool = { _ in true }) async -> Published? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let hit = messages.last(where: { $0.topic == topic && predicate($0) }) { return hit }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return nil
    }
}
