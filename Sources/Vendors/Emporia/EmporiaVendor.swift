import CurlHTTP
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import Logging
import Resilience
import Synchronization
import VendorKit

/// Emporia Vue energy monitors, smart plugs and EV chargers through Emporia's cloud.
/// - Auth: Cognito (`EmporiaSignIn`): the password sign-in (SRP) or a given refresh token yields an id token, sent
///   as the `authtoken` header and renewed before it expires or on 401.
/// - Devices: one per Vue `<id>_<gid>` with `home_power` (its Mains), one per circuit `<id>_<gid>_<channel>`
///   with `power`, named after the circuit (and `Balance`, the unmonitored rest); one per smart plug or charger
///   `<id>_<gid>` with `power` and `state` (switchable: `PUT /devices/outlet`); one per EV charger `<id>_<gid>` with
///   `state` and `charging_current` (both settable: `PUT /devices/evcharger`) and `power`.
/// - Power: `getDeviceListUsages` at the `1MIN` scale gives kWh in the last minute: × 60,000 is W.
public final class EmporiaVendor: Vendor {
    public let instanceID: String
    public let typeName = "emporia"
    public let http: VendorHTTP
    private let options: EmporiaOptions
    private let sink: VendorEventSink
    private let inventory = InventoryTracker()
    private let session: LoginSession
    private let known = Mutex(Known())

    private struct Known {
        var tree: [WireDevice]?
        var listedAt: Date?
        /// Chargers' settings as the last update answered them, until the device list is read again: the next
        /// update starts from these, so it never puts back what the one before changed.
        var chargers: [Int64: WireDevice.Charger] = [:]
    }

    public init(instanceID: String, options: EmporiaOptions, sink: VendorEventSink, context: VendorContext) throws(GatewayError) {
        self.instanceID = instanceID
        self.options = options
        self.sink = sink
        http = try VendorHTTP(vendorID: instanceID, settings: VendorHTTP.Settings(options.network, retry: .none), sink: sink, context: context)
        session = EmporiaSignIn(http: http, options: options).session()
    }

    public var refreshesAllDevices: Bool { true }

    var base: String { options.network.base }

    /// One usage call a poll, plus the device list while plugs or chargers need their on/off state.
    var pollInterval: Duration {
        guard let quota = http.quota else { return options.network.pollInterval }
        let switchable = known.withLock { known in (known.tree ?? []).flatMap(\.all).contains { $0.outlet != nil || $0.evCharger != nil } }
        return quota.pollInterval(requested: options.network.pollInterval, cost: switchable ? 2 : 1) ?? .seconds(3600)
    }

    public func run() async throws {
        try await http.runPolling(every: { self.pollInterval }) { try await self.poll() }
    }

    public func refresh(_ device: DeviceID) async throws { try await poll(use: .refresh) }

    public func poll(use: QuotaScheduler.Use = .poll) async throws(GatewayError) {
        let tree = try await tree(use: use)
        let gids = tree.map { String($0.deviceGid) }.joined(separator: "+")
        guard !gids.isEmpty else {
            inventory.announce([], vendorID: instanceID, sink: sink)
            return
        }
        let instant = ISOTime.format(http.now())
        let path = "/AppAPI?apiMethod=getDeviceListUsages&deviceGids=\(gids)&instant=\(instant)&scale=1MIN&energyUnit=KilowattHours"
        let usages = try await get(path, WireUsages.self, context: "usage", use: use)
        // Per device gid: each channel's name and W.
        var channels: [Int64: [(num: String, name: String?, watts: Double?)]] = [:]
        func walk(_ list: [WireUsages.DeviceUsage]) {
            for device in list {
                for channel in device.channelUsages ?? [] {
                    // A huge finite usage would overflow to infinity: such a reading is dropped, not published.
                    let watts = channel.usage.flatMap { usage -> Double? in
                        let value = (usage * 60_000 * 10).rounded() / 10
                        return value.isFinite ? value : nil
                    }
                    channels[device.deviceGid, default: []].append((channel.channelNum, channel.name, watts))
                    walk(channel.nestedDevices ?? [])
                }
            }
        }
        walk(usages.deviceListUsages?.devices ?? [])
        var devices: [Device] = []
        var states: [(DeviceID, [String: StateValue])] = []
        for device in tree.flatMap(\.all) {
            let name = device.locationProperties?.deviceName.flatMap { $0.isEmpty ? nil : $0 } ?? "Emporia \(device.deviceGid)"
            let main = channels[device.deviceGid]?.first { $0.num == "1,2,3" }?.watts
            if let charger = device.evCharger {
                // The charger's own range (6 A, the lowest a pilot signal offers, up to its maximum), not the registry's.
                let entry = Device(vendorID: instanceID, vendorDeviceID: String(device.deviceGid), name: name, type: .evCharger, manufacturer: "Emporia",
                                   model: device.model, swVersion: device.firmware, writableKeys: ["state", "charging_current"],
                                   keys: ["state", "charging_current", "power"],
                                   limits: ["charging_current": KeyLimits(min: 6, max: Double(min(charger.maxChargingRate ?? 40, 80)))])
                devices.append(entry)
                var state = Self.state(of: charger)
                if let main { state["power"] = .number(main) }
                states.append((entry.id, state))
                continue
            }
            if let outlet = device.outlet {
                let entry = Device(vendorID: instanceID, vendorDeviceID: String(device.deviceGid), name: name, type: .plug, manufacturer: "Emporia",
                                   model: device.model, swVersion: device.firmware, writableKeys: ["state"], keys: ["state", "power"])
                devices.append(entry)
                var state: [String: StateValue] = [:]
                if let on = outlet.outletOn { state["state"] = .string(on ? "ON" : "OFF") }
                if let main { state["power"] = .number(main) }
                states.append((entry.id, state))
                continue
            }
            let vue = Device(vendorID: instanceID, vendorDeviceID: String(device.deviceGid), name: name, type: .energyMeter, manufacturer: "Emporia",
                             model: device.model, swVersion: device.firmware, writableKeys: [], keys: ["home_power"])
            devices.append(vue)
            if let main { states.append((vue.id, ["home_power": .number(main)])) }
            for channel in channels[device.deviceGid] ?? [] where channel.num != "1,2,3" {
                let circuit = Device(
                    vendorID: instanceID, vendorDeviceID: "\(device.deviceGid)_\(Slug.make(channel.num))",
                    name: channel.name.flatMap { $0.isEmpty ? nil : $0 } ?? "\(name) circuit \(channel.num)", type: .energyMeter,
                    manufacturer: "Emporia", model: "\(device.model ?? "Vue") circuit", writableKeys: [], keys: ["power"]
                )
                devices.append(circuit)
                if let watts = channel.watts { states.append((circuit.id, ["power": .number(watts)])) }
            }
        }
        inventory.announce(devices, vendorID: instanceID, sink: sink)
        let at = usages.deviceListUsages?.instant.flatMap(ISOTime.parse) ?? http.now()
        for (id, state) in states where !state.isEmpty { sink.send(.state(id, state, observedAt: at)) }
    }

    // MARK: Commands

    public func execute(_ command: DeviceCommand) async throws -> CommandOutcome {
        guard let gid = Int64(command.vendorDeviceID),
              let device = known.withLock({ known in (known.tree ?? []).flatMap(\.all).first { $0.deviceGid == gid } }),
              device.outlet != nil || device.evCharger != nil else {
            throw GatewayError(.vendorRejected, message: "\(command.device) is not an Emporia smart plug or charger: only those can be switched.")
        }
        if let charger = device.evCharger {
            return try await setCharger(known.withLock { $0.chargers[gid] } ?? charger, gid: gid, command)
        }
        guard command.changes.keys.allSatisfy({ $0 == "state" }), let word = command.changes["state"]?.string, word == "ON" || word == "OFF",
              let outlet = device.outlet else {
            throw GatewayError(.vendorRejected, message: "An Emporia plug only switches on and off.")
        }
        let body: JSONValue = [
            "deviceGid": .number(Double(gid)), "outletOn": .bool(word == "ON"),
            "parentDeviceGid": outlet.parentDeviceGid.map { .number(Double($0)) } ?? .null,
            "parentChannelNum": .optional(outlet.parentChannelNum),
        ]
        struct Answer: Decodable { var outletOn: Bool? }
        let answer = try await put("/devices/outlet", body: Data(body.render().utf8), as: Answer.self, context: "outlet", command)
        guard let on = answer.outletOn else { throw http.classifier.unexpectedShape("it has no outletOn", context: "Emporia outlet answer") }
        known.withLock { $0.listedAt = nil }
        return CommandOutcome(confirmed: ["state": .string(on ? "ON" : "OFF")])
    }

    /// A charger takes its whole setting back in one PUT: on/off and the offered current (6 A … its maximum).
    private func setCharger(_ charger: WireDevice.Charger, gid: Int64, _ command: DeviceCommand) async throws(GatewayError) -> CommandOutcome {
        guard command.changes.keys.allSatisfy({ $0 == "state" || $0 == "charging_current" }) else {
            throw GatewayError(.vendorRejected, message: "An Emporia charger takes state (ON/OFF) and charging_current (A).")
        }
        var wanted = charger
        wanted.deviceGid = gid
        if let change = command.changes["state"] {
            guard let word = change.string, word == "ON" || word == "OFF" else {
                throw GatewayError(.vendorRejected, message: "A charger's state is ON or OFF.")
            }
            wanted.chargerOn = word == "ON"
        }
        if let change = command.changes["charging_current"] {
            let maximum = charger.maxChargingRate ?? 40
            // Int(exactly:): the charger's maximum comes from Emporia and may be Int.max, which Double rounds up.
            guard let amps = change.number.flatMap({ Int(exactly: $0) }), amps >= 6, amps <= maximum else {
                throw GatewayError(.vendorRejected, message: "charging_current must be a whole number of A from 6 to \(maximum) on this charger.",
                                   suggestion: "Send a value between 6 and \(maximum).")
            }
            wanted.chargingRate = amps
        }
        guard wanted.chargerOn != nil, wanted.chargingRate != nil, wanted.maxChargingRate != nil else {
            throw GatewayError(.vendorRejected, message: "The charger's current setting is not known yet, so it is not changed.",
                               suggestion: "Try again after the next poll.")
        }
        let body = try? JSONEncoder().encode(wanted.forUpdate)
        var answer = try await put("/devices/evcharger", body: body, as: WireDevice.Charger.self, context: "charger", command)
        answer.deviceGid = gid
        answer.maxChargingRate = answer.maxChargingRate ?? wanted.maxChargingRate
        answer.loadGid = answer.loadGid ?? wanted.loadGid
        let updated = answer
        known.withLock { known in
            known.chargers[gid] = updated
            known.listedAt = nil
        }
        let confirmed = Self.state(of: answer).filter { command.changes[$0.key] != nil }
        guard confirmed.count == command.changes.count else {
            throw http.classifier.unexpectedShape("it lacks chargerOn or chargingRate", context: "Emporia charger answer")
        }
        return CommandOutcome(confirmed: confirmed)
    }

    private func put<T: Decodable>(_ path: String, body: Data?, as type: T.Type, context: String, _ command: DeviceCommand) async throws(GatewayError) -> T {
        var request = HTTPClientRequest(method: .put, url: base + path, timeout: options.network.timeout)
        request.headers.set(name: "Content-Type", value: "application/json")
        request.body = body
        return try await http.sendJSON(request, as: type, context: "Emporia \(context)", use: .command, authorizer: session, deadline: command.expiresAt)
    }

    static func state(of charger: WireDevice.Charger) -> [String: StateValue] {
        var state: [String: StateValue] = [:]
        if let on = charger.chargerOn { state["state"] = .string(on ? "ON" : "OFF") }
        if let rate = charger.chargingRate { state["charging_current"] = .number(Double(rate)) }
        return state
    }

    /// A plug's or charger's state, read back from the device list (for a command whose outcome is unknown).
    public func readState(_ device: DeviceID) async throws -> [String: StateValue] {
        known.withLock { $0.listedAt = nil }
        let tree = try await tree(use: .refresh)
        guard let found = tree.flatMap(\.all).first(where: { DeviceID(vendorInstance: instanceID, vendorDeviceID: String($0.deviceGid)) == device }) else {
            return [:]
        }
        if let charger = found.evCharger { return Self.state(of: charger) }
        return found.outlet?.outletOn.map { ["state": .string($0 ? "ON" : "OFF")] } ?? [:]
    }

    // MARK: Requests

    /// The device tree: read every 6 h, or every poll while plugs or chargers report their on/off state in it.
    private func tree(use: QuotaScheduler.Use) async throws(GatewayError) -> [WireDevice] {
        let now = http.now()
        if let (tree, listedAt) = known.withLock({ known in known.tree.map { ($0, known.listedAt) } }), let listedAt {
            let switchable = tree.flatMap(\.all).contains { $0.outlet != nil || $0.evCharger != nil }
            if !switchable, now.timeIntervalSince(listedAt) < 6 * 3600 { return tree }
            if switchable, use != .poll || now.timeIntervalSince(listedAt) < 1 { return tree }
        }
        let tree = try await get("/customers/devices", WireCustomer.self, context: "device list", use: use).devices ?? []
        known.withLock { known in
            known.tree = tree
            known.listedAt = now
            known.chargers = [:]
        }
        return tree
    }

    private func get<T: Decodable>(_ path: String, _ type: T.Type, context: String, use: QuotaScheduler.Use) async throws(GatewayError) -> T {
        var request = HTTPClientRequest(url: base + path, timeout: options.network.timeout)
        request.headers.set(name: "Accept", value: "application/json")
        return try await http.sendJSON(request, as: type, context: "Emporia \(context)", use: use, authorizer: session)
    }
}
