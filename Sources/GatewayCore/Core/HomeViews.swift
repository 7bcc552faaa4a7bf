#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel

/// Views of the whole home that no single vendor gives.
package enum HomeViews {
    package static let powerKeys = ["solar_power", "grid_power", "battery_power", "home_power", "water_flow"]
    package static let counterKeys = ["solar_energy", "grid_import_energy", "grid_export_energy", "battery_charge_energy",
                              "battery_discharge_energy", "home_energy", "water_volume", "gas_volume"]
    package static let energyKeys: Set<String> = Set(powerKeys + counterKeys + ["battery_level"])
    package static let environmentKeys: Set<String> = ["temperature", "humidity", "co2", "voc", "voc_ppb", "pm25", "pm10", "illuminance", "noise", "dew_point", "score"]

    /// Sums over every energy device. Grid is + import / − export, battery + discharge / − charge;
    /// home consumption is derived from the flows when no device reports it.
    /// `allowed`: per vendor, the keys its devices may add (`energy_home`; absent: all).
    /// `counters`: the accumulated counter totals (`EnergyAccumulator`), which replace the sums of the devices'
    /// counter levels; nil sums the levels (a view of the moment, as the status page's history plot takes it).
    package static func energy(devices: [DeviceID: Device], states: [DeviceID: DeviceState], allowed: [String: Set<String>] = [:],
                       counters: [String: Double]? = nil) -> JSON? {
        var sums: [String: Double] = [:]
        var levels: [Double] = []
        var sources: [String] = []
        var newest: Date?
        for (id, device) in devices.sorted(by: { $0.key < $1.key }) where device.keys.contains(where: energyKeys.contains) {
            guard let state = states[id] else { continue }
            let permitted = allowed[device.vendorID]
            var contributed = false
            for key in powerKeys + counterKeys where permitted?.contains(key) ?? true {
                if let value = state[key]?.number {
                    sums[key, default: 0] += value
                    contributed = true
                }
            }
            if permitted?.contains("battery_level") ?? true, let level = state["battery_level"]?.number {
                levels.append(level)
                contributed = true
            }
            if contributed {
                sources.append(id.rawValue)
                if let seen = state.lastSeen, newest.map({ seen > $0 }) ?? true { newest = seen }
            }
        }
        if let counters {
            for key in counterKeys { sums[key] = counters[key] }
        }
        guard !sources.isEmpty || !(counters ?? [:]).isEmpty else { return nil }
        if sums["home_power"] == nil, sums["solar_power"] != nil || sums["grid_power"] != nil || sums["battery_power"] != nil {
            sums["home_power"] = (sums["solar_power"] ?? 0) + (sums["grid_power"] ?? 0) + (sums["battery_power"] ?? 0)
        }
        var object: [String: JSON] = sums.mapValues(JSON.number)
        if !levels.isEmpty { object["battery_level"] = .number(levels.reduce(0, +) / Double(levels.count)) }
        object["devices"] = .array(sources.map(JSON.string))
        if let newest { object["last_seen"] = .string(ISOTime.format(newest)) }
        return .object(object)
    }

    /// Averages per room over every device that reports the reading.
    package static func environment(room: String, devices: [DeviceID: Device], states: [DeviceID: DeviceState]) -> JSON? {
        var sums: [String: (Double, Int)] = [:]
        var sources: [String] = []
        var newest: Date?
        var roomName: String?
        for (id, device) in devices.sorted(by: { $0.key < $1.key }) where device.roomSlug == room {
            guard let state = states[id] else { continue }
            var contributed = false
            for key in environmentKeys {
                guard let value = state[key]?.number else { continue }
                let (sum, count) = sums[key] ?? (0, 0)
                sums[key] = (sum + value, count + 1)
                contributed = true
            }
            if contributed {
                sources.append(id.rawValue)
                roomName = device.room
                if let seen = state.lastSeen, newest.map({ seen > $0 }) ?? true { newest = seen }
            }
        }
        guard !sources.isEmpty else { return nil }
        var object: [String: JSON] = sums.mapValues { .number(($0.0 / Double($0.1) * 10).rounded() / 10) }
        object["room"] = .optional(roomName)
        object["devices"] = .array(sources.map(JSON.string))
        if let newest { object["last_seen"] = .string(ISOTime.format(newest)) }
        return .object(object)
    }
}
