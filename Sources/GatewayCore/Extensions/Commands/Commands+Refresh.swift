#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel

extension Commands {
    /// Refreshes, coalesced per device (per vendor when one vendor call reads all its devices): while one
    /// runs, later requests wait for it; a new call starts no sooner than `minimumRefreshInterval` after the
    /// previous one. 2,000 `/get`s in a second are a few vendor calls, not 2,000.
    package struct RefreshState {
        package var running = false
        package var scheduled = false
        package var lastStarted: Date?
        /// The requests the next call answers.
        package var waiters: [(device: DeviceID, reply: Reply)] = []
    }

    package static let minimumRefreshInterval: TimeInterval = 1
    /// Requests that may wait for one refresh; more are refused with `queue_full`.
    package static let maxRefreshWaiters = 256

    package func refresh(_ id: DeviceID, reply: Reply) {
        guard let device = hub.devices[id], let vendor = hub.vendors[device.vendorID] else {
            return fail(.unknownDevice(id.rawValue), device: nil, context: [:], reply: reply)
        }
        let key = vendor.refreshesAllDevices ? "vendor:" + device.vendorID : "device:" + id.rawValue
        var state = refreshes[key] ?? RefreshState()
        guard state.waiters.count < Self.maxRefreshWaiters else {
            return fail(GatewayError(.queueFull, message: "\(Self.maxRefreshWaiters) refreshes already wait for '\(id)'; this one was not queued.",
                                     suggestion: "Wait for the running refresh; its fresh state is published on the device topic."),
                        device: id, context: ["request": "refresh"], reply: reply)
        }
        state.waiters.append((id, reply))
        refreshes[key] = state
        scheduleRefresh(key)
    }

    private func scheduleRefresh(_ key: String) {
        guard var state = refreshes[key], !state.running, !state.scheduled, !state.waiters.isEmpty else { return }
        let wait = state.lastStarted.map { Self.minimumRefreshInterval - hub.now().timeIntervalSince($0) } ?? 0
        state.scheduled = true
        refreshes[key] = state
        let clock = hub.clock
        hub.tasks.spawn { [self] in
            if wait > 0 { try? await clock.sleep(for: .seconds(wait)) }
            await runRefresh(key)
        }
    }

    private func runRefresh(_ key: String) async {
        guard var state = refreshes[key], let first = state.waiters.first?.device else { return }
        let waiters = state.waiters
        state = RefreshState(running: true, scheduled: false, lastStarted: hub.now(), waiters: [])
        refreshes[key] = state
        var failure: GatewayError?
        if let device = hub.devices[first], let vendor = hub.vendors[device.vendorID] {
            do {
                try await vendor.refresh(first)
            } catch let error as GatewayError {
                failure = error
            } catch {
                failure = GatewayError(.internal, message: "\(error)")
            }
        } else {
            failure = .unknownDevice(first.rawValue)
        }
        for (id, reply) in waiters {
            if let failure {
                fail(failure, device: id, context: ["request": "refresh"], reply: reply)
            } else if hub.devices[id] == nil {
                fail(.unknownDevice(id.rawValue), device: nil, context: ["request": "refresh"], reply: reply)
            } else {
                respond(reply, status: "ok", data: ["id": .string(id.rawValue)], error: nil)
            }
        }
        // The entry stays (with its start time) so the minimum interval holds for the next request too.
        refreshes[key]?.running = false
        scheduleRefresh(key)
    }
}
