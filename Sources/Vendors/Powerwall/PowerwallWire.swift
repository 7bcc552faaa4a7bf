/// The Tesla Backup Gateway's local JSON, as served by firmware 1.x–25.x (and the Powerwall 3's three
/// endpoints). Every field is optional: firmwares add and drop fields, and a missing one must not lose the rest.
struct WireMeter: Decodable, Sendable {
    var instantPower: Double?
    var energyExported: Double?
    var energyImported: Double?
    var frequency: Double?
    var instantAverageVoltage: Double?

    enum CodingKeys: String, CodingKey {
        case instantPower = "instant_power"
        case energyExported = "energy_exported"
        case energyImported = "energy_imported"
        case frequency
        case instantAverageVoltage = "instant_average_voltage"
    }
}

/// `/api/meters/aggregates`.
struct WireAggregates: Decodable, Sendable {
    var site: WireMeter?
    var battery: WireMeter?
    var load: WireMeter?
    var solar: WireMeter?
}

/// `/api/system_status/soe`.
struct WireStateOfEnergy: Decodable, Sendable {
    var percentage: Double?
}

/// `/api/system_status/grid_status`.
struct WireGridStatus: Decodable, Sendable {
    var gridStatus: String?

    enum CodingKeys: String, CodingKey {
        case gridStatus = "grid_status"
    }
}

/// `/api/operation` (not served by a Powerwall 3 on the wired LAN).
struct WireOperation: Codable, Sendable {
    var realMode: String?
    var backupReservePercent: Double?

    enum CodingKeys: String, CodingKey {
        case realMode = "real_mode"
        case backupReservePercent = "backup_reserve_percent"
    }
}

/// `/api/site_info` (name) and `/api/status` (firmware), read once for the device description.
struct WireSiteInfo: Decodable, Sendable {
    var siteName: String?

    enum CodingKeys: String, CodingKey {
        case siteName = "site_name"
    }
}

struct WireStatus: Decodable, Sendable {
    var version: String?
}

/// `POST /api/login/Basic`.
struct WireLoginRequest: Encodable, Sendable {
    var username = "customer"
    var password: String
    var email: String
    var forceSmOff = false

    enum CodingKeys: String, CodingKey {
        case username, password, email
        case forceSmOff = "force_sm_off"
    }
}

struct WireLogin: Decodable, Sendable {
    var token: String?
}
