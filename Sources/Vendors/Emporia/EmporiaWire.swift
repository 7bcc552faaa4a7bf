#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Emporia's cloud (`https://api.emporiaenergy.com`), as PyEmVue's API notes document it.

/// `/customers/devices`: the account's devices; smart plugs and chargers can hang under a Vue (`devices`).
struct WireCustomer: Decodable, Sendable {
    var devices: [WireDevice]?
}

final class WireDevice: Decodable, Sendable {
    struct Location: Decodable, Sendable {
        var deviceName: String?
    }

    struct Channel: Decodable, Sendable {
        var name: String?
        var channelNum: String
    }

    struct Outlet: Decodable, Sendable {
        var outletOn: Bool?
        var parentDeviceGid: Int64?
        var parentChannelNum: String?
    }

    /// PyEmVue's `ChargerDevice`: `PUT /devices/evcharger` takes deviceGid, loadGid, chargerOn, chargingRate
    /// and maxChargingRate back (with breakerPIN when one is set).
    struct Charger: Decodable, Sendable {
        var deviceGid: Int64?
        var loadGid: Int64?
        var chargerOn: Bool?
        var chargingRate: Int?
        var maxChargingRate: Int?
        var status: String?
        var breakerPIN: String?

        /// The fields the update takes (PyEmVue's `as_dictionary`): the rest is the charger's own report.
        var forUpdate: Update {
            Update(deviceGid: deviceGid, loadGid: loadGid, chargerOn: chargerOn, chargingRate: chargingRate, maxChargingRate: maxChargingRate,
                   breakerPIN: breakerPIN.flatMap { $0.isEmpty ? nil : $0 })
        }

        struct Update: Encodable {
            var deviceGid: Int64?
            var loadGid: Int64?
            var chargerOn: Bool?
            var chargingRate: Int?
            var maxChargingRate: Int?
            var breakerPIN: String?
        }
    }

    let deviceGid: Int64
    let model: String?
    let firmware: String?
    let locationProperties: Location?
    let outlet: Outlet?
    let evCharger: Charger?
    let channels: [Channel]?
    let devices: [WireDevice]?

    /// This device and every device under it.
    var all: [WireDevice] { [self] + (devices ?? []).flatMap(\.all) }
}

/// `AppAPI?apiMethod=getDeviceListUsages`: energy per channel over the scale's interval (kWh per minute at 1MIN).
struct WireUsages: Decodable, Sendable {
    struct List: Decodable, Sendable {
        var instant: String?
        var scale: String?
        var devices: [DeviceUsage]?
    }

    final class DeviceUsage: Decodable, Sendable {
        let deviceGid: Int64
        let channelUsages: [ChannelUsage]?
    }

    final class ChannelUsage: Decodable, Sendable {
        let name: String?
        let usage: Double?
        let deviceGid: Int64?
        let channelNum: String
        let nestedDevices: [DeviceUsage]?
    }

    var deviceListUsages: List?
}

/// Cognito's `InitiateAuth`/`RespondToAuthChallenge` answer: tokens, or the next challenge of a sign-in.
struct WireCognito: Decodable, Sendable {
    struct Result: Decodable, Sendable {
        var IdToken: String?
        var RefreshToken: String?
        var ExpiresIn: Double?
    }

    var AuthenticationResult: Result?
    var ChallengeName: String?
    var ChallengeParameters: [String: String]?
}
