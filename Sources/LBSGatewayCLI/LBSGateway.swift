import ArgumentParser
import Cache
import CMalloc
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Dispatch
import FeatureActiveStandby
import GatewayCore
import LBSGatewayApp
import Logging
import VendorKit
import ServiceLifecycle
import UnixSignals
#if canImport(Glibc)
import Glibc
#endif

/// A synchronous entry point that parks the main thread. An async `main` ends the main thread through
/// `dispatch_main` → `pthread_exit`, whose forced unwind reads the unwind tables of every frame: ~1 MB of
/// `.eh_frame` pages (in 64 KB runs) that then stay resident for nothing. Nothing here runs on the main actor.
@main
enum Entry {
    static func main() {
        let finished = DispatchSemaphore(value: 0)
        Task.detached {
            if let plain = LBSGateway.Run.plainArguments(Array(CommandLine.arguments.dropFirst())) {
                await LBSGateway.Run.runDirectly(plain)
            } else {
                await LBSGateway.main()
            }
            finished.signal()
        }
        finished.wait()
    }
}

struct LBSGateway: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lbs-gateway",
        abstract: "MQTT edge gateway for the Living Building System: vendor devices in, normalized MQTT topics out.",
        version: GatewayController.version,
        subcommands: [Run.self, CheckConfig.self, TLSPin.self, ConfigPaths.self, HomeKitCode.self, SelfTest.self],
        defaultSubcommand: nil
    )
}

struct ConfigOption: ParsableArguments {
    static let defaultPath = "/etc/lbs-gateway/config.yaml"

    @Option(name: .shortAndLong, help: "Path to the YAML configuration file.")
    var config: String = ConfigOption.defaultPath

    /// The validated config, including the checks that span entries (`tls: first_use` needs storage).
    func load() -> Result<GatewayConfig, ConfigLoader.Failure> {
        ConfigLoader.load(path: config)
    }

    func loadOrExit() throws -> GatewayConfig {
        try Self.loadOrExit(path: config)
    }

    /// The validated config, or one clear line per problem on stderr (never a stack trace) and exit 78 (EX_CONFIG).
    static func loadOrExit(path: String) throws -> GatewayConfig {
        switch ConfigLoader.load(path: path) {
        case .success(let config):
            return config
        case .failure(let failure):
            for problem in failure.problems { writeToStandardError("lbs-gateway: config error: \(problem)\n") }
            throw ExitCode(78)
        }
    }
}

extension LBSGateway {
    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Run the gateway until SIGTERM or SIGINT.")

        @OptionGroup var options: ConfigOption

        @Option(help: "Override log_level (trace, debug, info, notice, warning, error, critical).")
        var logLevel: String?

        func run() async throws {
            try await Self.run(config: options.loadOrExit(), logLevel: logLevel)
        }

        /// `run` with nothing but `--config`/`-c` and `--log-level` (what the systemd unit starts): parsed here,
        /// because ArgumentParser's first parse (reflection over every command's properties) was a tenth of a
        /// cold start's instructions. Anything else, `--help` included, goes to ArgumentParser.
        static func plainArguments(_ arguments: [String]) -> (config: String, logLevel: String?)? {
            guard arguments.first == "run" else { return nil }
            var config = ConfigOption.defaultPath
            var logLevel: String?
            var rest = arguments.dropFirst()
            while let flag = rest.popFirst() {
                switch flag {
                case "--config", "-c":
                    guard let value = rest.popFirst(), !value.hasPrefix("-") else { return nil }
                    config = value
                case "--log-level":
                    guard let value = rest.popFirst(), !value.hasPrefix("-") else { return nil }
                    logLevel = value
                case _ where flag.hasPrefix("--config="):
                    config = String(flag.dropFirst("--config=".count))
                case _ where flag.hasPrefix("--log-level="):
                    logLevel = String(flag.dropFirst("--log-level=".count))
                default:
                    return nil
                }
            }
            return (config, logLevel)
        }

        /// Runs the plain form and exits as ArgumentParser would (its exit code; 1 with the error on stderr).
        static func runDirectly(_ plain: (config: String, logLevel: String?)) async {
            do {
                try await run(config: ConfigOption.loadOrExit(path: plain.config), logLevel: plain.logLevel)
            } catch let code as ExitCode {
                Glibc.exit(code.rawValue)
            } catch {
                writeToStandardError("lbs-gateway: \(error)\n")
                Glibc.exit(1)
            }
        }

        static func run(config: GatewayConfig, logLevel: String?) async throws {
            let levelName = logLevel ?? config.logLevel
            // One shared level: `bridge/request/options` {"log_level":…} changes it at runtime.
            let runtimeLevel = RuntimeLogLevel(Logger.Level(rawValue: levelName) ?? .info)
            LoggingSystem.bootstrap { label in RuntimeLevelLogHandler(label: label, runtime: runtimeLevel) }
            let logger = Logger(label: "lbs-gateway")
            for warning in config.warnings { logger.warning("config: \(warning)") }
            // CMalloc capped glibc's malloc arenas before main; -1 means the environment chose.
            logger.debug("malloc arenas", metadata: ["arena_max": "\(lbs_malloc_arena_max())"])
            let restart = GatewayRestart()
            // One of an active/standby pair: a standby waits here, running nothing else, until it holds the lease.
            var elector: LeaseElector?
            if let pair = config.highAvailability {
                let candidate = try LeaseElector(config: config, settings: pair, logger: logger)
                try await candidate.waitUntilActive()
                elector = candidate
            }
            var services: [any Service]
            do {
                services = try GatewayService.services(
                    config: config, logger: logger, controls: BridgeControls(logLevel: runtimeLevel, restart: { restart.request() }))
            } catch {
                writeToStandardError("lbs-gateway: cannot open storage.path: \(error)\n")
                throw ExitCode(74)
            }
            services.append(HeapTrimService(clock: ContinuousClock()))
            // First, so it stops last: the lease is given up after the gateway said offline and disconnected.
            if let elector { services.insert(LeaseService(elector: elector, logger: logger), at: 0) }
            // `bridge/request/restart` ends the restart watch, which shuts the group down gracefully.
            let group = ServiceGroup(configuration: .init(
                services: [.init(service: RestartWatch(restart: restart), successTerminationBehavior: .gracefullyShutdownGroup)]
                    + services.map { .init(service: $0) },
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            ))
            // A graceful stop takes well under a second; whatever hangs, a stop signal ends the process in 4.5 s.
            StopDeadline.arm(limit: .milliseconds(4_500))
            do {
                try await group.run()
            } catch {
                writeToStandardError("lbs-gateway: \(error)\n")
                throw ExitCode(1)
            }
            // `bridge/request/restart`: everything stopped cleanly above; start again as the same process.
            if restart.requested {
                logger.notice("restarting: \(CommandLine.arguments.joined(separator: " "))")
                let reason = GatewayRestart.reexec()
                writeToStandardError("lbs-gateway: cannot restart (\(reason)); exiting so a supervisor can start it\n")
                throw ExitCode(75)
            }
        }
    }

    struct CheckConfig: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "check-config",
            abstract: "Validate a configuration file: every problem with its key path and how to fix it."
        )

        @OptionGroup var options: ConfigOption

        func run() async throws {
            switch options.load() {
            case .success(let config):
                // What `run` would refuse (or fail on at the first write) is reported here too.
                let storageProblems = config.storage.map { StorageCheck.problems(path: $0.path) } ?? []
                if !storageProblems.isEmpty {
                    for problem in storageProblems { print("\(options.config): storage.path: \(problem)") }
                    print("\(storageProblems.count) problem(s) found")
                    throw ExitCode(1)
                }
                for warning in config.warnings { print("\(options.config): warning: \(warning)") }
                print("\(options.config): ok (\(config.vendors.count) vendor(s): \(config.vendors.map { "\($0.id) (\($0.type))" }.joined(separator: ", ")))")
            case .failure(let failure):
                for problem in failure.problems { print("\(options.config): \(problem)") }
                print("\(failure.problems.count) problem(s) found")
                throw ExitCode(1)
            }
        }
    }

    struct SelfTest: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "self-test",
            abstract: "Check this build's time zone, calendar, date format and YAML data against known answers.",
            discussion: """
                The static build carries only the part of ICU's data the gateway uses (deploy/build-release.sh runs \
                this after every build). Prints each check and the local time zone; exits 1 when a check fails.
                """
        )

        func run() async throws {
            let checks = RuntimeSelfTest.run()
            for check in checks {
                print(check.passed ? "ok   \(check.name): \(check.actual)" : "FAIL \(check.name): got \(check.actual), want \(check.expected)")
            }
            print("local time zone: \(RuntimeSelfTest.localTimeZone())")
            let failed = checks.filter { !$0.passed }.count
            print(failed == 0 ? "self-test: \(checks.count) checks passed" : "self-test: \(failed) of \(checks.count) checks failed")
            if failed > 0 { throw ExitCode(1) }
        }
    }

    struct HomeKitCode: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "homekit-code",
            abstract: "The HomeKit bridge's setup code and setup payload (X-HM://…, what the Home app's QR code holds).",
            discussion: """
                Reads the code from homekit.setup_code_file (or _env) of the configuration. `run` never logs it.                 Draw the QR code with e.g. `qrencode -t ansiutf8 'X-HM://…'` and scan it in the Home app (Add Accessory).
                """
        )

        @OptionGroup var options: ConfigOption

        func run() async throws {
            let config = try options.loadOrExit()
            guard let homekit = config.homekit else {
                writeToStandardError("lbs-gateway: \(options.config) has no homekit: section (the HomeKit bridge is off)\n")
                throw ExitCode(1)
            }
            let code = homekit.setupCode.reveal()
            let uri = HomeKitBridgeSettings.setupURI(code: code)
            print("setup code:  \(code)")
            print("setup URI:   \(uri)   (category 2: bridge)")
            print("QR code:     qrencode -t ansiutf8 '\(uri)'")
            print("name:        \(homekit.name) on port \(homekit.port)")
        }
    }

    struct ConfigPaths: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "config-paths",
            abstract: "For installers: the broker and every file the config names, one per line ('broker <url>', 'file <path>').",
            discussion: """
                Lists what the file itself names (secret files, certificates, one-time-code files), absolute, whether \
                they exist or not, and without the environment's overrides. deploy/install.sh passes each file to the \
                systemd service as a credential and installs mosquitto when the broker is local.
                """
        )

        @OptionGroup var options: ConfigOption

        func run() async throws {
            switch ConfigLoader.references(path: options.config) {
            case .success(let references):
                if let url = references.brokerURL { print("broker \(ConfigReader.redactURL(url))") }
                // A relative config path gives paths relative to the working directory: the installer needs them absolute.
                let directory = FileManager.default.currentDirectoryPath
                for file in references.files { print("file \(file.hasPrefix("/") ? file : directory + "/" + file)") }
            case .failure(let failure):
                for problem in failure.problems { writeToStandardError("lbs-gateway: config error: \(problem)\n") }
                throw ExitCode(78)
            }
        }
    }

    struct TLSPin: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "tls-pin",
            abstract: "Show a network vendor's TLS pin and the key its server presents now; --forget accepts a new key.",
            discussion: """
                With tls: first_use the gateway pins the key a server presents on its first connection and refuses any \
                other key later (tls_pin_mismatch). When a device's key changed deliberately (new device, new \
                certificate), verify it, then run this command with --forget: the gateway pins the key it sees on its \
                next attempt. Run it as the gateway's user; it works while the gateway runs.
                """
        )

        @OptionGroup var options: ConfigOption

        @Option(help: "The id of the vendor (its vendors[] entry).")
        var vendor: String

        @Flag(help: "Delete the stored first-use pin, so the next connection pins the key it sees.")
        var forget = false

        func run() async throws {
            let config = try options.loadOrExit()
            do {
                let report = try await TLSPinTool.inspect(config: config, vendorID: vendor)
                for line in report.lines { print(line) }
                guard forget else { return }
                if let removed = try await TLSPinTool.forget(config: config, vendorID: vendor) {
                    print("forgot:        sha256//\(removed) for \(report.hostPort); the gateway pins the key it sees on its next attempt")
                } else {
                    print("forgot:        nothing, no pin was stored for \(report.hostPort)")
                }
            } catch {
                writeToStandardError("lbs-gateway: \(error)\n")
                throw ExitCode(1)
            }
        }
    }
}

/// Returns when `bridge/request/restart` asked for a restart (the group then stops gracefully), or at shutdown.
struct RestartWatch: NamedService {
    let restart: GatewayRestart

    func run() async throws {
        await cancelWhenGracefulShutdown { await restart.waitUntilRequested() }
    }
}
