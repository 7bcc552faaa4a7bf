#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel

/// The IQ Gateway's (Envoy's) local JSON, as pyenphase's recorded firmwares 3.9, 7.6 and 8.2 serve it.

/// `/production.json?details=1`: `production`, `consumption` and `storage` entries.
struct WireProductionJSON: Decodable, Sendable {
    struct Entry: Decodable, Sendable {
        var type: String?
        var measurementType: String?
        var activeCount: Int?
        var wNow: Double?
        var whLifetime: Double?
        var percentFull: Double?
        var state: String?
        /// Per phase, in phase order (only with `details=1`, firmware 7.6.175 and later).
        var lines: [Line]?
    }

    struct Line: Decodable, Sendable {
        var wNow: Double?
        var whLifetime: Double?
    }

    var production: [Entry]?
    var consumption: [Entry]?
    var storage: [Entry]?
}

/// `/api/v1/production`: the inverters' totals (every firmware).
struct WireV1Production: Decodable, Sendable {
    var wattsNow: Double?
    var wattHoursLifetime: Double?
}

/// `/api/v1/production/inverters`.
struct WireInverter: Decodable, Sendable {
    var serialNumber: String
    var lastReportWatts: Double?
    var maxReportWatts: Double?
}

/// `/ivp/meters`: which current transformers are installed and enabled.
struct WireMeterConfig: Decodable, Sendable {
    var eid: Int64
    var state: String?
    var measurementType: String?
    /// Phases the meter measures (1 on a single-phase supply).
    var phaseCount: Int?
}

/// `/ivp/meters/readings`: per meter, energy delivered (imported) and received (exported), in Wh.
/// `voltage` is the sum over the phases on a multi-phase meter (per phase: `channels`).
struct WireMeterReading: Decodable, Sendable {
    struct Channel: Decodable, Sendable {
        var actEnergyDlvd: Double?
        var actEnergyRcvd: Double?
        var voltage: Double?
    }

    var eid: Int64
    var activePower: Double?
    var actEnergyDlvd: Double?
    var actEnergyRcvd: Double?
    var voltage: Double?
    var freq: Double?
    var channels: [Channel]?
}

/// `/ivp/ensemble/secctrl`: the state of charge of every battery together (AC Batteries and IQ Batteries,
/// `agg_soc`), and of the IQ Batteries alone (`ENC_agg_soc`).
struct WireSecCtrl: Decodable, Sendable {
    var aggSoc: Double?
    var maxEnergy: Double?
    var enchargeAggSoc: Double?

    enum CodingKeys: String, CodingKey {
        case aggSoc = "agg_soc"
        case maxEnergy = "Max_energy"
        case enchargeAggSoc = "ENC_agg_soc"
    }
}

/// `/ivp/ensemble/power`: each IQ Battery's power in mW (+ discharge). The key really is `"devices:"`.
struct WireEnsemblePower: Decodable, Sendable {
    struct Battery: Decodable, Sendable {
        var realPowerMilliwatts: Double?

        enum CodingKeys: String, CodingKey {
            case realPowerMilliwatts = "real_power_mw"
        }
    }

    var devices: [Battery]?

    enum CodingKeys: String, CodingKey {
        case devices = "devices:"
    }
}

/// `/info` (XML, no authentication): serial, firmware, whether it wants tokens.
struct EnphaseInfo: Sendable, Equatable {
    var serial: String
    var firmware: String
    var partNumber: String?
    var webTokens: Bool

    /// The firmware's major version: `D7.6.175` → 7, `R3.9.36` → 3.
    var majorVersion: Int {
        Int(firmware.drop { !$0.isNumber }.prefix { $0.isNumber }) ?? 0
    }

    /// Firmware 7 and later want the owner token; earlier ones serve the data without it.
    var needsToken: Bool { webTokens || majorVersion >= 7 }

    /// Reads the few tags the gateway needs; nil unless there is a serial number.
    static func parse(_ xml: String) -> EnphaseInfo? {
        func tag(_ name: String) -> String? {
            guard let open = xml.firstRange(of: "<\(name)>"), let close = xml[open.upperBound...].firstRange(of: "</\(name)>") else { return nil }
            let value = xml[open.upperBound..<close.lowerBound].trimmingWhitespace()
            return value.isEmpty ? nil : value
        }
        guard let serial = tag("sn"), serial.allSatisfy(\.isNumber) else { return nil }
        return EnphaseInfo(serial: serial, firmware: tag("software") ?? "", partNumber: tag("pn"), webTokens: tag("web-tokens") == "true")
    }
}
