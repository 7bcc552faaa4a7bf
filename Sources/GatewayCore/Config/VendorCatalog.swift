import GatewayModel
import VendorKit

/// The gateway's view of the vendor types it was built with: checks an entry, builds its vendor, and answers
/// the questions that span entries. It knows no vendor by name: the composition root (`LBSGatewayApp`'s
/// `VendorRegistry`) hands it the factories.
public struct VendorCatalog: Sendable {
    public let factories: [any VendorFactory.Type]

    /// Registers the vendors' own state keys (`VendorFactory.stateKeys`) with the model.
    public init(factories: [any VendorFactory.Type]) {
        self.factories = factories
        StateKeys.register(factories.flatMap { $0.stateKeys })
    }

    /// Every `type:` a `vendors:` entry may have, in registry order.
    public var types: [String] { factories.map { $0.typeName } }

    /// Types whose entries have a `url` and a `tls` policy.
    public var networkTypes: Set<String> { Set(factories.filter { $0.isNetworkVendor }.map { $0.typeName }) }

    package func factory(for type: String) -> (any VendorFactory.Type)? {
        factories.first { $0.typeName == type }
    }

    /// Reads an entry's own options, leaving every problem in `reader`.
    package func validate(_ settings: VendorSettings, reader: inout ConfigReader, environment: [String: String]) {
        guard let factory = factory(for: settings.type) else { return }
        _ = Self.parse(factory, settings, reader: &reader, environment: environment)
    }

    /// Builds the vendor for a validated entry.
    package func make(
        _ settings: VendorSettings, sink: VendorEventSink, context: VendorContext, environment: [String: String]
    ) throws -> any Vendor {
        guard let factory = factory(for: settings.type) else {
            throw ConfigLoader.Failure(problems: [ConfigProblem(
                path: "\(settings.path).type", message: "unknown vendor type '\(settings.type)'", fix: "use one of: \(types.joined(separator: ", "))"
            )])
        }
        return try Self.build(factory, settings, sink: sink, context: context, environment: environment)
    }

    private static func parse<F: VendorFactory>(
        _ factory: F.Type, _ settings: VendorSettings, reader: inout ConfigReader, environment: [String: String]
    ) -> F.Options? {
        F.parse(settings, reader: &reader, environment: environment)
    }

    private static func build<F: VendorFactory>(
        _ factory: F.Type, _ settings: VendorSettings, sink: VendorEventSink, context: VendorContext, environment: [String: String]
    ) throws -> any Vendor {
        var reader = ConfigReader()
        guard let options = F.parse(settings, reader: &reader, environment: environment), reader.problems.isEmpty else {
            throw ConfigLoader.Failure(problems: reader.problems)
        }
        return try F.make(settings, options: options, sink: sink, context: context)
    }

    /// Problems that span a vendor entry and the rest of the file (`ConfigLoader` checks entries one by one):
    /// `tls: first_use` (written, or a vendor's default for a local device) needs `storage:`, since a pin kept
    /// only in memory would be re-learned, from whoever answers, after every restart.
    public func crossCheck(_ config: GatewayConfig) -> [ConfigProblem] {
        guard config.storage == nil else { return [] }
        var problems: [ConfigProblem] = []
        for vendor in config.vendors {
            if let reason = factory(for: vendor.type)?.requiresStorage {
                problems.append(ConfigProblem(path: "\(vendor.path).type", message: "type: \(vendor.type) needs storage: \(reason)",
                                              fix: "add 'storage: {path: /var/lib/lbs-gateway/gateway.sqlite}'"))
                continue
            }
            guard let endpoint = tlsEndpoint(vendor), endpoint.policy == .firstUse else { continue }
            let written = vendor.options["tls"] != nil
            problems.append(ConfigProblem(
                path: "\(vendor.path).tls",
                message: written ? "tls: first_use needs storage: the pin must survive a restart"
                    : "this https:// device is trusted on first use (the default), which needs storage: the pin must survive a restart",
                fix: "add 'storage: {path: /var/lib/lbs-gateway/gateway.sqlite}', or give the key with tls: {pin: \"<base64>\"}"
            ))
        }
        return problems
    }

    /// The URL and TLS policy of a network vendor entry (nil for other types or an unusable entry).
    public func tlsEndpoint(_ settings: VendorSettings) -> (url: String, policy: TLSPolicy)? {
        guard let defaults = factory(for: settings.type)?.network else { return nil }
        var reader = ConfigReader()
        guard let url = reader.string(settings.options["url"], at: "url") ?? defaults.url, NetworkOptions.isValidURL(url) else { return nil }
        let policy = NetworkOptions.tlsPolicy(settings.options["tls"], at: "tls", url: url, default: defaults.tls, reader: &reader)
        return reader.problems.isEmpty ? (url, policy) : nil
    }
}
