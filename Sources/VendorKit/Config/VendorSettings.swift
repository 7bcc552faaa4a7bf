import GatewayModel

/// One `vendors:` entry. Common keys are parsed here; the rest is the vendor's own (`options`).
public struct VendorSettings: Sendable {
    public var type: String
    public var id: String
    public var pollInterval: Double?
    /// Devices accepted from this vendor; a larger inventory is cut to this many (sorted by id) with an error.
    public var maxDevices: Int = 5000
    public var options: ConfigNode
    /// Key path of this entry in the file (`vendors[1]`), for the vendor's own error messages.
    public var path: String
    /// The config file's directory: relative paths in the entry (`password_file`) are relative to it.
    public var baseDirectory: String = ""
    /// `energy_home`: the keys this entry's devices add to `<base>/energy/home` (nil: every energy key they
    /// report; empty: none), so two devices measuring the same flow are not counted twice.
    public var energyHome: Set<String>?

    public init(type: String, id: String, pollInterval: Double? = nil, options: ConfigNode = .mapping([]), path: String = "vendors[0]") {
        self.type = type
        self.id = id
        self.pollInterval = pollInterval
        self.options = options
        self.path = path
    }
}

extension VendorSettings {
    /// Keys every entry has, read by the gateway before the vendor's factory sees the entry.
    public static let commonKeys = ["type", "id", "poll_interval", "max_devices", "energy_home"]

    /// `poll_interval` from the entry, or the vendor's default.
    public func pollInterval(default seconds: Double) -> Duration {
        .clampedSeconds(pollInterval ?? seconds)
    }
}
