import GatewayModel

/// The Envoy's responses → the gateway's keys, taking values from the source pyenphase takes them from, so a
/// user switching from Home Assistant's Enphase integration sees the same numbers:
/// - solar: `production.json`'s `eim` production entry when a production CT is enabled (`/ivp/meters`),
///   otherwise `/api/v1/production` (the inverters). Negative night-time values are real and kept.
/// - with consumption CTs: `total-consumption` → `home_power`/`home_energy`; `net-consumption` → `grid_power`
///   (+ import / − export), and its meter's delivered/received energy (`/ivp/meters/readings`) →
///   `grid_import_energy`/`grid_export_energy`.
/// - batteries: `battery_power` = an AC Battery's `wNow` (production.json `storage`) plus the IQ Batteries'
///   `real_power_mw` (`/ivp/ensemble/power`), + discharge; `battery_level` = `/ivp/ensemble/secctrl`'s `agg_soc`
///   (all batteries together) when it has capacity, else the AC Battery's `percentFull`.
enum EnphaseMapping {
    struct Reading: Sendable {
        var production: WireProductionJSON?
        var v1: WireV1Production?
        var meters: [WireMeterConfig]?
        var readings: [WireMeterReading]?
        var secctrl: WireSecCtrl?
        var ensemblePower: WireEnsemblePower?
    }

    static func enabledMeter(_ type: String, in meters: [WireMeterConfig]?) -> WireMeterConfig? {
        meters?.first { $0.measurementType == type && $0.state == "enabled" }
    }

    static func state(_ reading: Reading) -> [String: StateValue] {
        var values: [String: StateValue] = [:]
        func set(_ key: String, _ value: Double?, scale: Double = 1, places: Double = 1000) {
            guard let value, value.isFinite else { return }
            values[key] = .number((value * scale * places).rounded() / places)
        }
        let eim = reading.production?.production?.first { $0.type == "eim" && $0.measurementType == "production" && ($0.activeCount ?? 0) > 0 }
        if let eim, enabledMeter("production", in: reading.meters) != nil || reading.meters == nil {
            set("solar_power", eim.wNow)
            set("solar_energy", eim.whLifetime, scale: 0.001)
        } else if let v1 = reading.v1 {
            set("solar_power", v1.wattsNow)
            set("solar_energy", v1.wattHoursLifetime, scale: 0.001)
        }
        let consumption = reading.production?.consumption ?? []
        if let total = consumption.first(where: { $0.type == "eim" && $0.measurementType == "total-consumption" && ($0.activeCount ?? 0) > 0 }) {
            set("home_power", total.wNow)
            set("home_energy", total.whLifetime, scale: 0.001)
        }
        if let net = consumption.first(where: { $0.type == "eim" && $0.measurementType == "net-consumption" && ($0.activeCount ?? 0) > 0 }) {
            set("grid_power", net.wNow)
            if let meter = enabledMeter("net-consumption", in: reading.meters), let readings = reading.readings?.first(where: { $0.eid == meter.eid }) {
                set("grid_import_energy", readings.actEnergyDlvd, scale: 0.001)
                set("grid_export_energy", readings.actEnergyRcvd, scale: 0.001)
            }
        }
        // Batteries: AC Batteries in production.json, IQ Batteries in /ivp/ensemble/power; the level of all of
        // them together is secctrl's `agg_soc` (what the Enphase app and Home Assistant show) when there is any.
        let acb = reading.production?.storage?.first { $0.type == "acb" && ($0.activeCount ?? 0) > 0 }
        let iq = (reading.ensemblePower?.devices ?? []).compactMap(\.realPowerMilliwatts)
        if acb != nil || !iq.isEmpty {
            set("battery_power", (acb?.wNow ?? 0) + iq.reduce(0, +) / 1000, places: 10)
        }
        if let secctrl = reading.secctrl, (secctrl.maxEnergy ?? 0) > 0, let level = secctrl.aggSoc {
            set("battery_level", level, places: 10)
        } else if let acb {
            set("battery_level", acb.percentFull, places: 10)
        }
        return values
    }

    static func device(vendorID: String, info: EnphaseInfo, keys: [String]) -> Device {
        Device(
            vendorID: vendorID, vendorDeviceID: info.serial, name: "Envoy \(info.serial)", type: .energyMeter, manufacturer: "Enphase",
            model: "IQ Gateway", swVersion: info.firmware, serialNumber: info.serial, writableKeys: [], keys: keys
        )
    }
}
