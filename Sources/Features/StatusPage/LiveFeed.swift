import GatewayCore
import Synchronization

/// The status page's live updates: server-sent events, one bounded stream per open page. A page that
/// cannot keep up loses its oldest updates (it re-reads the whole status every 30 s), never the gateway's memory.
package final class LiveFeed: Sendable {
    /// Updates held per page before the oldest are dropped.
    package static let perClientBuffer = 256

    private struct Subscribers {
        package var next = 0
        var open: [Int: AsyncStream<String>.Continuation] = [:]
        package var closed = false
    }

    private let subscribers = Mutex(Subscribers())
    /// Read on every device update: no lock when nobody watches.
    private let watching = Atomic<Int>(0)

    package var hasSubscribers: Bool { watching.load(ordering: .relaxed) > 0 }

    /// A stream of SSE frames for one page; it ends when the page goes or the gateway stops.
    package func subscribe() -> AsyncStream<String> {
        let (stream, continuation) = AsyncStream<String>.makeStream(bufferingPolicy: .bufferingNewest(Self.perClientBuffer))
        let id: Int? = subscribers.withLock { state in
            guard !state.closed else { return nil }
            state.next += 1
            state.open[state.next] = continuation
            watching.store(state.open.count, ordering: .relaxed)
            return state.next
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in self?.remove(id) }
        return stream
    }

    private func remove(_ id: Int) {
        subscribers.withLock { state in
            state.open[id] = nil
            watching.store(state.open.count, ordering: .relaxed)
        }
    }

    /// One SSE frame (`event:` and one `data:` line of JSON) to every open page.
    package func send(event: String, json: String) {
        guard hasSubscribers else { return }
        let frame = "event: \(event)\ndata: \(json)\n\n"
        let targets = subscribers.withLock { Array($0.open.values) }
        for continuation in targets { continuation.yield(frame) }
    }

    /// Ends every stream (the HTTP server can then finish its responses and stop) and refuses new ones.
    package func close() {
        let targets = subscribers.withLock { state in
            state.closed = true
            defer { state.open.removeAll() }
            return Array(state.open.values)
        }
        watching.store(0, ordering: .relaxed)
        for continuation in targets { continuation.finish() }
    }
}
