import GatewayModel
import Resilience
import VendorKit

/// Options of a `type: matter` entry.
public struct MatterOptions: Sendable {
    /// The Matter server's WebSocket API (`url`): python-matter-server or matterjs-server.
    public var url: String
    /// How long a request (a command, a read) may take before it is reported as timed out.
    public var requestTimeout: Duration
    /// The largest message accepted: `start_listening` sends every node in one frame (MBs with many nodes).
    public var maxMessageSize: Int
    /// The PIN code locks that require one for remote operation (DoorLock 257/51) get with lock and unlock
    /// (`pin_code_file`, `pin_code_env` or `LBS_<ID>_PIN_CODE`).
    public var pinCode: VendorSecret?
    /// Reconnect delays (1 s doubling to 60 s); the vendor is `down` at the first failed connection.
    public var reconnect = ReconnectingStream.Policy(minDelay: .seconds(1), maxDelay: .seconds(60), downAfter: 1)

    public init(url: String = "ws://localhost:5580/ws", requestTimeout: Duration = .seconds(30), maxMessageSize: Int = 4 << 20) {
        self.url = url
        self.requestTimeout = requestTimeout
        self.maxMessageSize = maxMessageSize
    }
}

/// `type: matter`: Matter devices through a Matter controller's WebSocket API (python-matter-server 8.1.2,
/// the last release, or matterjs-server, which keeps the same API).
public enum MatterVendorFactory: VendorFactory {
    public static let typeName = "matter"
    public static let network: NetworkOptions.Defaults? = nil

    public static func parse(_ settings: VendorSettings, reader: inout ConfigReader, environment: [String: String]) -> MatterOptions? {
        let path = settings.path
        let node = settings.options
        reader.rejectUnknownKeys(in: node, at: path, allowed: VendorSettings.commonKeys + ["url", "timeout", "max_message_size_mb"] + ConfigReader.secretKeys("pin_code"))
        var options = MatterOptions()
        if let url = reader.string(node["url"], at: "\(path).url") {
            let lower = url.lowercased()
            if lower.hasPrefix("ws://") || lower.hasPrefix("wss://") { options.url = url } else {
                reader.problem("\(path).url", "'\(ConfigReader.redactURL(url))' is not a ws:// or wss:// URL",
                               fix: "use the Matter server's WebSocket address, e.g. ws://127.0.0.1:5580/ws")
            }
        }
        if let seconds = reader.number(node["timeout"], at: "\(path).timeout", range: 1...600) { options.requestTimeout = .clampedSeconds(seconds) }
        if let megabytes = reader.number(node["max_message_size_mb"], at: "\(path).max_message_size_mb", range: 1...64) {
            options.maxMessageSize = Int(megabytes) << 20
        }
        if let pin = reader.secret("pin_code", of: settings, environment: environment, required: false) {
            if pin.reveal().allSatisfy(\.isNumber), (4...8).contains(pin.reveal().count) { options.pinCode = pin } else {
                reader.problem("\(path).pin_code_file", "the PIN code is not 4 to 8 digits", fix: "write the lock's PIN code (digits only) into the file")
            }
        }
        return options
    }

    public static func make(_ settings: VendorSettings, options: MatterOptions, sink: VendorEventSink, context: VendorContext) throws -> any Vendor {
        MatterVendor(instanceID: settings.id, options: options, sink: sink, context: context)
    }
}
