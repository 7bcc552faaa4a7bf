import Foundation

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

    struct Charger: Decodable, Sendable {
        var chargerOn: Bool?
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

/// Cognito's `InitiateAuth` answer.
struct WireCognito: Decodable, Sendable {
    struct Result: Decodable, Sendable {
        var IdToken: String
        var ExpiresIn: Double?
    }

    var AuthenticationResult: Result?
}
