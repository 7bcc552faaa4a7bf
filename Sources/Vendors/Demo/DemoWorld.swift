#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import Resilience

/// The simulated house behind `DemoVendor`. Plain value state, guarded by the vendor's mutex.
struct DemoWorld {
    private(set) var devices: [Device] = []
    private var states: [DeviceID: [String: StateValue]] = [:]
    private var vendorIDs: [DeviceID: String] = [:]
    private var rng: SplitMix64
    private var lastDrift: Date

    init(instanceID: String, extraDevices: Int, seed: UInt64, start: Date) {
        rng = SplitMix64(seed: seed)
        lastDrift = start
        func add(_ device: Device, _ values: [String: StateValue]) {
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
            ["state": .string("ON"), "power": .number(62.5), "energy": .number(12.34)])
        add(Device(vendorID: instanceID, vendorDeviceID: "energy", name: "Demo Home Energy", type: .energyMeter, manufacturer: maker,
                   model: "Solar + battery system", room: "Garage",
                   keys: ["solar_power", "grid_power", "battery_power", "home_power", "battery_level",
                          "solar_energy", "grid_import_energy", "grid_export_energy",
                          "battery_charge_energy", "battery_discharge_energy", "home_energy"]),
            ["solar_power": .number(2400), "grid_power": .number(-300), "battery_power": .number(-1200), "home_power": .number(900),
             "battery_level": .number(64), "solar_energy": .number(4821.2), "grid_import_energy": .number(3120.7),
             "grid_export_energy": .number(1710.4), "battery_charge_energy": .number(905.1),
             "battery_discharge_energy": .number(850.6), "home_energy": .number(6205.8)])
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
                    ["state": .string("ON"), "power": .number(40 + Double(index % 50)), "energy": .number(1 + Double(index))])
            } else {
                add(Device(vendorID: instanceID, vendorDeviceID: suffix, name: "Simulated Sensor \(index + 1)", type: .sensor,
                           manufacturer: maker, model: "Simulated sensor", room: room, keys: ["temperature", "humidity"]),
                    ["temperature": .number(19 + Double(index % 5)), "humidity": .number(40 + Double(index % 10))])
            }
        }
    }

    func snapshot() -> [DeviceID: [String: StateValue]] { states }

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
                driftEnergySystem(&values, hours: hours)
            }
            if device.type == .thermostat {
                driftThermostat(&values)
            }
            states[device.id] = values
            changed.append((device.id, values))
        }
        return changed
    }

    /// Keeps the flows consistent: home = solar + grid + battery (grid + import, battery + discharge).
    private mutating func driftEnergySystem(_ values: inout [String: StateValue], hours: Double) {
        let solar = clamp((values["solar_power"]?.number ?? 0) + jitter(80), 0, 6000)
        let home = clamp((values["home_power"]?.number ?? 0) + jitter(40), 150, 8000)
        var level = values["battery_level"]?.number ?? 50
        // The battery soaks up surplus solar and covers deficits, within 3 kW and its charge.
        var battery = clamp(home - solar, -3000, 3000)
        if level >= 100, battery < 0 { battery = 0 }
        if level <= 5, battery > 0 { battery = 0 }
        let grid = home - solar - battery
        level = clamp(level - battery * hours / 13.5 / 10, 0, 100)
        func add(_ key: String, _ kWh: Double) {
            values[key] = .number((values[key]?.number ?? 0) + max(0, kWh))
        }
        add("solar_energy", solar / 1000 * hours)
        add("home_energy", home / 1000 * hours)
        add("grid_import_energy", max(0, grid) / 1000 * hours)
        add("grid_export_energy", max(0, -grid) / 1000 * hours)
        add("battery_discharge_energy", max(0, battery) / 1000 * hours)
        add("battery_charge_energy", max(0, -battery) / 1000 * hours)
        values["solar_power"] = .number(solar.rounded())
        values["home_power"] = .number(home.rounded())
        values["battery_power"] = .number(battery.rounded())
        values["grid_power"] = .number(grid.rounded())
        values["battery_level"] = .number((level * 10).rounded() / 10)
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
