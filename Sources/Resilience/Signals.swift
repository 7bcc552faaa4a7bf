import Synchronization

/// Wakes whoever waits for a change (`version` moves on every `signal`); a waiter also wakes at its timeout or
/// when its task is cancelled. Nothing polls.
package final class ChangeSignal: Sendable {
    private struct State {
        var version = 0
        var nextID = 0
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
    }
    private let state = Mutex(State())

    package init() {}

    package var version: Int { state.withLock { $0.version } }

    package func signal() {
        let waiters = state.withLock { state in
            state.version &+= 1
            defer { state.waiters = [:] }
            return state.waiters
        }
        for waiter in waiters.values { waiter.resume() }
    }

    /// Returns once `version` is past `seen`, after `timeout`, or when the task is cancelled.
    package func wait(after seen: Int, timeout: Duration, clock: any Clock<Duration>) async {
        guard timeout > .zero else { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.change(after: seen) }
            group.addTask { try? await clock.sleep(for: timeout) }
            await group.next()
            group.cancelAll()
        }
    }

    /// Returns once `version` is past `seen`, or when the task is cancelled.
    package func change(after seen: Int) async {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now = state.withLock { state in
                    if state.version != seen || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }
}

/// A one-way gate: waiters resume once it opens (at once when it is open already), or when their task is
/// cancelled. A `ChangeSignal` that changes once.
package final class ReadyGate: Sendable {
    private let signal = ChangeSignal()

    package init() {}

    package var isOpen: Bool { signal.version != 0 }

    package func open() {
        if !isOpen { signal.signal() }
    }

    package func wait() async {
        await signal.change(after: 0)
    }
}
