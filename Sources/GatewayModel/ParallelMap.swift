#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Dispatch
import Synchronization

/// A map over every core for pure, CPU-bound work on many items (a connect builds 1,000 devices' discovery and
/// `bridge/devices` before the first state may go out). The result is in the items' order, as `map` gives it.
public enum ParallelMap {
    /// `minimumPerWorker`: below that many items a core is not worth waking; `maximumWorkers`: the cores to use.
    public static func map<Item: Sendable, Result: Sendable>(
        _ items: [Item], minimumPerWorker: Int = 64, maximumWorkers: Int = ProcessInfo.processInfo.activeProcessorCount,
        _ transform: @Sendable (Item) -> Result
    ) -> [Result] {
        let workers = min(maximumWorkers, items.count / max(1, minimumPerWorker))
        guard workers > 1 else { return items.map(transform) }
        let share = (items.count + workers - 1) / workers
        let parts = Mutex<[Int: [Result]]>([:])
        DispatchQueue.concurrentPerform(iterations: workers) { worker in
            let range = min(items.count, worker * share) ..< min(items.count, (worker + 1) * share)
            let done = items[range].map(transform)
            parts.withLock { $0[worker] = done }
        }
        return parts.withLock { parts in (0 ..< workers).flatMap { parts[$0] ?? [] } }
    }
}
