/// What the simulator has seen; read it with `ConsciousnessSimulator.counters`.
public struct SimulatorCounters: Sendable, Hashable {
    /// A device id and control action pair.
    public struct ControlKey: Sendable, Hashable {
        /// The device id from the URL or batch item.
        public var deviceID: String
        /// The action, e.g. `turn_on`.
        public var action: String

        /// Creates a key.
        public init(deviceID: String, action: String) {
            self.deviceID = deviceID
            self.action = action
        }
    }

    /// Requests received on the API surface (admin `/_sim/*` routes excluded), faulted ones included.
    public var requests = 0
    /// Requests per `"METHOD /path"`.
    public var requestsByRoute: [String: Int] = [:]
    /// Successful logins.
    public var logins = 0
    /// Rejected logins.
    public var failedLogins = 0
    /// Control actions that reached a known device and were executed (single and batch), per device and action.
    public var controlCalls: [ControlKey: Int] = [:]
    /// Requests answered by an injected fault instead of (or in addition to) the route.
    public var faultsServed = 0

    /// How often `action` was executed on `deviceID`.
    public func controlCalls(deviceID: String, action: String) -> Int {
        controlCalls[ControlKey(deviceID: deviceID, action: action)] ?? 0
    }

    /// Total executed control actions.
    public var totalControlCalls: Int {
        controlCalls.values.reduce(0, +)
    }
}
