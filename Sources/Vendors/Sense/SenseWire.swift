#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Sense's REST API (`https://api.sense.com/apiservice/api/v1`) and realtime feed, as scottbonline/sense,
/// openHAB's binding and dnesting/sense document them.

/// `POST /authenticate` (and `/authenticate/mfa`): the `hello` object.
struct WireHello: Decodable, Sendable {
    struct Monitor: Decodable, Sendable {
        var id: Int64
        var serial_number: String?
        var solar_configured: Bool?
        var solar_connected: Bool?
    }

    var authorized: Bool?
    var user_id: Int64?
    var access_token: String?
    var refresh_token: String?
    var monitors: [Monitor]?
}

/// The first answer of an account with multi-factor sign-in: 401 with a token for `/authenticate/mfa`.
struct WireMFA: Decodable, Sendable {
    var mfa_token: String?
    var error_reason: String?
}

/// `POST /renew`.
struct WireRenew: Decodable, Sendable {
    var access_token: String?
    var refresh_token: String?
    var expires: String?
}

/// A realtime frame: `{"type": …, "payload": …}`.
struct WireFrame: Decodable, Sendable {
    var type: String
}

struct WireRealtimeFrame: Decodable, Sendable {
    struct Payload: Decodable, Sendable {
        struct Device: Decodable, Sendable {
            var id: String
            var name: String?
            var w: Double?
        }

        var w: Double?
        var solar_w: Double?
        var grid_w: Double?
        var hz: Double?
        var voltage: [Double]?
        var devices: [Device]?
        var epoch: Double?
    }

    var payload: Payload
}

struct WireDeviceStatesFrame: Decodable, Sendable {
    struct Payload: Decodable, Sendable {
        struct State: Decodable, Sendable {
            var device_id: String
        }

        var states: [State]?
        var update_type: String?
    }

    var payload: Payload
}

struct WireErrorFrame: Decodable, Sendable {
    struct Payload: Decodable, Sendable {
        var authorized: Bool?
        var error_reason: String?
    }

    var payload: Payload
}

/// `app/history/trends?scale=DAY`: today's kWh.
struct WireTrends: Decodable, Sendable {
    struct Total: Decodable, Sendable {
        var total: Double?
    }

    var consumption: Total?
    var production: Total?
    var from_grid: Double?
    var to_grid: Double?
}
