import CurlHTTP
import Foundation
import GatewayModel
import Logging
import Resilience
import Synchronization
import VendorKit

/// Emporia Vue energy monitors, smart plugs and EV chargers through Emporia's cloud.
/// - Auth: Cognito's `REFRESH_TOKEN_AUTH` with the account's refresh token (`refresh_token_file`) gives an id
///   token, sent as the `authtoken` header and renewed before it expires or on 401. (The username/password SRP
///   login is not built: get the refresh token once, e.g. with PyEmVue's `keys.json`.)
/// - Devices: one per Vue `<id>_<gid>` with `home_power` (its Mains), one per circuit `<id>_<gid>_<channel>`
///   with `power`, named after the circuit (and `Balance`, the unmonitored rest); one per smart plug or charger
///   `<id>_<gid>` with `power` and `state` (a plug is switchable: `PUT /devices/outlet`).
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
    }

    public init(instanceID: String, options: EmporiaOptions, sink: VendorEventSink, context: VendorContext) throws(GatewayError) {
        self.instanceID = instanceID
        self.options = options
        self.sink = sink
        http = try VendorHTTP(vendorID: instanceID, settings: VendorHTTP.Settings(options.network, retry: .none), sink: sink, context: context)
        http.redactor.set("refresh_token", options.refreshToken.reveal())
        session = Self.makeSession(http: http, options: options)
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
                    let watts = channel.usage.flatMap { $0.isFinite ? ($0 * 60_000 * 10).rounded() / 10 : nil }
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
            if device.outlet != nil || device.evCharger != nil {
                let on = device.outlet?.outletOn ?? device.evCharger?.chargerOn
                let entry = Device(vendorID: instanceID, vendorDeviceID: String(device.deviceGid), name: name, type: .plug, manufacturer: "Emporia",
                                   model: device.model, swVersion: device.firmware, writableKeys: device.outlet != nil ? ["state"] : [],
                                   keys: ["state", "power"])
                devices.append(entry)
                var state: [String: StateValue] = [:]
                if let on { state["state"] = .string(on ? "ON" : "OFF") }
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
        guard command.changes.keys.allSatisfy({ $0 == "state" }), let word = command.changes["state"]?.string, word == "ON" || word == "OFF" else {
            throw GatewayError(.vendorRejected, message: "An Emporia plug only switches on and off.")
        }
        guard let gid = Int64(command.vendorDeviceID),
              let plug = known.withLock({ known in (known.tree ?? []).flatMap(\.all).first { $0.deviceGid == gid } }), let outlet = plug.outlet else {
            throw GatewayError(.vendorRejected, message: "\(command.device) is not an Emporia smart plug: only plugs can be switched here.")
        }
        var body: [String: Any] = ["deviceGid": gid, "outletOn": word == "ON"]
        body["parentDeviceGid"] = outlet.parentDeviceGid.map { $0 as Any } ?? NSNull()
        body["parentChannelNum"] = outlet.parentChannelNum.map { $0 as Any } ?? NSNull()
        var request = HTTPClientRequest(method: .put, url: base + "/devices/outlet", timeout: options.network.timeout)
        request.headers.set(name: "Content-Type", value: "application/json")
        request.body = try? JSONSerialization.data(withJSONObject: body)
        struct Answer: Decodable { var outletOn: Bool? }
        let answer = try await http.sendJSON(request, as: Answer.self, context: "Emporia outlet", use: .command, authorizer: session, deadline: command.expiresAt)
        guard let on = answer.outletOn else { throw http.classifier.unexpectedShape("it has no outletOn", context: "Emporia outlet answer") }
        known.withLock { $0.listedAt = nil }
        return CommandOutcome(confirmed: ["state": .string(on ? "ON" : "OFF")])
    }

    /// A plug's on/off state, read back from the device list (for a command whose outcome is unknown).
    public func readState(_ device: DeviceID) async throws -> [String: StateValue] {
        known.withLock { $0.listedAt = nil }
        let tree = try await tree(use: .refresh)
        guard let plug = tree.flatMap(\.all).first(where: { DeviceID(vendorInstance: instanceID, vendorDeviceID: String($0.deviceGid)) == device }),
              let on = plug.outlet?.outletOn ?? plug.evCharger?.chargerOn else { return [:] }
        return ["state": .string(on ? "ON" : "OFF")]
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
        }
        return tree
    }

    private func get<T: Decodable>(_ path: String, _ type: T.Type, context: String, use: QuotaScheduler.Use) async throws(GatewayError) -> T {
        var request = HTTPClientRequest(url: base + path, timeout: options.network.timeout)
        request.headers.set(name: "Accept", value: "application/json")
        return try await http.sendJSON(request, as: type, context: "Emporia \(context)", use: use, authorizer: session)
    }

    /// Cognito's `REFRESH_TOKEN_AUTH`: the refresh token gives an id token (an hour), renewed at 90 % of its life.
    static func makeSession(http: VendorHTTP, options: EmporiaOptions) -> LoginSession {
        LoginSession(time: http.time) { () async throws(GatewayError) -> SessionCredentials in
            var request = HTTPClientRequest(method: .post, url: options.authURL, timeout: options.network.timeout)
            request.headers.set(name: "Content-Type", value: "application/x-amz-json-1.1")
            request.headers.set(name: "X-Amz-Target", value: "AWSCognitoIdentityProviderService.InitiateAuth")
            let body: [String: Any] = [
                "AuthFlow": "REFRESH_TOKEN_AUTH", "ClientId": options.clientID,
                "AuthParameters": ["REFRESH_TOKEN": options.refreshToken.reveal()],
            ]
            request.body = try? JSONSerialization.data(withJSONObject: body)
            do throws(GatewayError) {
                let answer = try await http.sendJSON(request, as: WireCognito.self, context: "Emporia login (Cognito)", use: .refresh)
                guard let result = answer.AuthenticationResult else {
                    throw GatewayError(.authFailed, message: "Cognito gave no tokens for the refresh token.")
                }
                http.redactor.set("id_token", result.IdToken)
                return SessionCredentials(headers: [(name: "authtoken", value: result.IdToken)], lifetime: result.ExpiresIn ?? 3600)
            } catch {
                // Cognito answers 400 NotAuthorizedException for a refresh token that expired or was revoked.
                guard error.code == .authFailed || error.code == .badRequest || error.requiresReauthentication else { throw error }
                var refused = error
                refused.code = .authFailed
                refused.requiresReauthentication = false
                refused.message = "Emporia's sign-in (Cognito) refused the refresh token (HTTP \(error.httpStatus ?? 400))."
                refused.suggestion = "Put a current refresh token in refresh_token_file (it ends when the password changes or the account signs out everywhere)."
                http.holdOff(after: refused)
                throw refused
            }
        }
    }
}
