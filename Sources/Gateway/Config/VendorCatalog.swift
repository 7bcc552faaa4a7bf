import Foundation
import GatewayModel
import Logging
import Resilience
import Vendors

/// Every vendor type the gateway knows: how to validate its config entry and how to build it.
/// Adding a vendor means one folder in `Vendors` and one case here.
public enum VendorCatalog {
    public static let types = ["demo", "consciousness"]

    static func validate(_ settings: VendorSettings, reader: inout ConfigReader, environment: [String: String], baseDirectory: String) {
        let path = settings.path
        switch settings.type {
        case "demo":
            reader.rejectUnknownKeys(in: settings.options, at: path, allowed: ["type", "id", "poll_interval", "max_devices", "devices", "seed"])
            _ = reader.number(settings.options["devices"], at: "\(path).devices", range: 0...100_000)
            _ = reader.number(settings.options["seed"], at: "\(path).seed", range: 0...Double(UInt32.max))
        case "consciousness":
            _ = consciousnessOptions(settings, reader: &reader, environment: environment, baseDirectory: baseDirectory)
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
        case "consciousness":
            guard let options = consciousnessOptions(
                settings, reader: &reader, environment: ProcessInfo.processInfo.environment, baseDirectory: settings.baseDirectory
            ) else {
                throw ConfigLoader.Failure(problems: reader.problems)
            }
            return try ConsciousnessVendor(
                instanceID: settings.id, options: options, sink: sink, clock: context.clock, now: context.now,
                pinStore: context.pinStore, logger: context.logger
            )
        default:
            throw ConfigLoader.Failure(problems: [ConfigProblem(path: "\(settings.path).type", message: "unknown vendor type '\(settings.type)'", fix: "use one of: \(types.joined(separator: ", "))")])
        }
    }
}

/// What the gateway hands every vendor it builds.
public struct VendorContext: Sendable {
    public var clock: any Clock<Duration>
    public var now: @Sendable () -> Date
    /// Where `tls: first_use` pins are kept (the SQLite cache); nil without `storage:` (pins then live in memory).
    public var pinStore: (any TLSPinStore)?
    /// The gateway's logger, for the few vendor events an operator must see (a key trusted on first use).
    public var logger: Logger

    public init(
        clock: any Clock<Duration> = ContinuousClock(), now: @escaping @Sendable () -> Date = { Date() },
        pinStore: (any TLSPinStore)? = nil, logger: Logger = Logger(label: "lbs-gateway.vendor")
    ) {
        self.clock = clock
        self.now = now
        self.pinStore = pinStore
        self.logger = logger
    }
}

// MARK: - consciousness

extension VendorCatalog {
    /// Reads and checks a `type: consciousness` entry; nil (with problems in `reader`) when it is unusable.
    /// The password comes from `password_file` (relative to the config file), `password_env`, or `LBS_<ID>_PASSWORD`.
    static func consciousnessOptions(
        _ settings: VendorSettings, reader: inout ConfigReader, environment: [String: String], baseDirectory: String
    ) -> ConsciousnessOptions? {
        let path = settings.path
        let node = settings.options
        reader.rejectUnknownKeys(in: node, at: path, allowed: [
            "type", "id", "poll_interval", "max_devices", "url", "username", "password", "password_file", "password_env", "timeout", "quota", "breaker",
            "tls", "temperature_unit",
        ])
        let url = reader.string(node["url"], at: "\(path).url", required: true)
        if let url, !url.isEmpty, !ConsciousnessOptions.isValidURL(url) {
            reader.problem("\(path).url", "'\(ConfigLoader.redactURL(url))' is not an http:// or https:// URL", fix: "e.g. http://localhost:8000")
        }
        let username = reader.string(node["username"], at: "\(path).username", required: true)
        let tls = tlsPolicy(node["tls"], at: "\(path).tls", url: url, reader: &reader)

        var password: String?
        if node["password"] != nil {
            reader.problem("\(path).password", "passwords are not read from the config file", fix: "use password_file or password_env")
        }
        let file = reader.string(node["password_file"], at: "\(path).password_file")
        let variable = reader.string(node["password_env"], at: "\(path).password_env")
        if file != nil, variable != nil {
            reader.problem("\(path).password_env", "password_file and password_env are both set", fix: "keep only one of them")
        } else if let file {
            password = ConfigLoader.readSecret(file, at: "\(path).password_file", baseDirectory: baseDirectory, reader: &reader)?.value
            if password?.isEmpty == true {
                reader.problem("\(path).password_file", "'\(file)' is empty", fix: "write the password into the file")
                password = nil
            }
        } else {
            let name = variable ?? ConsciousnessOptions.defaultPasswordVariable(vendorID: settings.id)
            if let value = environment[name], !value.isEmpty {
                password = value
            } else {
                reader.problem(
                    "\(path).\(variable == nil ? "password_file" : "password_env")",
                    "no password: the environment variable \(name) is not set",
                    fix: "set \(name), or point password_file at a file holding the password"
                )
            }
        }

        let timeout = reader.number(node["timeout"], at: "\(path).timeout", range: 0.1...300) ?? 10
        let unit = reader.oneOf(
            node["temperature_unit"], at: "\(path).temperature_unit", ConsciousnessOptions.TemperatureUnit.allCases.map(\.rawValue)
        ).flatMap(ConsciousnessOptions.TemperatureUnit.init(rawValue:)) ?? .auto

        var budgets: QuotaScheduler.Budgets?
        if let quota = reader.mapping(node["quota"], at: "\(path).quota") {
            let at = "\(path).quota"
            reader.rejectUnknownKeys(in: quota, at: at, allowed: ["per_minute", "per_hour", "per_day", "per_month"])
            func limit(_ key: String) -> Int? {
                reader.number(quota[key], at: "\(at).\(key)", range: 1...10_000_000).map { Int($0) }
            }
            budgets = QuotaScheduler.Budgets(
                perMinute: limit("per_minute"), perHour: limit("per_hour"), perDay: limit("per_day"), perMonth: limit("per_month")
            )
        }

        var breaker = CircuitBreaker.Settings()
        if let node = reader.mapping(node["breaker"], at: "\(path).breaker") {
            let at = "\(path).breaker"
            reader.rejectUnknownKeys(in: node, at: at, allowed: ["minimum_calls", "failure_ratio", "window", "open_duration", "max_open_duration"])
            func seconds(_ key: String, _ range: ClosedRange<Double>) -> Duration? {
                reader.number(node[key], at: "\(at).\(key)", range: range).map { .milliseconds(Int64($0 * 1000)) }
            }
            breaker = CircuitBreaker.Settings(
                window: seconds("window", 1...86_400) ?? breaker.window,
                minimumCalls: reader.number(node["minimum_calls"], at: "\(at).minimum_calls", range: 1...10_000).map { Int($0) } ?? breaker.minimumCalls,
                failureRatio: reader.number(node["failure_ratio"], at: "\(at).failure_ratio", range: 0.01...1) ?? breaker.failureRatio,
                openDuration: seconds("open_duration", 1...86_400) ?? breaker.openDuration,
                maxOpenDuration: seconds("max_open_duration", 1...604_800) ?? breaker.maxOpenDuration
            )
        }

        guard let url, let username, !username.isEmpty, let password, ConsciousnessOptions.isValidURL(url) else { return nil }
        return ConsciousnessOptions(
            url: url, username: username, password: VendorSecret(password),
            pollInterval: .milliseconds(Int64((settings.pollInterval ?? 30) * 1000)),
            timeout: .milliseconds(Int64(timeout * 1000)), quota: budgets, breaker: breaker, tls: tls, temperatureUnit: unit
        )
    }
}
