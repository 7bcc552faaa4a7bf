import ArgumentParser
import Foundation
import Gateway
import Logging
import ServiceLifecycle
import UnixSignals

@main
struct LBSGateway: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lbs-gateway",
        abstract: "MQTT edge gateway for the Living Building System: vendor devices in, normalized MQTT topics out.",
        version: GatewayController.version,
        subcommands: [Run.self, CheckConfig.self],
        defaultSubcommand: nil
    )
}

struct ConfigOption: ParsableArguments {
    @Option(name: .shortAndLong, help: "Path to the YAML configuration file.")
    var config: String = "/etc/lbs-gateway/config.yaml"
}

extension LBSGateway {
    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Run the gateway until SIGTERM or SIGINT.")

        @OptionGroup var options: ConfigOption

        @Option(help: "Override log_level (trace, debug, info, notice, warning, error, critical).")
        var logLevel: String?

        func run() async throws {
            let config: GatewayConfig
            switch ConfigLoader.load(path: options.config) {
            case .success(let loaded): config = loaded
            case .failure(let failure):
                // One clear line per problem, never a stack trace.
                for problem in failure.problems { FileHandle.standardError.write(Data("lbs-gateway: config error: \(problem)\n".utf8)) }
                throw ExitCode(78)
            }
            let levelName = logLevel ?? config.logLevel
            let level = Logger.Level(rawValue: levelName) ?? .info
            LoggingSystem.bootstrap { label in
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                return handler
            }
            let logger = Logger(label: "lbs-gateway")
            let services: [any Service]
            do {
                services = try GatewayService.services(config: config, logger: logger)
            } catch {
                FileHandle.standardError.write(Data("lbs-gateway: cannot open storage.path: \(error)\n".utf8))
                throw ExitCode(74)
            }
            let group = ServiceGroup(configuration: .init(
                services: services.map { .init(service: $0) },
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            ))
            do {
                try await group.run()
            } catch {
                FileHandle.standardError.write(Data("lbs-gateway: \(error)\n".utf8))
                throw ExitCode(1)
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
            switch ConfigLoader.load(path: options.config) {
            case .success(let config):
                print("\(options.config): ok (\(config.vendors.count) vendor(s): \(config.vendors.map { "\($0.id) (\($0.type))" }.joined(separator: ", ")))")
            case .failure(let failure):
                for problem in failure.problems { print("\(options.config): \(problem)") }
                print("\(failure.problems.count) problem(s) found")
                throw ExitCode(1)
            }
        }
    }
}
