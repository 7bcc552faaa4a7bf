import GatewayModel
import VendorKit

/// `type: demo`: keys `devices` (extra simulated devices for load tests) and `seed`.
public enum DemoVendorFactory: VendorFactory {
    public static let typeName = "demo"
    public static let network: NetworkOptions.Defaults? = nil

    public static func parse(_ settings: VendorSettings, reader: inout ConfigReader, environment: [String: String]) -> DemoOptions? {
        let path = settings.path
        reader.rejectUnknownKeys(in: settings.options, at: path, allowed: VendorSettings.commonKeys + ["devices", "seed"])
        let devices = reader.number(settings.options["devices"], at: "\(path).devices", range: 0...100_000) ?? 0
        let seed = reader.number(settings.options["seed"], at: "\(path).seed", range: 0...Double(UInt32.max)) ?? 437
        return DemoOptions(pollInterval: settings.pollInterval(default: 5), extraDevices: Int(devices), seed: UInt64(seed))
    }

    public static func make(_ settings: VendorSettings, options: DemoOptions, sink: VendorEventSink, context: VendorContext) throws -> any Vendor {
        DemoVendor(instanceID: settings.id, options: options, sink: sink, clock: context.clock, now: context.now)
    }
}
