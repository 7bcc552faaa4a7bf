import GatewayModel

/// Tesla's local JSON → the gateway's keys. Tesla's signs already match the gateway's: grid + import /
/// − export, battery + discharge / − charge. Energies come in Wh and are published in kWh.
enum PowerwallMapping {
    static let siteID = "site"
    static let powerKeys = ["solar_power", "grid_power", "battery_power", "home_power"]
    static let counterKeys = ["solar_energy", "grid_import_energy", "grid_export_energy", "battery_discharge_energy", "battery_charge_energy", "home_energy"]
    static let writableKeys: Set<String> = ["backup_reserve", "operation_mode"]

    /// What one poll read; nil for an endpoint this gateway does not serve.
    struct Reading: Sendable {
        var aggregates: WireAggregates
        var soe: WireStateOfEnergy?
        var grid: WireGridStatus?
        var operation: WireOperation?
    }

    static func state(_ reading: Reading) -> [String: StateValue] {
        var values: [String: StateValue] = [:]
        let meters = reading.aggregates
        func power(_ key: String, _ meter: WireMeter?) {
            if let watts = meter?.instantPower, watts.isFinite { values[key] = .number(round(watts, places: 1)) }
        }
        power("solar_power", meters.solar)
        power("grid_power", meters.site)
        power("battery_power", meters.battery)
        power("home_power", meters.load)
        func energy(_ key: String, _ wattHours: Double?) {
            if let wattHours, wattHours.isFinite, wattHours >= 0 { values[key] = .number(round(wattHours / 1000, places: 3)) }
        }
        energy("solar_energy", meters.solar?.energyExported)
        energy("grid_import_energy", meters.site?.energyImported)
        energy("grid_export_energy", meters.site?.energyExported)
        energy("battery_discharge_energy", meters.battery?.energyExported)
        energy("battery_charge_energy", meters.battery?.energyImported)
        energy("home_energy", meters.load?.energyImported)
        // As reported, one decimal: Tesla's app scales the level for the reserve it keeps; this does not.
        if let level = reading.soe?.percentage, level.isFinite { values["battery_level"] = .number(round(min(max(level, 0), 100), places: 1)) }
        if let status = reading.grid?.gridStatus.flatMap(gridStatus) { values["grid_status"] = .string(status) }
        if let reserve = reading.operation?.backupReservePercent, reserve.isFinite {
            values["backup_reserve"] = .number(round(min(max(reserve, 0), 100), places: 1))
        }
        if let mode = reading.operation?.realMode.flatMap(operationMode) { values["operation_mode"] = .string(mode) }
        return values
    }

    /// `SystemGridConnected` → `connected`; `SystemIslandedActive`/`Ready` → `islanded`;
    /// `SystemTransitionTo…` → `transitioning`; `SystemWaitForUser` → `waiting`.
    static func gridStatus(_ raw: String) -> String? {
        switch raw {
        case "SystemGridConnected": "connected"
        case "SystemIslandedActive", "SystemIslandedReady": "islanded"
        case "SystemWaitForUser": "waiting"
        case _ where raw.hasPrefix("SystemTransitionTo"): "transitioning"
        default: nil
        }
    }

    /// The modes the gateway shows and sets; `scheduler` and `site_control` (utility programs) are left out.
    static func operationMode(_ raw: String) -> String? {
        ["self_consumption", "autonomous", "backup"].contains(raw) ? raw : nil
    }

    /// The site device: the keys this gateway serves (a Powerwall 3 has no `/api/operation`). `settingsWritable`:
    /// false once the gateway refused a change of its operation (the settings are then read-only readings).
    static func device(vendorID: String, reading: Reading, siteName: String?, firmware: String?, settingsWritable: Bool = true) -> Device {
        let values = state(reading)
        var keys = powerKeys.filter { values[$0] != nil }
        if reading.soe != nil { keys.append("battery_level") }
        keys += counterKeys.filter { values[$0] != nil }
        if reading.grid != nil { keys.append("grid_status") }
        let served = reading.operation != nil
        if served { keys += ["backup_reserve", "operation_mode"] }
        return Device(
            vendorID: vendorID, vendorDeviceID: siteID, name: siteName.map { $0.isEmpty ? "Powerwall" : $0 } ?? "Powerwall",
            type: .energyMeter, manufacturer: "Tesla", model: "Powerwall", swVersion: firmware,
            writableKeys: served && settingsWritable ? writableKeys : [], keys: keys
        )
    }

    static func round(_ value: Double, places: Int) -> Double { value.rounded(places: places) }
}
