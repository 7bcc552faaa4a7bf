import Foundation
import GatewayModel
import Synchronization

/// A unit-test vendor whose behaviour each test scripts: commands can be held at a gate, or be "late"
/// (the vendor times out but applies the request afterwards, like a slow backend that keeps working on
/// a request the client gave up on). Integration tests use the real simulators instead.
final class ScriptedVendor: Vendor {
    enum Mode: Sendable {
        /// Applies at once and confirms.
        case immediate
        /// Waits until `release()` before applying.
        case gated
        /// Times out after `timeout` (outcome unknown) and applies the change `applyAfter` after the request arrived.
        case late(timeout: Duration, applyAfter: Duration)
        /// Refuses at once with this error (a vendor that is down: the request surely did not reach it).
        case failing(GatewayError)
    }

    struct Script {
        var mode: Mode = .immediate
        var values: [DeviceID: [String: StateValue]] = [:]
        /// Every command as it reached the vendor, in order.
        var executed: [DeviceCommand] = []
        var reads = 0
        var refreshes = 0
        var gate: [CheckedContinuation<Void, Never>] = []
        var released = false
        var listRefresh = false
    }

    let instanceID: String
    let typeName = "scripted"
    let devices: [Device]
    let script = Mutex(Script())
    /// How long a refresh takes (so concurrent `/get`s overlap).
    let refreshDuration: Duration
    /// One refresh reads every device (a list endpoint).
    var refreshesAllDevices: Bool { script.withLock { $0.listRefresh } }

    init(instanceID: String = "sv", devices: [Device]? = nil, refreshDuration: Duration = .milliseconds(50)) {
        self.instanceID = instanceID
        self.refreshDuration = refreshDuration
        self.devices = devices ?? [
            Device(vendorID: instanceID, vendorDeviceID: "plug", name: "Dimmer", type: .light, keys: ["state", "brightness"]),
            Device(vendorID: instanceID, vendorDeviceID: "lock", name: "Lock", type: .lock, keys: ["lock"]),
        ]
        script.withLock { script in
            for device in self.devices {
                script.values[device.id] = device.keys.contains("lock") ? ["lock": .string("LOCKED")] : ["state": .string("ON"), "brightness": .number(10)]
            }
        }
    }

    func id(_ name: String) -> DeviceID { DeviceID(vendorInstance: instanceID, vendorDeviceID: name) }

    var executed: [DeviceCommand] { script.withLock { $0.executed } }
    var reads: Int { script.withLock { $0.reads } }
    var refreshes: Int { script.withLock { $0.refreshes } }
    func values(_ name: String) -> [String: StateValue] { script.withLock { $0.values[id(name)] ?? [:] } }
    func setMode(_ mode: Mode) { script.withLock { $0.mode = mode } }

    func release() {
        let waiting = script.withLock { script -> [CheckedContinuation<Void, Never>] in
            script.released = true
            defer { script.gate.removeAll() }
            return script.gate
        }
        waiting.forEach { $0.resume() }
    }

    func run() async throws {}

    func execute(_ command: DeviceCommand) async throws -> CommandOutcome {
        let mode = script.withLock { script -> Mode in
            script.executed.append(command)
            return script.mode
        }
        switch mode {
        case .immediate:
            return CommandOutcome(confirmed: apply(command))
        case .gated:
            await withCheckedContinuation { continuation in
                let now = script.withLock { script -> Bool in
                    if script.released { return true }
                    script.gate.append(continuation)
                    return false
                }
                if now { continuation.resume() }
            }
            return CommandOutcome(confirmed: apply(command))
        case .late(let timeout, let applyAfter):
            Task {
                try? await Task.sleep(for: applyAfter)
                _ = self.apply(command)
            }
            try await Task.sleep(for: timeout)
            var error = GatewayError.vendorTimeout(vendor: instanceID, after: timeout)
            error.outcomeUnknown = true
            throw error
        case .failing(let error):
            throw error
        }
    }

    @discardableResult
    private func apply(_ command: DeviceCommand) -> [String: StateValue] {
        script.withLock { script in
            var values = script.values[command.device] ?? [:]
            for (key, value) in command.changes {
                if key == "lock", case .string(let word) = value {
                    values[key] = .string(word == "UNLOCK" ? "UNLOCKED" : "LOCKED")
                } else {
                    values[key] = value
                }
            }
            script.values[command.device] = values
            return values
        }
    }

    func readState(_ device: DeviceID) async throws -> [String: StateValue] {
        script.withLock { script in
            script.reads += 1
            return script.values[device] ?? [:]
        }
    }

    func refresh(_ device: DeviceID) async throws {
        script.withLock { $0.refreshes += 1 }
        try await Task.sleep(for: refreshDuration)
    }
}
