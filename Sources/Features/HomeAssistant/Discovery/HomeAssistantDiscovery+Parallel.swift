#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel

extension HomeAssistantDiscovery {
    /// `messages(for:reported:)` of many devices, in their order, built on every core: a connect announces all
    /// of them before the first state goes out, and building 1,000 devices' discovery was most of a cold start.
    /// The building is pure (a device and its state in, messages out); publishing stays with the caller, in order.
    public func messagesInParallel(
        for devices: [(Device, DeviceState?)], minimumPerWorker: Int = 64, maximumWorkers: Int = ProcessInfo.processInfo.activeProcessorCount
    ) -> [[Message]] {
        ParallelMap.map(devices, minimumPerWorker: minimumPerWorker, maximumWorkers: maximumWorkers) {
            messages(for: $0.0, reported: .state($0.1))
        }
    }
}
