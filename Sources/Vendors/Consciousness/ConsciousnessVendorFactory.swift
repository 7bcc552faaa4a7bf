import GatewayModel
import VendorKit

/// `type: consciousness`: the shared network keys, `username`, the password (`password_file`,
/// `password_env`, or `LBS_<ID>_PASSWORD`) and `temperature_unit`.
public enum ConsciousnessVendorFactory: VendorFactory {
    public static let typeName = "consciousness"

    public static let network: NetworkOptions.Defaults? = defaults

    /// The backend's own word for the house's state (`GET /consciousness/status`).
    public static let stateKeys = [KeySpec("consciousness_status", label: "Consciousness", kind: .text)]
    static let defaults = NetworkOptions.Defaults(urlExample: "http://localhost:8000", pollInterval: 30)

    public static func parse(_ settings: VendorSettings, reader: inout ConfigReader, environment: [String: String]) -> ConsciousnessOptions? {
        let path = settings.path
        let node = settings.options
        reader.rejectUnknownKeys(
            in: node, at: path, allowed: NetworkOptions.keys + ConfigReader.secretKeys("password") + ["username", "temperature_unit"]
        )
        let network = NetworkOptions.parse(settings, defaults: defaults, reader: &reader)
        let username = reader.string(node["username"], at: "\(path).username", required: true)
        let password = reader.secret("password", of: settings, environment: environment)
        let unit = reader.oneOf(
            node["temperature_unit"], at: "\(path).temperature_unit", ConsciousnessOptions.TemperatureUnit.allCases.map(\.rawValue)
        ).flatMap(ConsciousnessOptions.TemperatureUnit.init(rawValue:)) ?? .auto
        guard let network, let username, !username.isEmpty, let password else { return nil }
        return ConsciousnessOptions(
            url: network.url, username: username, password: password, pollInterval: network.pollInterval, timeout: network.timeout,
            quota: network.quota, breaker: network.breaker, tls: network.tls, temperatureUnit: unit
        )
    }

    public static func make(
        _ settings: VendorSettings, options: ConsciousnessOptions, sink: VendorEventSink, context: VendorContext
    ) throws -> any Vendor {
        try ConsciousnessVendor(
            instanceID: settings.id, options: options, sink: sink, clock: context.clock, now: context.now,
            pinStore: context.pinStore, logger: context.logger
        )
    }
}
