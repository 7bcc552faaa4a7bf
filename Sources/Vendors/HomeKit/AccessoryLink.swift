#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import HAP
import Resilience
import Synchronization

/// One configured accessory: its pairing, its devices and last values, and its connection while one is open.
final class AccessoryLink: Sendable {
    struct State {
        var pairing: HomeKitStore.Pairing?
        /// The attribute database as last read (or restored from the cache).
        var plans: [HKDevicePlan] = []
        /// Characteristic values by aid, then iid.
        var values: [Int: [Int: JSONValue]] = [:]
        var connection: HAPConnection?
        /// Polled characteristics by aid (no `ev`, or the subscription was refused).
        var polled: [Int: [Int]] = [:]
        var lastError: GatewayError?
        /// True while a pair-setup runs (from the config's code or a request): a second one is refused.
        var pairingInProgress = false
        var unmappedLogged = false
        var attempted = false
        /// The accessory's `_hap._tcp` record as mDNS last showed it (address, `c#`).
        var discovered: HAPServiceRecord?
        /// The `c#` its database was read at.
        var configNumber: Int?
    }

    let options: HomeKitAccessoryOptions
    let state = Mutex(State())
    /// Moves when something should end a wait at once: a pairing made or removed by request, a new address.
    let wake = ChangeSignal()
    /// Moves when the accessory's `c#` changed: its database is read again on the open session.
    let reload = ChangeSignal()

    init(options: HomeKitAccessoryOptions) {
        self.options = options
    }

    var name: String { options.name }

    /// Where to connect: the configured host and port; else where mDNS last found the accessory's id; else
    /// where it was when it was paired.
    var address: (host: String, port: Int)? {
        if let host = options.host, let port = options.port { return (host, port) }
        let (pairing, discovered) = state.withLock { ($0.pairing, $0.discovered) }
        if let discovered { return (discovered.address, discovered.port) }
        if let host = pairing?.host, let port = pairing?.port { return (host, port) }
        return nil
    }

    /// The accessory's HAP id: configured, or learned when it was paired.
    var accessoryID: String? {
        options.deviceID ?? state.withLock { $0.pairing?.accessory.accessoryID.uppercased() }
    }

    /// Its address comes from mDNS (no host in the config).
    var followsMDNS: Bool { options.host == nil }

    var isConnected: Bool { state.withLock { $0.connection != nil } }

    /// The plan of the device with this vendor device id.
    func plan(for vendorDeviceID: String) -> HKDevicePlan? {
        state.withLock { $0.plans.first { $0.device.vendorDeviceID == vendorDeviceID } }
    }

    /// Takes new values (a read, an event) and returns, per device, the keys they change with their new values.
    func apply(_ updates: [CharacteristicValue]) -> [(DeviceID, [String: StateValue])] {
        state.withLock { state in
            var changed: [Int: Set<Int>] = [:]
            for update in updates where update.status == nil || update.status == 0 {
                guard let value = update.value else { continue }
                state.values[update.aid, default: [:]][update.iid] = value
                changed[update.aid, default: []].insert(update.iid)
            }
            var result: [(DeviceID, [String: StateValue])] = []
            for plan in state.plans {
                guard let iids = changed[plan.aid] else { continue }
                let keys = plan.keys(fedBy: iids)
                let values = HomeKitMapping.state(plan, values: state.values[plan.aid] ?? [:], keys: keys)
                if !values.isEmpty { result.append((plan.device.id, values)) }
            }
            return result
        }
    }
}
