import Dispatch
import Foundation
import GatewayModel
import Synchronization

extension HomeAssistantDiscovery {
    /// `messages(for:reported:)` of many devices, in their order, built on every core: a connect announces all
    /// of them before the first state goes out, and building 1,000 devices' discovery was most of a cold start.
    /// The building is pure (a device and its state in, messages out); publishing stays with the caller, in order.
    /// `minimumPerWorker`: below that many devices a core is not worth waking.
    public func messagesInParallel(
        for devices: [(Device, DeviceState?)], minimumPerWorker: Int = 64, maximumWorkers: Int = ProcessInfo.processInfo.activeProcessorCount
    ) -> [[Message]] {
        let workers = min(maximumWorkers, devices.count / max(1, minimumPerWorker))
        guard workers > 1 else { return devices.map { messages(for: $0.0, reported: .state($0.1)) } }
        let share = (devices.count + workers - 1) / workers
        let parts = Mutex<[Int: [[Message]]]>([:])
        DispatchQueue.concurrentPerform(iterations: workers) { worker in
            let range = min(devices.count, worker * share) ..< min(devices.count, (worker + 1) * share)
            let built = range.map { messages(for: devices[$0].0, reported: .state(devices[$0].1)) }
            parts.withLock { $0[worker] = built }
        }
        return parts.withLock { parts in (0 ..< workers).flatMap { parts[$0] ?? [] } }
    }
}
