import GatewayModel

/// The Envoy's responses → the gateway's keys, taking values from the source pyenphase takes them from, so a
/// user switching from Home Assistant's Enphase integration sees the same numbers:
/// - solar: `production.json`'s `eim` production entry when a production CT is enabled (`/ivp/meters`),
///   otherwise `/api/v1/production` (the inverters). Negative night-time values are real and kept.
/// - with consumption CTs: `total-consumption` → `home_power`/`home_energy`; `net-consumption` → `grid_power`
///   (+ import / − export), and its meter's delivered/received energy (`/ivp/meters/readings`) →
///   `grid_import_energy`/`grid_export_energy`.
/// - batteries: `battery_power` = an AC Battery's `wNow` (production.json `storage`) plus the IQ Batteries'
///   `real_power_mw` (`/ivp/ensemble/power`), + discharge; `battery_level` from the source pyenphase trusts for
///   the kinds of battery there are: IQ Batteries and AC Batteries → `/ivp/ensemble/secctrl`'s `agg_soc` (all of
///   them together); IQ Batteries only → secctrl's `ENC_agg_soc`; AC Batteries only → production.json's
///   `percentFull` (secctrl's `agg_soc` is 0 on such a gateway). An AC Battery entry counts only with
///   `activeCount` > 0 and a `percentFull` (pyenphase ignores one without); IQ Batteries are there when
///   `/ivp/ensemble/power` lists any (on every pyenphase recording, exactly when its inventory has ENCHARGE units).
/// - voltage and frequency: the grid-side (net-consumption) meter's reading, else the production meter's; on a
///   multi-phase supply (`/ivp/meters` `phaseCount` > 1) `voltage_l1`… per phase instead of the meter's sum.
/// - per phase (more than one phase): the same keys with `_l1`, `_l2`, `_l3` from production.json's `lines`
///   and the grid meter's `channels`, as pyenphase's phase sensors.
enum EnphaseMapping {
    struct Reading: Sendable {
        var production: WireProductionJSON?
        var v1: WireV1Production?
        var meters: [WireMeterConfig]?
        var readings: [WireMeterReading]?
        var secctrl: WireSecCtrl?
        var ensemblePower: WireEnsemblePower?
        /// `/info`'s `software` (`D8.3.5433`).
        var firmware: String?
    }

    /// `D8.3.5433` → [8, 3, 5433].
    static func version(_ firmware: String?) -> [Int] {
        (firmware ?? "").drop { !$0.isNumber }.split(separator: ".").map { Int($0.prefix { $0.isNumber }) ?? 0 }
    }

    static func enabledMeter(_ type: String, in meters: [WireMeterConfig]?) -> WireMeterConfig? {
        meters?.first { $0.measurementType == type && $0.state == "enabled" }
    }

    static func state(_ reading: Reading) -> [String: StateValue] {
        var values: [String: StateValue] = [:]
        func set(_ key: String, _ value: Double?, scale: Double = 1, places: Int = 3) {
            guard let value, value.isFinite else { return }
            values[key] = .number((value * scale).rounded(places: places))
        }
        let phases = (reading.meters ?? []).filter { $0.state == "enabled" }.map { $0.phaseCount ?? 1 }.max() ?? 1
        /// `<key>_l1`… from an entry's `lines`, only where the supply has more than one phase.
        func setLines(_ entry: WireProductionJSON.Entry, power: String, energy: String?) {
            guard phases > 1, let lines = entry.lines else { return }
            for (index, line) in lines.prefix(phases).enumerated() {
                set("\(power)_l\(index + 1)", line.wNow)
                if let energy { set("\(energy)_l\(index + 1)", line.whLifetime, scale: 0.001) }
            }
        }
        let eim = reading.production?.production?.first { $0.type == "eim" && $0.measurementType == "production" && ($0.activeCount ?? 0) > 0 }
        if let eim, enabledMeter("production", in: reading.meters) != nil || reading.meters == nil {
            set("solar_power", eim.wNow)
            set("solar_energy", eim.whLifetime, scale: 0.001)
            setLines(eim, power: "solar_power", energy: "solar_energy")
        } else if let v1 = reading.v1 {
            set("solar_power", v1.wattsNow)
            set("solar_energy", v1.wattHoursLifetime, scale: 0.001)
        }
        let consumption = reading.production?.consumption ?? []
        if var total = consumption.first(where: { $0.type == "eim" && $0.measurementType == "total-consumption" && ($0.activeCount ?? 0) > 0 }) {
            if let net = consumption.first(where: { $0.type == "eim" && $0.measurementType == "net-consumption" }), let eim {
                total = repairedTotal(total, net: net, production: eim, firmware: reading.firmware)
            }
            set("home_power", total.wNow)
            set("home_energy", total.whLifetime, scale: 0.001)
            setLines(total, power: "home_power", energy: "home_energy")
        }
        if let net = consumption.first(where: { $0.type == "eim" && $0.measurementType == "net-consumption" && ($0.activeCount ?? 0) > 0 }) {
            set("grid_power", net.wNow)
            setLines(net, power: "grid_power", energy: nil)
            if let meter = enabledMeter("net-consumption", in: reading.meters), let readings = reading.readings?.first(where: { $0.eid == meter.eid }) {
                set("grid_import_energy", readings.actEnergyDlvd, scale: 0.001)
                set("grid_export_energy", readings.actEnergyRcvd, scale: 0.001)
                if phases > 1 {
                    for (index, channel) in (readings.channels ?? []).prefix(phases).enumerated() {
                        set("grid_import_energy_l\(index + 1)", channel.actEnergyDlvd, scale: 0.001)
                        set("grid_export_energy_l\(index + 1)", channel.actEnergyRcvd, scale: 0.001)
                    }
                }
            }
        }
        // The supply as the grid-side meter sees it, else as the production meter does.
        let supply = ["net-consumption", "production"].lazy.compactMap { type in
            enabledMeter(type, in: reading.meters).flatMap { meter in reading.readings?.first { $0.eid == meter.eid } }
        }.first
        if let supply {
            set("frequency", supply.freq)
            if phases > 1 {
                for (index, channel) in (supply.channels ?? []).prefix(phases).enumerated() { set("voltage_l\(index + 1)", channel.voltage) }
            } else {
                set("voltage", supply.voltage)
            }
        }
        // Batteries: AC Batteries in production.json, IQ Batteries in /ivp/ensemble/power; the level of all of
        // them together is secctrl's `agg_soc` (what the Enphase app and Home Assistant show) when there is any.
        let acb = reading.production?.storage?.first { $0.type == "acb" && ($0.activeCount ?? 0) > 0 && $0.percentFull != nil }
        let iqBatteries = reading.ensemblePower?.devices ?? []
        let iq = iqBatteries.compactMap(\.realPowerMilliwatts)
        if acb != nil || !iqBatteries.isEmpty {
            set("battery_power", (acb?.wNow ?? 0) + iq.reduce(0, +) / 1000, places: 1)
        }
        switch (iqBatteries.isEmpty, acb) {
        case (false, .some): set("battery_level", reading.secctrl?.aggSoc, places: 1)
        case (false, nil): set("battery_level", reading.secctrl?.enchargeAggSoc ?? reading.secctrl?.aggSoc, places: 1)
        case (true, let acb?): set("battery_level", acb.percentFull, places: 1)
        case (true, nil): break
        }
        return values
    }

    /// From firmware 8.3.5433 the Envoy copies net-consumption into total-consumption; where the two are
    /// identical, total = net + production, as pyenphase repairs it (and per phase likewise).
    static func repairedTotal(
        _ total: WireProductionJSON.Entry, net: WireProductionJSON.Entry, production: WireProductionJSON.Entry, firmware: String?
    ) -> WireProductionJSON.Entry {
        if version(firmware).lexicographicallyPrecedes([8, 3, 5433]) { return total }
        func repaired(_ total: WireProductionJSON.Line, _ net: WireProductionJSON.Line, _ production: WireProductionJSON.Line) -> WireProductionJSON.Line {
            guard total.wNow == net.wNow, total.whLifetime == net.whLifetime else { return total }
            return WireProductionJSON.Line(wNow: sum(net.wNow, production.wNow), whLifetime: sum(net.whLifetime, production.whLifetime))
        }
        func sum(_ a: Double?, _ b: Double?) -> Double? { a.flatMap { a in b.map { a + $0 } } }
        var fixed = total
        let whole = repaired(.init(wNow: total.wNow, whLifetime: total.whLifetime), .init(wNow: net.wNow, whLifetime: net.whLifetime),
                             .init(wNow: production.wNow, whLifetime: production.whLifetime))
        fixed.wNow = whole.wNow
        fixed.whLifetime = whole.whLifetime
        if let lines = total.lines, let netLines = net.lines, let productionLines = production.lines {
            fixed.lines = lines.indices.map { index in
                index < netLines.count && index < productionLines.count ? repaired(lines[index], netLines[index], productionLines[index]) : lines[index]
            }
        }
        return fixed
    }

    static func device(vendorID: String, info: EnphaseInfo, keys: [String]) -> Device {
        Device(
            vendorID: vendorID, vendorDeviceID: info.serial, name: "Envoy \(info.serial)", type: .energyMeter, manufacturer: "Enphase",
            model: "IQ Gateway", swVersion: info.firmware, serialNumber: info.serial, writableKeys: [], keys: keys
        )
    }
}
