import GatewayModel
import Resilience
import VendorKit

/// Options of a `type: green_button` entry.
public struct GreenButtonOptions: Sendable {
    public enum Source: Sendable {
        /// One file, or every `*.xml` in a folder a utility export is dropped into.
        case path(String)
        /// Green Button Connect: the feed URL and its bearer token.
        case connect(NetworkOptions, token: VendorSecret)
    }

    public var source: Source
    public var pollInterval: Duration

    public init(source: Source, pollInterval: Duration) {
        self.source = source
        self.pollInterval = pollInterval
    }
}

/// `type: green_button`: utility electricity and gas data (NAESB ESPI Atom/XML) from `path` (a file or a
/// folder) or from `url` with `token_file` (Green Button Connect). Read again every `poll_interval` (1 h).
public enum GreenButtonVendorFactory: VendorFactory {
    public static let typeName = "green_button"

    /// Utilities publish interval data once a day or so: an hourly look is plenty; a few calls a day fit any budget.
    static let defaults = NetworkOptions.Defaults(
        urlExample: "https://utility.example.com/DataCustodian/espi/1_1/resource/Batch/Subscription/5", pollInterval: 3600, timeout: 60,
        quota: .init(perHour: 30)
    )
    public static let network: NetworkOptions.Defaults? = defaults

    public static func parse(_ settings: VendorSettings, reader: inout ConfigReader, environment: [String: String]) -> GreenButtonOptions? {
        let path = settings.path
        let node = settings.options
        reader.rejectUnknownKeys(in: node, at: path, allowed: NetworkOptions.keys + ConfigReader.secretKeys("token") + ["path"])
        if let file = reader.string(node["path"], at: "\(path).path") {
            for key in ["url", "token", "token_file", "token_env"] where node[key] != nil {
                reader.problem("\(path).\(key)", "path and \(key) are both set", fix: "read a downloaded file (path) or a Green Button Connect feed (url and token_file), not both")
            }
            guard !file.isEmpty else {
                reader.problem("\(path).path", "is empty", fix: "give the downloaded XML file or the folder it is saved into")
                return nil
            }
            return GreenButtonOptions(
                source: .path(ConfigReader.resolve(file, baseDirectory: settings.baseDirectory)), pollInterval: settings.pollInterval(default: 3600)
            )
        }
        if node["url"] == nil {
            reader.problem(path, "neither path nor url is set", fix: "set path (a Green Button download or a folder of them) or url and token_file")
            return nil
        }
        let network = NetworkOptions.parse(settings, defaults: defaults, reader: &reader)
        let token = reader.secret("token", of: settings, environment: environment)
        guard let network, let token else { return nil }
        return GreenButtonOptions(source: .connect(network, token: token), pollInterval: network.pollInterval)
    }

    public static func make(_ settings: VendorSettings, options: GreenButtonOptions, sink: VendorEventSink, context: VendorContext) throws -> any Vendor {
        try GreenButtonVendor(instanceID: settings.id, options: options, sink: sink, context: context)
    }
}
