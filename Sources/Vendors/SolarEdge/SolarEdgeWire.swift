/// SolarEdge Monitoring API v2 JSON (`https://monitoringapi.solaredge.com/v2`). Values may be `null` (future
/// slots of today, meters a site does not have).
struct WireSites: Decodable, Sendable {
    struct List: Decodable, Sendable {
        var site: [WireSite]?
    }

    var sites: List?
}

struct WireSite: Decodable, Sendable {
    var siteId: Int64
    var name: String?
    var peakPower: Double?
}

/// `/sites/{id}/energy?resolution=QUARTER_HOUR`: today's production per quarter hour, in Wh.
struct WireEnergy: Decodable, Sendable {
    struct Value: Decodable, Sendable {
        var timestamp: String
        var value: Double?
    }

    var unit: String?
    var resolution: String?
    var values: [Value]?
}

/// `/sites/{id}/overview`: today's energy so far, in Wh, and where it went. The flows are `null` on a site
/// without a consumption meter (and the storage ones without a battery).
struct WireOverview: Decodable, Sendable {
    struct Production: Decodable, Sendable {
        var total: Double?
        var unit: String?
        var toSelfConsumption: Double?
        var toStorage: Double?
        var toGrid: Double?
    }

    struct Consumption: Decodable, Sendable {
        var total: Double?
        var unit: String?
        var fromPv: Double?
        var fromStorage: Double?
        var fromGrid: Double?
    }

    var siteId: Int64?
    var production: Production?
    var consumption: Consumption?

    /// Today's counters in kWh by key; only those the site measures.
    var counters: [String: Double] {
        func kWh(_ value: Double?, unit: String?) -> Double? {
            guard let value, value.isFinite, value >= 0 else { return nil }
            return unit?.uppercased() == "KWH" ? value : value / 1000
        }
        let produced = production?.unit, consumed = consumption?.unit
        let pairs: [(String, Double?)] = [
            ("home_energy", kWh(consumption?.total, unit: consumed)),
            ("grid_import_energy", kWh(consumption?.fromGrid, unit: consumed)),
            ("grid_export_energy", kWh(production?.toGrid, unit: produced)),
            ("battery_charge_energy", kWh(production?.toStorage, unit: produced)),
            ("battery_discharge_energy", kWh(consumption?.fromStorage, unit: consumed)),
        ]
        var counters: [String: Double] = [:]
        for (key, value) in pairs { if let value { counters[key] = value } }
        return counters
    }
}
