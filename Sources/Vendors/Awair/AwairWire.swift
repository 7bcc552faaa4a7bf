#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The Awair Home developer API (`https://developer-apis.awair.is/v1`) and the devices' Local API, as
/// python_awair's recorded cassettes show them.

/// `/users/self`: the account's tier and its daily quota per scope (`LATEST` is what polling spends).
struct WireUser: Decodable, Sendable {
    struct Permission: Decodable, Sendable {
        var scope: String
        var quota: Int?
    }

    var tier: String?
    var permissions: [Permission]?

    /// The daily quota of a scope; nil when the account does not say.
    func quota(_ scope: String) -> Int? {
        permissions?.first { $0.scope == scope }?.quota
    }
}

/// `/users/self/devices`.
struct WireDevices: Decodable, Sendable {
    struct Entry: Decodable, Sendable {
        var deviceId: Int64
        var deviceType: String
        var name: String?
        var roomType: String?
        var macAddress: String?
        var deviceUUID: String?
    }

    var devices: [Entry]?
}

/// `…/air-data/latest`: one reading of sensors as `comp`/`value` pairs and the 0–100 score.
struct WireCloudLatest: Decodable, Sendable {
    struct Reading: Decodable, Sendable {
        struct Sensor: Decodable, Sendable {
            var comp: String
            var value: Double?
        }

        var timestamp: String?
        var score: Double?
        var sensors: [Sensor]?
    }

    struct Failure: Decodable, Sendable {
        var message: String?
    }

    var data: [Reading]?
    /// Sent in place of data when the account ran out of calls ("Too many requests").
    var errors: [Failure]?
}

/// The Local API's `/air-data/latest`: flat keys.
struct WireLocalLatest: Decodable, Sendable {
    var timestamp: String?
    var score: Double?
    var dew_point: Double?
    var temp: Double?
    var humid: Double?
    var co2: Double?
    var voc: Double?
    var pm25: Double?
    var pm10_est: Double?
    var lux: Double?
    var spl_a: Double?
}

/// The Local API's `/settings/config/data`: which device answers.
struct WireLocalConfig: Decodable, Sendable {
    var device_uuid: String
    var fw_version: String?
    var wifi_mac: String?
}
