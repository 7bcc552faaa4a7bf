#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Flume's Personal API (`https://api.flumetech.com`): every answer is an envelope whose `data` holds the
/// result (as PyFlume's recorded answers show); `success:false` carries the reason in `message`/`detailed`.
struct Envelope<Item: Decodable & Sendable>: Decodable, Sendable {
    var success: Bool?
    var message: String?
    var http_code: Int?
    var data: [Item]?
}

/// `POST /oauth/token`'s `data[0]`.
struct WireToken: Decodable, Sendable {
    var access_token: String
    var refresh_token: String?
    var expires_in: Double?
}

/// `/users/{user}/devices`: `type` 1 is a bridge, 2 a water sensor.
struct WireDevice: Decodable, Sendable {
    struct Location: Decodable, Sendable {
        var name: String?
        var tz: String?
    }

    var id: String
    var type: Int?
    var name: String?
    var location: Location?
    var battery_level: String?
    var connected: Bool?
    var product: String?
}

/// `…/leaks/active`: whether Flume sees an active leak at the device.
struct WireLeak: Decodable, Sendable {
    var active: Bool?
}

/// One query's answer: buckets with a value (the unit the query asked for).
struct WireBucket: Decodable, Sendable {
    var datetime: String?
    var value: Double?
}

/// `POST …/query`: `data[0]` maps each `request_id` to its buckets.
typealias WireQueryResult = [String: [WireBucket]]
