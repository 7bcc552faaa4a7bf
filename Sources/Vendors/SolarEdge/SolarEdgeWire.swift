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
