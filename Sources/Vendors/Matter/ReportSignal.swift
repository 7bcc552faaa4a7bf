import Synchronization

/// Wakes the tasks waiting for a node's next report (a fan's confirmation), so they wait for an event instead
/// of polling the known nodes.
final class ReportSignal: Sendable {
    private let waiters = Mutex<[UInt64: CheckedContinuation<Void, Never>]>([:])
    private let nextID = Atomic<UInt64>(0)

    /// Wakes every waiter.
    func fire() {
        let woken = waiters.withLock { waiters in
            defer { waiters.removeAll() }
            return Array(waiters.values)
        }
        for waiter in woken { waiter.resume() }
    }

    /// Returns at the next `fire()`, or at once when the task is cancelled.
    func next() async {
        let id = nextID.add(1, ordering: .relaxed).newValue
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                // Checked under the lock: a cancel that ran before the waiter was stored finds it here.
                let cancelled = waiters.withLock { waiters -> Bool in
                    if Task.isCancelled { return true }
                    waiters[id] = continuation
                    return false
                }
                if cancelled { continuation.resume() }
            }
        } onCancel: {
            waiters.withLock { $0.removeValue(forKey: id) }?.resume()
        }
    }

    /// Returns at the next `fire()` or after `timeout` on `time`, whichever comes first.
    func next(within timeout: Duration, on time: @escaping TimeSourceSleep) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.next() }
            group.addTask { try? await time(timeout) }
            await group.next()
            group.cancelAll()
        }
    }
}

/// Sleeping on the vendor's clock (`TimeSource.sleep`), as a function so this file needs no Resilience import.
typealias TimeSourceSleep = @Sendable (Duration) async throws -> Void
