#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif
import GatewayModel

/// Green Button units → the gateway's keys. Electricity in Wh becomes kWh counters (`grid_import_energy`
/// for energy delivered to the home, flow direction 1; `grid_export_energy` for energy received from it,
/// 19). Gas becomes `gas_volume` in m³: cubic feet × 0.0283168; therms through the usual heating value of
/// natural gas, 1,037 BTU per cubic foot (1 therm = 100,000 BTU ≈ 96.4 ft³ ≈ 2.7306 m³), so 1 ccf (100 ft³)
/// ≈ 1.037 therm. Water becomes `water_volume` in L.
enum GreenButtonMapping {
    static let cubicFootInCubicMetres = 0.028316846592
    static let btuPerCubicFoot = 1037.0
    static let cubicMetresPerTherm = 100_000 / btuPerCubicFoot * cubicFootInCubicMetres

    /// The key a series feeds and the factor from file units to that key's unit; nil for series the gateway
    /// does not publish (demand in W, other flow directions, unknown units).
    static func target(_ type: GreenButtonFeed.ReadingType, service: GreenButtonFeed.Service) -> (key: String, factor: Double)? {
        let scale = pow(10, Double(type.powerOfTenMultiplier))
        guard scale.isFinite, scale > 0 else { return nil }
        switch (type.uom, service) {
        case (72?, _):
            switch type.flowDirection {
            case 1?, nil: return ("grid_import_energy", scale / 1000)
            case 19?: return ("grid_export_energy", scale / 1000)
            default: return nil
            }
        case (169?, _): return ("gas_volume", scale * cubicMetresPerTherm)
        case (119?, .water): return ("water_volume", scale * cubicFootInCubicMetres * 1000)
        case (119?, _): return ("gas_volume", scale * cubicFootInCubicMetres)
        case (42?, .water): return ("water_volume", scale * 1000)
        case (42?, _): return ("gas_volume", scale)
        case (128?, _): return ("water_volume", scale * 3.785411784)
        default: return nil
        }
    }

    /// Per key: the intervals in time order, each counted once (the same interval in two files is one), as
    /// (end of interval, value in the key's unit).
    static func series(_ point: GreenButtonFeed.UsagePoint) -> [String: [(end: Int64, value: Double)]] {
        var byKey: [String: [Int64: (end: Int64, value: Double)]] = [:]
        for series in point.series {
            guard let target = target(series.readingType, service: point.service) else { continue }
            for interval in series.intervals {
                // The parser refuses such intervals; feeds can also be built elsewhere, so no input reaches a trapping `+`.
                let end = interval.start.addingReportingOverflow(interval.duration)
                let value = interval.value * target.factor
                guard !end.overflow, value.isFinite else { continue }
                byKey[target.key, default: [:]][interval.start] = (end.partialValue, value)
            }
        }
        return byKey.mapValues { $0.sorted { $0.key < $1.key }.map(\.value) }
    }

    static func device(vendorID: String, point: GreenButtonFeed.UsagePoint, keys: [String]) -> Device {
        let type: DeviceType = switch point.service {
        case .gas: .gasMeter
        case .water: .waterMeter
        default: .energyMeter
        }
        let fallback = switch point.service {
        case .gas: "Gas"
        case .water: "Water"
        default: "Electricity"
        }
        return Device(
            vendorID: vendorID, vendorDeviceID: Slug.make(point.id), name: point.name ?? "\(fallback) \(point.id)", type: type,
            manufacturer: "Green Button", model: "Usage point", writableKeys: [], keys: keys.sorted()
        )
    }
}
