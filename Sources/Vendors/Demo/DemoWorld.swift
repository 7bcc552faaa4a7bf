#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif
import GatewayModel
import VendorKit
import Resilience

/// The simulated house behind `DemoVendor`. Plain value state, guarded by the vendor's mutex.
///
/// The solar + battery system is physical: solar follows the sun by local time of day (zero at night,
/// a bell over the day, passing clouds), the home load has a daily profile, the battery charges from
/// surplus solar and covers deficits within its power and capacity, and the grid balances the rest:
/// `home_power = solar_power + grid_power + battery_power` (grid + import / − export, battery + discharge / − charge).
struct DemoWorld {
    /// The physical limits of the demo's energy system (W, Wh, %).
    enum Limits {
        static let solarPeak = 5000.0
        static let homeMax = 6000.0
        static let batteryMaxPower = 3000.0
        static let batteryCapacity = 10_000.0
        static let batteryReserve = 10.0
        static let plugMax = 2500.0
        static let sunrise = 6.5
        static let sunset = 19.5
    }

    /// Counters start, without a cache, from `base + the most their flow can add per hour × hours since
    /// this epoch` (2026-11-01T00:00:00Z). A run can never add more than that, so a start without a cache
    /// is never lower than where an earlier run ended: counters never go backwards across restarts.
    static let counterEpoch = Date(timeIntervalSince1970: 1_793_491_200)
    static let counterBase: [String: (base: Double, maxKW: Double)] = [
        "solar_energy": (4821.2, Limits.solarPeak / 1000), "home_energy": (6205.8, Limits.homeMax / 1000),
        "grid_import_energy": (3120.7, Limits.homeMax / 1000), "grid_export_energy": (1710.4, Limits.solarPeak / 1000),
        "battery_charge_energy": (905.1, Limits.batteryMaxPower / 1000), "battery_discharge_energy": (850.6, Limits.batteryMaxPower / 1000),
    ]

    static func counterStart(_ key: String, at date: Date) -> Double {
        let hours = max(0, date.timeIntervalSince(counterEpoch)) / 3600
        guard let entry = counterBase[key] else { return 0 }
        return ((entry.base + entry.maxKW * hours) * 1000).rounded(.down) / 1000
    }

    static func plugEnergyStart(_ base: Double, at date: Date) -> Double {
        let hours = max(0, date.timeIntervalSince(counterEpoch)) / 3600
        return ((base + Limits.plugMax / 1000 * hours) * 1000).rounded(.down) / 1000
    }

    /// The energy system's state at full precision (the published values are rounded).
    struct Flows {
        var level = 64.0
        var cloud = 0.85
        var counters: [String: Double] = [:]
    }

    private(set) var devices: [Device] = []
    private var states: [DeviceID: [String: StateValue]] = [:]
    private var vendorIDs: [DeviceID: String] = [:]
    private var rng: SplitMix64
    private var lastDrift: Date
    private var flows = Flows()
    private let timeZone: LocalZone

    init(instanceID: String, extraDevices: Int, seed: UInt64, start: Date, timeZone: LocalZone = .current) {
        rng = SplitMix64(seed: seed)
        lastDrift = start
        self.timeZone = timeZone
        for key in Self.counterBase.keys { flows.counters[key] = Self.counterStart(key, at: start) }
        func add(_ device: Device, _ values: [String: StateValue]) {
            var device = device
            // What a real vendor reports in device info (Home Assistant shows both).
            device.swVersion = "1.4.2"
            device.serialNumber = "LBSD-" + device.vendorDeviceID.uppercased()
            devices.append(device)
            states[device.id] = values
            vendorIDs[device.id] = device.vendorDeviceID
        }
        let maker = "LBS Demo"
        add(Device(vendorID: instanceID, vendorDeviceID: "light", name: "Demo Light", type: .light, manufacturer: maker,
                   model: "Dimmable white light", room: "Living Room", keys: ["state", "brightness", "color_temp_kelvin"]),
            ["state": .string("OFF"), "brightness": .number(80), "color_temp_kelvin": .number(3000)])
        add(Device(vendorID: instanceID, vendorDeviceID: "thermostat", name: "Demo Thermostat", type: .thermostat, manufacturer: maker,
                   model: "Thermostat", room: "Living Room",
                   keys: ["temperature", "target_temperature", "hvac_mode", "hvac_action", "humidity"]),
            ["temperature": .number(20.5), "target_temperature": .number(21), "hvac_mode": .string("heat"),
             "hvac_action": .string("heating"), "humidity": .number(44)])
        add(Device(vendorID: instanceID, vendorDeviceID: "lock", name: "Demo Front Door Lock", type: .lock, manufacturer: maker,
                   model: "Smart lock", room: "Entrance", keys: ["lock", "battery"]),
            ["lock": .string("LOCKED"), "battery": .number(87)])
        add(Device(vendorID: instanceID, vendorDeviceID: "plug", name: "Demo Plug", type: .plug, manufacturer: maker,
                   model: "Metering plug", room: "Kitchen", keys: ["state", "power", "energy"]),
            ["state": .string("ON"), "power": .number(62.5), "energy": .number(Self.plugEnergyStart(12.34, at: start))])
        add(Device(vendorID: instanceID, vendorDeviceID: "energy", name: "Demo Home Energy", type: .energyMeter, manufacturer: maker,
                   model: "Solar + battery system", room: "Garage",
                   keys: ["solar_power", "grid_power", "battery_power", "home_power", "battery_level",
                          "solar_energy", "grid_import_energy", "grid_export_energy",
                          "battery_charge_energy", "battery_discharge_energy", "home_energy"]),
            [:])
        add(Device(vendorID: instanceID, vendorDeviceID: "air", name: "Demo Air Monitor", type: .airQuality, manufacturer: maker,
                   model: "Air quality monitor", room: "Living Room", keys: ["temperature", "humidity", "co2", "pm25", "voc"]),
            ["temperature": .number(21.2), "humidity": .number(45), "co2": .number(612), "pm25": .number(4.2), "voc": .number(180)])
        let rooms = ["Living Room", "Kitchen", "Bedroom", "Office", "Garage"]
        for index in 0..<max(0, extraDevices) {
            let suffix = "sim_" + String(index + 1)
            let room = rooms[index % rooms.count]
            if index % 2 == 0 {
                add(Device(vendorID: instanceID, vendorDeviceID: suffix, name: "Simulated Plug \(index + 1)", type: .plug,
                           manufacturer: maker, model: "Simulated plug", room: room, keys: ["state", "power", "energy"]),
                    ["state": .string("ON"), "power": .number(40 + Double(index % 50)),
                     "energy": .number(Self.plugEnergyStart(1 + Double(index), at: start))])
            } else {
                add(Device(vendorID: instanceID, vendorDeviceID: suffix, name: "Simulated Sensor \(index + 1)", type: .sensor,
                           manufacturer: maker, model: "Simulated sensor", room: room, keys: ["temperature", "humidity"]),
                    ["temperature": .number(19 + Double(index % 5)), "humidity": .number(40 + Double(index % 10))])
            }
        }
        startEnergySystem(at: start)
    }

    func snapshot() -> [DeviceID: [String: StateValue]] { states }

    /// The energy system's first readings, from the time of day at start.
    private mutating func startEnergySystem(at start: Date) {
        guard let id = energyDeviceID else { return }
        var values = states[id] ?? [:]
        driftEnergySystem(&values, at: start, hours: 0)
        states[id] = values
    }

    var energyDeviceID: DeviceID? { devices.first { $0.keys.contains("solar_power") }?.id }

    /// Continues from the cached state of an earlier run: counters and the battery level.
    mutating func restore(_ cached: [DeviceID: [String: StateValue]]) {
        for device in devices {
            guard let old = cached[device.id], var values = states[device.id] else { continue }
            for key in device.keys where StateKeys.spec(key)?.series == .counter {
                guard let number = old[key]?.number, number.isFinite, number >= 0 else { continue }
                values[key] = .number(number)
                if flows.counters[key] != nil, device.keys.contains("solar_power") { flows.counters[key] = number }
            }
            if device.keys.contains("solar_power"), let level = old["battery_level"]?.number, level.isFinite {
                flows.level = clamp(level, 0, 100)
                values["battery_level"] = .number((flows.level * 10).rounded() / 10)
            }
            states[device.id] = values
        }
    }

    private mutating func jitter(_ spread: Double) -> Double {
        Double.random(in: -spread...spread, using: &rng)
    }

    /// One simulation step: every reading moves a little; counters integrate power over the elapsed time.
    mutating func drift(at now: Date) -> [(DeviceID, [String: StateValue])] {
        let hours = max(0, now.timeIntervalSince(lastDrift)) / 3600
        lastDrift = now
        var changed: [(DeviceID, [String: StateValue])] = []
        changed.reserveCapacity(devices.count)
        for device in devices {
            guard var values = states[device.id] else { continue }
            for key in device.keys {
                guard let value = values[key]?.number else { continue }
                switch key {
                case "temperature":
                    values[key] = .number(clamp(value + jitter(0.1), 15, 30))
                case "humidity":
                    values[key] = .number(clamp(value + jitter(0.5), 20, 80))
                case "co2":
                    values[key] = .number(clamp(value + jitter(15), 400, 2000).rounded())
                case "pm25":
                    values[key] = .number(clamp(value + jitter(0.3), 0, 80))
                case "voc":
                    values[key] = .number(clamp(value + jitter(10), 20, 2000).rounded())
                case "power" where values["state"]?.string != "OFF":
                    values[key] = .number(clamp(value + jitter(3), 1, 2500))
                case "battery":
                    break
                default:
                    continue
                }
            }
            if device.keys.contains("energy"), let power = values["power"]?.number, values["state"]?.string != "OFF",
               let energy = values["energy"]?.number {
                values["energy"] = .number(energy + power / 1000 * hours)
            }
            if device.keys.contains("solar_power") {
                driftEnergySystem(&values, at: now, hours: hours)
            }
            if device.type == .thermostat {
                driftThermostat(&values)
            }
            states[device.id] = values
            changed.append((device.id, values))
        }
        return changed
    }

    /// The local hour of day (0 ..< 24) at `date`.
    func hourOfDay(_ date: Date) -> Double {
        let seconds = date.timeIntervalSince1970 + Double(timeZone.secondsFromGMT(for: date))
        let day = seconds.truncatingRemainder(dividingBy: 86_400)
        return (day < 0 ? day + 86_400 : day) / 3600
    }

    /// Clear-sky solar power: zero before sunrise and after sunset, a bell peaking at noon.
    static func clearSky(hour: Double) -> Double {
        guard hour > Limits.sunrise, hour < Limits.sunset else { return 0 }
        let phase = (hour - Limits.sunrise) / (Limits.sunset - Limits.sunrise)
        return Limits.solarPeak * pow(sin(Double.pi * phase), 1.5)
    }

    /// The home's typical load: a night base, a breakfast peak, lunch, and the evening peak.
    static func homeProfile(hour: Double) -> Double {
        func bump(_ center: Double, _ width: Double) -> Double {
            let x = (hour - center) / width
            return exp(-x * x / 2)
        }
        return 350 + 900 * bump(7.5, 1) + 300 * bump(12.5, 1.5) + 1600 * bump(19, 1.8)
    }

    /// One step of the solar + battery system over `hours` ending at `now`.
    private mutating func driftEnergySystem(_ values: inout [String: StateValue], at now: Date, hours: Double) {
        let hour = hourOfDay(now)
        // Clouds drift slowly and pull back toward a mostly sunny sky.
        flows.cloud = clamp(flows.cloud + jitter(0.04) + (0.8 - flows.cloud) * 0.02, 0.2, 1)
        let solar = (Self.clearSky(hour: hour) * flows.cloud).rounded()
        let home = clamp(Self.homeProfile(hour: hour) + jitter(60), 150, Limits.homeMax).rounded()
        // The battery takes surplus solar and covers deficits, within its power and what it holds.
        let capacityLeft = Limits.batteryCapacity * (100 - flows.level) / 100
        let available = Limits.batteryCapacity * max(0, flows.level - Limits.batteryReserve) / 100
        var battery: Double
        if solar >= home {
            let limit = hours > 0 ? capacityLeft / hours : Limits.batteryMaxPower
            battery = -min(solar - home, Limits.batteryMaxPower, limit)
        } else {
            let limit = hours > 0 ? available / hours : Limits.batteryMaxPower
            battery = min(home - solar, Limits.batteryMaxPower, limit)
        }
        // Like a real inverter, the battery follows the surplus or deficit with a small lag: a few
        // percent of it still flows through the grid.
        // `+ 0` turns a -0 into 0, so the payload never says `-0`.
        battery = (battery * Double.random(in: 0.94...0.99, using: &rng)).rounded() + 0
        let grid = home - solar - battery + 0
        flows.level = clamp(flows.level - battery * hours / Limits.batteryCapacity * 100, 0, 100)
        func add(_ key: String, _ watts: Double) {
            flows.counters[key, default: 0] += max(0, watts) / 1000 * hours
            values[key] = .number(((flows.counters[key] ?? 0) * 1000).rounded() / 1000)
        }
        add("solar_energy", solar)
        add("home_energy", home)
        add("grid_import_energy", grid)
        add("grid_export_energy", -grid)
        add("battery_discharge_energy", battery)
        add("battery_charge_energy", -battery)
        values["solar_power"] = .number(solar)
        values["home_power"] = .number(home)
        values["battery_power"] = .number(battery)
        values["grid_power"] = .number(grid)
        values["battery_level"] = .number((flows.level * 10).rounded() / 10)
    }

    private func driftThermostat(_ values: inout [String: StateValue]) {
        let mode = values["hvac_mode"]?.string ?? "off"
        let current = values["temperature"]?.number ?? 20
        let target = values["target_temperature"]?.number ?? 21
        let action: String
        switch mode {
        case "heat": action = current < target ? "heating" : "idle"
        case "cool": action = current > target ? "cooling" : "idle"
        case "auto": action = current < target - 0.5 ? "heating" : current > target + 0.5 ? "cooling" : "idle"
        default: action = "off"
        }
        values["hvac_action"] = .string(action)
        // Heating or cooling pulls the room toward the target.
        if action == "heating" { values["temperature"] = .number(((current + 0.05) * 100).rounded() / 100) }
        if action == "cooling" { values["temperature"] = .number(((current - 0.05) * 100).rounded() / 100) }
    }

    /// Applies a validated command and returns the state the device now has.
    mutating func apply(_ command: DeviceCommand) -> Result<[String: StateValue], GatewayError> {
        guard var values = states[command.device] else {
            return .failure(GatewayError.unknownDevice(command.device.rawValue))
        }
        for (key, value) in command.changes {
            switch (key, value) {
            case ("lock", .string(let word)):
                values["lock"] = .string(word == "UNLOCK" ? "UNLOCKED" : "LOCKED")
            case ("cover", .string(let word)):
                values["cover"] = .string(word == "OPEN" ? "OPEN" : word == "CLOSE" ? "CLOSED" : "STOPPED")
            case ("state", .string(let word)):
                values["state"] = .string(word)
                if values["power"] != nil {
                    values["power"] = .number(word == "OFF" ? 0 : 60)
                }
            default:
                values[key] = value
            }
        }
        states[command.device] = values
        return .success(values)
    }
}

private func clamp(_ value: Double, _ low: Double, _ high: Double) -> Double {
    min(high, max(low, value))
}
