#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif
import Logging
import Synchronization
import Resilience

/// The log level of the running process, changed at runtime by `<base>/bridge/request/options`.
/// Every logger made by `RuntimeLevelLogHandler` reads it on each call, so a change applies at once.
public final class RuntimeLogLevel: Sendable {
    private let level: Mutex<Logger.Level>

    public init(_ level: Logger.Level) { self.level = Mutex(level) }

    public var value: Logger.Level {
        get { level.withLock { $0 } }
        set { level.withLock { $0 = newValue } }
    }
}

/// A stderr log handler whose level follows a shared `RuntimeLogLevel` (unless set on the logger itself).
public struct RuntimeLevelLogHandler: LogHandler {
    private var inner: StreamLogHandler
    private let runtime: RuntimeLogLevel
    private var override: Logger.Level?

    public init(label: String, runtime: RuntimeLogLevel) {
        self.inner = StreamLogHandler.standardError(label: label)
        self.runtime = runtime
        self.inner.logLevel = .trace
    }

    public var logLevel: Logger.Level {
        get { override ?? runtime.value }
        set { override = newValue }
    }

    public var metadata: Logger.Metadata {
        get { inner.metadata }
        set { inner.metadata = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { inner[metadataKey: key] }
        set { inner[metadataKey: key] = newValue }
    }

    public func log(event: LogEvent) {
        inner.log(event: event)
    }
}

/// What the gateway device in Home Assistant can operate on the process: the log level and a restart.
public struct BridgeControls: Sendable {
    /// The levels `bridge/request/options` accepts for `log_level` (swift-log's, lowest first).
    public static let logLevels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]

    public let logLevel: RuntimeLogLevel
    /// Stops the service group gracefully and starts the gateway again (see `GatewayRestart`);
    /// nil where the process cannot restart itself (tests running the services in-process).
    public let restart: (@Sendable () -> Void)?

    public init(logLevel: RuntimeLogLevel, restart: (@Sendable () -> Void)? = nil) {
        self.logLevel = logLevel
        self.restart = restart
    }
}

/// `<base>/bridge/request/restart`: after the service group has stopped (offline published, cache
/// flushed, broker disconnected), the process replaces itself with a fresh start of its binary with the
/// same arguments (`execvp` of `argv[0]`, else `/proc/self/exe`). The PID stays the same, so this works
/// alike under systemd (`Type=simple`, no restart policy needed) and from a shell.
public final class GatewayRestart: Sendable {
    private let gate = ReadyGate()

    public init() {}

    public func request() {
        gate.open()
    }

    /// Returns once a restart was requested, or when the waiting task is cancelled.
    public func waitUntilRequested() async {
        await gate.wait()
    }

    public var requested: Bool { gate.isOpen }

    /// Re-executes the running binary with the same arguments and environment. Returns only on failure,
    /// with the reason. Descriptors other than stdin/out/err are closed on exec, so the new process
    /// does not inherit the old broker socket or database handles.
    public static func reexec(arguments: [String] = CommandLine.arguments) -> String {
        if let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
            for entry in entries {
                guard let fd = Int32(entry), fd > 2 else { continue }
                let flags = fcntl(fd, F_GETFD)
                if flags >= 0 { _ = fcntl(fd, F_SETFD, flags | FD_CLOEXEC) }
            }
        }
        var cArguments: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) }
        cArguments.append(nil)
        defer { for pointer in cArguments { free(pointer) } }
        // The path it was started with first (an upgraded binary is picked up, as after any restart),
        // then the running image itself.
        if let program = arguments.first, !program.isEmpty { execvp(program, cArguments) }
        execv("/proc/self/exe", cArguments)
        return String(cString: strerror(errno))
    }
}
