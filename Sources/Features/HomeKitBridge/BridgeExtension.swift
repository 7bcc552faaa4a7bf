import Crypto
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import VendorKit
import GatewayCore
import GatewayModel
import HAP
import Logging

/// The bridge's view of the gateway (on its actor): which devices are bridged under which aid, the attribute
/// database built from them (`BridgeModel`), reads from the current state, writes through the command path, and
/// events for every state change to the controllers that subscribed.
@GatewayActor
final class BridgeExtension: GatewayExtension {
    let hub: GatewayHub
    let commands: Commands
    let runtime: BridgeRuntime
    /// Bridged accessories by aid (the bridge itself is aid 1).
    private(set) var accessories: [Int: BridgedAccessory] = [:]
    private var aidOfDevice: [DeviceID: Int] = [:]
    /// The last value each characteristic had when it was served or sent, so only changes go out as events.
    private var lastValues: [Int64: JSONValue] = [:]
    /// The latest `<base>/energy/home` as a state (its numbers), for the home energy accessory.
    private var energyHome: DeviceState?
    private var rebuildScheduled = false
    /// Values a controller just wrote, by characteristic: the change they cause is not sent back to that controller
    /// as an event (HAP: no notification to the controller that made the change).
    private var recentWrites: [Int64: (session: UInt64, value: JSONValue, until: ContinuousClock.Instant)] = [:]
    private var ready = false
    private var warnedOverLimit = false

    init(hub: GatewayHub, commands: Commands, runtime: BridgeRuntime) {
        self.hub = hub
        self.commands = commands
        self.runtime = runtime
    }

    func handle(_ event: HubEvent) {
        switch event {
        case .connected, .inventoryApplied, .deviceAdded, .deviceChanged, .deviceRemoved:
            scheduleRebuild()
        case .stateUpdated(let id, let update, let changed, _, _):
            if changed, let aid = aidOfDevice[id] { stateChanged(aid: aid, keys: Set(update.keys)) }
        case .availabilityChanged(let id, _):
            if let aid = aidOfDevice[id] { stateChanged(aid: aid, keys: nil) }
        case .homeViewUpdated(.energy, let payload):
            let known = energyHome != nil
            energyHome = payload.map(Self.state(of:))
            if known != (energyHome != nil) {
                scheduleRebuild()
            } else if let aid = accessories.values.first(where: { $0.view == "energy_home" })?.aid {
                stateChanged(aid: aid, keys: nil)
            }
        default:
            break
        }
    }

    /// Rebuilds once per burst of device changes (an inventory of many devices is one rebuild).
    private func scheduleRebuild() {
        guard !rebuildScheduled else { return }
        rebuildScheduled = true
        hub.tasks.spawn { [self] in
            if !ready {
                _ = await runtime.loaded()
                ready = true
            }
            try? await hub.clock.sleep(for: .milliseconds(100))
            rebuildScheduled = false
            await rebuild()
        }
    }

    /// Numbers new devices (an aid is never reused: a device that leaves and comes back keeps its own), builds the
    /// database and bumps `c#` when its structure changed.
    func rebuild() async {
        guard let snapshot = runtime.snapshot else { return }
        let settings = runtime.settings
        var aids = snapshot.aids
        let selected: [Device]
        if let chosen = settings.devices {
            selected = chosen.compactMap { DeviceID(validating: $0).flatMap { hub.devices[$0] } }
        } else {
            selected = hub.devices.values.sorted { $0.id < $1.id }
        }
        var next = max(1, aids.values.max() ?? 1)
        var built: [Int: BridgedAccessory] = [1: BridgeModel.bridge(name: settings.name, version: GatewayController.version)]
        var byDevice: [DeviceID: Int] = [:]
        var candidates: [(Int, BridgedAccessory)] = []
        // The home's energy view, while there is one (and unless `devices` leaves it out).
        if energyHome != nil, settings.devices?.contains("energy_home") ?? true {
            let aid: Int
            if let known = aids[BridgeModel.energyHomeKey] { aid = known } else {
                next += 1
                aid = next
                aids[BridgeModel.energyHomeKey] = aid
            }
            candidates.append((aid, BridgeModel.energyHome(aid: aid, version: GatewayController.version)))
        }
        for device in selected {
            let aid: Int
            if let known = aids[device.id.rawValue] { aid = known } else {
                next += 1
                aid = next
                aids[device.id.rawValue] = aid
            }
            if let accessory = BridgeModel.accessory(aid: aid, device: device, version: GatewayController.version) {
                candidates.append((aid, accessory))
            }
        }
        // HomeKit takes 149 accessories behind a bridge: the longest-known devices (lowest aids) keep their place.
        candidates.sort { $0.0 < $1.0 }
        if candidates.count > HomeKitBridgeSettings.maxBridgedAccessories, !warnedOverLimit {
            warnedOverLimit = true
            hub.logger.warning("homekit bridge: \(candidates.count) devices, HomeKit shows at most \(HomeKitBridgeSettings.maxBridgedAccessories) behind one bridge; the newest \(candidates.count - HomeKitBridgeSettings.maxBridgedAccessories) are left out (choose with homekit.devices)")
        }
        for (aid, accessory) in candidates.prefix(HomeKitBridgeSettings.maxBridgedAccessories) {
            built[aid] = accessory
            if let device = accessory.device { byDevice[device] = aid }
        }
        accessories = built
        aidOfDevice = byDevice
        let digest = Self.digest(built)
        let newAids = aids
        if digest != snapshot.digest || newAids != snapshot.aids {
            await runtime.update { stored in
                stored.aids = newAids
                if stored.digest != digest {
                    // c# runs 1…65535 and wraps to 1.
                    stored.configNumber = stored.digest.isEmpty ? max(1, stored.configNumber) : (stored.configNumber % 65535) + 1
                    stored.digest = digest
                }
            }
        }
    }

    /// A digest of the database's structure (aids, iids, types, perms, formats): what controllers cache.
    static func digest(_ accessories: [Int: BridgedAccessory]) -> String {
        var text = ""
        for aid in accessories.keys.sorted() {
            guard let accessory = accessories[aid] else { continue }
            text += "a\(aid);"
            for service in accessory.services {
                text += "s\(service.iid):\(service.type.uuid);"
                for item in service.characteristics {
                    text += "c\(item.iid):\(item.type.uuid):\(item.format):\(item.perms.joined(separator: ",")):\(item.validValues ?? []);"
                }
            }
        }
        return hexString(Array(SHA256.hash(data: Array(text.utf8))).prefix(12))
    }

    // MARK: Serving

    /// A view's numbers as a device state.
    static func state(of payload: JSON) -> DeviceState {
        var values: [String: StateValue] = [:]
        if case .object(let object) = payload {
            for (key, value) in object { if let number = value.number { values[key] = .number(number) } }
        }
        return DeviceState(values: values)
    }

    /// The state an accessory's values come from: its device's, or its view's.
    private func state(of accessory: BridgedAccessory) -> DeviceState? {
        if accessory.view == "energy_home" { return energyHome }
        return accessory.device.flatMap { hub.states[$0] }
    }

    private func isReachable(_ accessory: BridgedAccessory) -> Bool {
        if accessory.view != nil { return energyHome != nil }
        guard let device = accessory.device else { return true }
        return hub.availability[device] == true && hub.states[device]?.stale != true
    }

    func accessoriesJSON() -> [UInt8] {
        var list: [JSONValue] = []
        for aid in accessories.keys.sorted() {
            guard let accessory = accessories[aid] else { continue }
            let state = state(of: accessory)
            let services: [JSONValue] = accessory.services.map { service in
                let characteristics: [JSONValue] = service.characteristics.map { item in
                    var object = Self.description(item)
                    object["iid"] = .number(Double(item.iid))
                    if item.readable {
                        let value = BridgeModel.value(item, state: state)
                        object["value"] = value ?? defaultValue(item)
                        if let value { lastValues[BridgeServerKey.key(aid, item.iid)] = value }
                    }
                    return .object(object)
                }
                var object: [String: JSONValue] = ["iid": .number(Double(service.iid)), "type": .string(service.type.short), "characteristics": .array(characteristics)]
                if service.primary { object["primary"] = .bool(true) }
                return .object(object)
            }
            list.append(.object(["aid": .number(Double(aid)), "services": .array(services)]))
        }
        return Array(JSONValue.object(["accessories": .array(list)]).render().utf8)
    }

    /// A value of the right format where the state has none yet (HomeKit wants every readable one to have a value).
    private func defaultValue(_ item: BridgeCharacteristic) -> JSONValue {
        switch item.format {
        case "bool": .bool(false)
        case "string": .string("")
        default: .number(item.minValue.map { max(0, $0) } ?? 0)
        }
    }

    func read(_ ids: [(aid: Int, iid: Int)]) -> [CharacteristicValue] {
        ids.map { id in
            guard let accessory = accessories[id.aid], let item = accessory.characteristic(id.iid) else {
                return CharacteristicValue(aid: id.aid, iid: id.iid, status: HAPStatus.noSuchResource)
            }
            guard item.readable else { return CharacteristicValue(aid: id.aid, iid: id.iid, status: HAPStatus.writeOnly) }
            // An offline or stale device answers "not reachable" instead of an old value.
            guard isReachable(accessory) else { return CharacteristicValue(aid: id.aid, iid: id.iid, status: HAPStatus.communicationFailure) }
            guard let value = BridgeModel.value(item, state: state(of: accessory)) else {
                return CharacteristicValue(aid: id.aid, iid: id.iid, status: HAPStatus.communicationFailure)
            }
            return CharacteristicValue(aid: id.aid, iid: id.iid, value: value, status: 0)
        }
    }

    /// A characteristic's description in `/accessories` and for `meta=1&perms=1&type=1` reads.
    static func description(_ item: BridgeCharacteristic) -> [String: JSONValue] {
        var object: [String: JSONValue] = ["type": .string(item.type.short), "format": .string(item.format), "perms": .array(item.perms.map(JSONValue.string))]
        if let unit = item.unit { object["unit"] = .string(unit) }
        if let low = item.minValue { object["minValue"] = .number(low) }
        if let high = item.maxValue { object["maxValue"] = .number(high) }
        if let step = item.minStep { object["minStep"] = .number(step) }
        if let valid = item.validValues { object["valid-values"] = .array(valid.map { .number(Double($0)) }) }
        if item.format == "string" { object["maxLen"] = .number(64) }
        return object
    }

    func describe(aid: Int, iid: Int) -> [String: JSONValue]? {
        accessories[aid]?.characteristic(iid).map(Self.description)
    }

    func notifies(aid: Int, iid: Int) -> Bool? {
        guard let item = accessories[aid]?.characteristic(iid) else { return nil }
        return item.perms.contains("ev")
    }

    /// HAP writes → one `/set` per accessory through the gateway's command path; each item's status is the
    /// command's outcome (0 once carried out). HAP controllers wait about 10 s for an answer: a command still
    /// waiting then (its vendor is down) answers "timed out" and stays in the outbox until its TTL.
    func write(_ items: [CharacteristicValue], session: UInt64) async -> [CharacteristicValue] {
        var statuses = [Int](repeating: 0, count: items.count)
        var payloads: [Int: (device: DeviceID, set: [String: JSONValue], indices: [Int])] = [:]
        for (index, item) in items.enumerated() {
            guard let accessory = accessories[item.aid], let characteristic = accessory.characteristic(item.iid) else {
                statuses[index] = HAPStatus.noSuchResource
                continue
            }
            if case .identify = characteristic.source {
                hub.logger.notice("homekit bridge: identify \(accessory.device?.rawValue ?? "the bridge")")
                continue
            }
            guard let device = accessory.device else {
                statuses[index] = HAPStatus.readOnly
                continue
            }
            guard isReachable(accessory) else {
                statuses[index] = HAPStatus.communicationFailure
                continue
            }
            switch BridgeModel.command(characteristic, value: item.value ?? .null, state: hub.states[device]) {
            case .failure(let refusal):
                statuses[index] = refusal.status
            case .success(nil):
                continue
            case .success(let (key, value)?):
                if let written = item.value {
                    recentWrites[BridgeServerKey.key(item.aid, item.iid)] = (session, written, ContinuousClock.now + .seconds(30))
                }
                var entry = payloads[item.aid] ?? (device, [:], [])
                entry.set[key] = value
                entry.indices.append(index)
                payloads[item.aid] = entry
            }
        }
        await withTaskGroup(of: (indices: [Int], status: Int).self) { group in
            for (_, entry) in payloads {
                let (outcomes, continuation) = AsyncStream.makeStream(of: GatewayError?.self)
                commands.submit(device: entry.device, set: entry.set, origin: "homekit") { error in
                    continuation.yield(error)
                    continuation.finish()
                }
                let clock = hub.clock
                group.addTask {
                    await withTaskGroup(of: Int?.self) { race in
                        race.addTask {
                            for await error in outcomes { return error.map(Self.status) ?? 0 }
                            return HAPStatus.communicationFailure
                        }
                        race.addTask {
                            try? await clock.sleep(for: .seconds(9))
                            return Task.isCancelled ? nil : HAPStatus.timedOut
                        }
                        let first = await race.next() ?? nil
                        race.cancelAll()
                        return (entry.indices, first ?? HAPStatus.timedOut)
                    }
                }
            }
            for await (indices, status) in group {
                for index in indices { statuses[index] = status }
            }
        }
        return items.enumerated().map { CharacteristicValue(aid: $0.element.aid, iid: $0.element.iid, status: statuses[$0.offset]) }
    }

    /// A written value and the state's value for it: `true` and `1` are the same to HAP.
    static func same(_ written: JSONValue, _ value: JSONValue) -> Bool {
        func number(_ json: JSONValue) -> Double? {
            switch json { case .number(let number): number
            case .bool(let flag): flag ? 1 : 0
            default: nil }
        }
        guard let a = number(written), let b = number(value) else { return written == value }
        return abs(a - b) < 0.5
    }

    /// A command's error as a HAP status.
    nonisolated static func status(_ error: GatewayError) -> Int {
        switch error.code {
        case .readOnlyKey, .unknownKey: HAPStatus.readOnly
        case .outOfRange, .invalidPayload, .invalidJSON, .invalidUTF8: HAPStatus.invalidValue
        case .queueFull, .limitReached: HAPStatus.outOfResources
        case .expired, .vendorTimeout: HAPStatus.timedOut
        case .unknownDevice, .notFound: HAPStatus.noSuchResource
        case .authFailed: HAPStatus.insufficientAuthorization
        case .rateLimited, .breakerOpen, .quotaExhausted: HAPStatus.busy
        default: HAPStatus.communicationFailure
        }
    }

    /// New values of a bridged device's characteristics (those made from `keys`; all with nil) go to the
    /// subscribed controllers, once per change.
    private func stateChanged(aid: Int, keys: Set<String>?) {
        guard let accessory = accessories[aid], isReachable(accessory) else { return }
        let state = state(of: accessory)
        var changes: [CharacteristicValue] = []
        /// Changes one controller caused by its write, sent to every other controller only.
        var written: [UInt64: [CharacteristicValue]] = [:]
        let now = ContinuousClock.now
        for service in accessory.services {
            for item in service.characteristics where item.perms.contains("ev") {
                guard case .key(let key, _) = item.source, keys?.contains(key) ?? true else { continue }
                guard let value = BridgeModel.value(item, state: state) else { continue }
                let slot = BridgeServerKey.key(aid, item.iid)
                guard lastValues[slot] != value else { continue }
                lastValues[slot] = value
                let change = CharacteristicValue(aid: aid, iid: item.iid, value: value)
                if let write = recentWrites.removeValue(forKey: slot), write.until > now, Self.same(write.value, value) {
                    written[write.session, default: []].append(change)
                } else {
                    changes.append(change)
                }
            }
        }
        runtime.server?.notify(changes)
        for (session, values) in written { runtime.server?.notify(values, except: session) }
    }
}

enum BridgeServerKey {
    static func key(_ aid: Int, _ iid: Int) -> Int64 { Int64(aid) << 32 | Int64(iid & 0xFFFF_FFFF) }
}
