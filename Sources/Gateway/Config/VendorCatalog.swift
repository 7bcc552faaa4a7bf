import Foundation
import GatewayModel
import Vendors

/// Every vendor type the gateway knows: how to validate its config entry and how to build it.
/// Adding a vendor means one folder in `Vendors` and one case here.
public enum VendorCatalog {
    public static let types = ["demo"]

    static func validate(_ settings: VendorSettings, reader: inout ConfigReader, environment: [String: String], baseDirectory: String) {
        let path = settings.path
        switch settings.type {
        case "demo":
            reader.rejectUnknownKeys(in: settings.options, at: path, allowed: ["type", "id", "poll_interval", "devices", "seed"])
            _ = reader.number(settings.options["devices"], at: "\(path).devices", range: 0...100_000)
            _ = reader.number(settings.options["seed"], at: "\(path).seed", range: 0...Double(UInt32.max))
        default:
            break
        }
    }

    /// Builds the vendor for a validated entry.
    static func make(_ settings: VendorSettings, sink: VendorEventSink, context: VendorContext) throws -> any Vendor {
        var reader = ConfigReader()
        switch settings.type {
        case "demo":
            let devices = reader.number(settings.options["devices"], at: "") ?? 0
            let seed = reader.number(settings.options["seed"], at: "") ?? 437
            let options = DemoOptions(
                pollInterval: .milliseconds(Int64((settings.pollInterval ?? 5) * 1000)),
                extraDevices: Int(devices), seed: UInt64(seed)
            )
            return DemoVendor(instanceID: settings.id, options: options, sink: sink, clock: context.clock, now: context.now)
        default:
            throw ConfigLoader.Failure(problems: [ConfigProblem(path: "\(settings.path).type", message: "unknown vendor type '\(settings.type)'", fix: "use one of: \(types.joined(separator: ", "))")])
        }
    }
}

/// What the gateway hands every vendor it builds.
public struct VendorContext: Sendable {
    public var clock: any Clock<Duration>
    public var now: @Sendable () -> Date

    public init(clock: any Clock<Duration> = ContinuousClock(), now: @escaping @Sendable () -> Date = { Date() }) {
        self.clock = clock
        self.now = now
    }
}
