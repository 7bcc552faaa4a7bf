import ArgumentParser
import GatewayModel
import Foundation
import VendorSimulators

/// `lbs-sim <vendor>`: a vendor's simulator on loopback, serving recorded responses, for trying the
/// gateway without hardware (`deploy/quickstart.sh --with-simulators`) and for the tests.
@main
struct LBSSim: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lbs-sim",
        abstract: "Vendor simulators for lbs-gateway (recorded responses, real wire formats, injectable faults).",
        subcommands: [Powerwall.self, SolarEdge.self, Enphase.self, Awair.self, Flume.self, Neurio.self, Emporia.self, Sense.self, Matter.self]
    )

    struct Powerwall: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "A Tesla Backup Gateway's local API (plain HTTP).")

        @Option(help: "Port on 127.0.0.1 (0: a free one, printed).") var port: UInt16 = 0
        @Option(help: "Folder of recorded responses.") var fixtures = "Tests/Fixtures/powerwall"
        @Option(help: "File holding the customer password (default: the LBS_SIM_PASSWORD variable, else 'powerwall').")
        var passwordFile: String?
        @Option(help: "powerwall2 (full API) or powerwall3 (aggregates, soe, grid status only).") var model = "powerwall2"
        @Flag(help: "Accept POST /api/operation from the customer login (old firmware).") var writableOperation = false

        func run() async throws {
            guard let model = PowerwallSimulator.Model(rawValue: model) else {
                throw ValidationError("--model must be powerwall2 or powerwall3")
            }
            let password = try passwordFile.map { try String(contentsOfFile: $0, encoding: .utf8).trimmingCharacters(in: .newlines) }
                ?? ProcessInfo.processInfo.environment["LBS_SIM_PASSWORD"] ?? "powerwall"
            let simulator = try PowerwallSimulator(configuration: .init(
                password: password, fixtures: fixtures, model: model, customerMayWriteOperation: writableOperation, port: port
            ))
            let bound = try await simulator.start()
            print("powerwall simulator (\(model.rawValue)) on http://127.0.0.1:\(bound)")
            while !Task.isCancelled { try await Task.sleep(for: .seconds(3600)) }
        }
    }

    struct SolarEdge: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "solaredge", abstract: "The SolarEdge Monitoring API v2 (plain HTTP).")

        @Option(help: "Port on 127.0.0.1 (0: a free one, printed).") var port: UInt16 = 0
        @Option(help: "Folder of recorded responses.") var fixtures = "Tests/Fixtures/solaredge"
        @Option(help: "File holding the accepted API key (default: the LBS_SIM_API_KEY variable, else 'solaredge').")
        var apiKeyFile: String?

        func run() async throws {
            let key = try apiKeyFile.map { try String(contentsOfFile: $0, encoding: .utf8).trimmingCharacters(in: .newlines) }
                ?? ProcessInfo.processInfo.environment["LBS_SIM_API_KEY"] ?? "solaredge"
            let simulator = try SolarEdgeSimulator(configuration: .init(apiKey: key, fixtures: fixtures, port: port))
            try await simulator.start()
            print("solaredge simulator on \(await simulator.baseURL) (site \(simulator.siteID))")
            while !Task.isCancelled { try await Task.sleep(for: .seconds(3600)) }
        }
    }

    struct Enphase: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "An Enphase IQ Gateway (Envoy) serving a recorded firmware folder (plain HTTP).")

        @Option(help: "Port on 127.0.0.1 (0: a free one, printed).") var port: UInt16 = 0
        @Option(help: "A recorded firmware folder.") var folder = "Tests/Fixtures/enphase/7.6.175_with_cts"
        @Option(help: "File holding the accepted owner token (default: the LBS_SIM_TOKEN variable, else 'enphase').")
        var tokenFile: String?
        @Option(help: "A daily local-time window the Envoy does not answer, like its nightly reset (e.g. 23:05-23:20).")
        var outage: String?

        func run() async throws {
            let token = try tokenFile.map { try String(contentsOfFile: $0, encoding: .utf8).trimmingCharacters(in: .newlines) }
                ?? ProcessInfo.processInfo.environment["LBS_SIM_TOKEN"] ?? "enphase"
            var window: DailyWindow?
            if let outage {
                guard let parsed = DailyWindow(outage) else { throw ValidationError("--outage wants HH:MM-HH:MM, e.g. 23:05-23:20") }
                window = parsed
            }
            let simulator = try EnphaseSimulator(folder: folder, token: token, port: port, darkWindow: window)
            let bound = try await simulator.start()
            print("enphase simulator (\(folder)) on http://127.0.0.1:\(bound)")
            while !Task.isCancelled { try await Task.sleep(for: .seconds(3600)) }
        }
    }

    struct Awair: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Awair's cloud API (/v1) or one monitor's Local API, replaying recorded cassettes (plain HTTP)."
        )

        @Option(help: "Port on 127.0.0.1 (0: a free one, printed).") var port: UInt16 = 0
        @Option(help: "Folder of recorded cassettes.") var fixtures = "Tests/Fixtures/awair"
        @Option(help: "Serve this recorded monitor's Local API (e.g. awair-elem-1419e1.local) instead of the cloud.") var local: String?
        @Option(help: "File holding the accepted cloud token (default: the LBS_SIM_TOKEN variable, else 'awair').")
        var tokenFile: String?

        func run() async throws {
            let token = try tokenFile.map { try String(contentsOfFile: $0, encoding: .utf8).trimmingCharacters(in: .newlines) }
                ?? ProcessInfo.processInfo.environment["LBS_SIM_TOKEN"] ?? "awair"
            let simulator = try AwairSimulator(mode: local.map { .local(host: $0) } ?? .cloud(token: token), folder: fixtures, port: port)
            try await simulator.start()
            print("awair simulator (\(local.map { "local \($0)" } ?? "cloud")) on \(await simulator.baseURL)")
            while !Task.isCancelled { try await Task.sleep(for: .seconds(3600)) }
        }
    }

    struct Flume: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Flume's Personal API (OAuth, devices, usage queries, leaks; plain HTTP).")

        @Option(help: "Port on 127.0.0.1 (0: a free one, printed).") var port: UInt16 = 0
        @Option(help: "Folder of recorded responses.") var fixtures = "Tests/Fixtures/flume"
        @Option(help: "The accepted client id.") var clientID = "flume"
        @Option(help: "The accepted username.") var username = "flume@example.com"
        @Option(help: "File holding the accepted client secret (default: the LBS_SIM_CLIENT_SECRET variable, else 'flume').")
        var clientSecretFile: String?
        @Option(help: "File holding the accepted password (default: the LBS_SIM_PASSWORD variable, else 'flume').")
        var passwordFile: String?

        func run() async throws {
            func secret(_ file: String?, _ variable: String) throws -> String {
                try file.map { try String(contentsOfFile: $0, encoding: .utf8).trimmingCharacters(in: .newlines) }
                    ?? ProcessInfo.processInfo.environment[variable] ?? "flume"
            }
            let credentials = FlumeSimulator.Credentials(
                clientID: clientID, clientSecret: try secret(clientSecretFile, "LBS_SIM_CLIENT_SECRET"), username: username,
                password: try secret(passwordFile, "LBS_SIM_PASSWORD")
            )
            let simulator = try FlumeSimulator(credentials: credentials, fixtures: fixtures, port: port)
            try await simulator.start()
            print("flume simulator on \(await simulator.baseURL)")
            // Water keeps running: a quarter gallon a minute, so the counter visibly grows.
            while !Task.isCancelled {
                try await Task.sleep(for: .seconds(60))
                simulator.updateMeter { meter in
                    meter.lastMinute = 0.25
                    meter.today += 0.25
                }
            }
        }
    }

    struct Neurio: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "A Neurio / PWRview sensor's /current-sample (plain HTTP).")

        @Option(help: "Port on 127.0.0.1 (0: a free one, printed).") var port: UInt16 = 0
        @Option(help: "A sample in the published /current-sample format.") var sample = "Tests/Fixtures/neurio/current-sample.json"

        func run() async throws {
            let simulator = try NeurioSimulator(sampleFile: sample, port: port)
            try await simulator.start()
            print("neurio simulator on \(await simulator.baseURL)")
            while !Task.isCancelled { try await Task.sleep(for: .seconds(3600)) }
        }
    }

    struct Emporia: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Emporia's cloud and its Cognito sign-in, SRP or refresh token (a Vue, three circuits, a plug, an EV charger; plain HTTP).")

        @Option(help: "Port on 127.0.0.1 (0: a free one, printed).") var port: UInt16 = 0
        @Option(help: "File holding the accepted refresh token (default: the LBS_SIM_REFRESH_TOKEN variable, else 'emporia').")
        var refreshTokenFile: String?
        @Option(help: "The account's username for the SRP sign-in.") var username = "home@example.com"
        @Option(help: "File holding the account's password (default: the LBS_SIM_PASSWORD variable, else 'emporia-password').")
        var passwordFile: String?

        func run() async throws {
            let token = try refreshTokenFile.map { try String(contentsOfFile: $0, encoding: .utf8).trimmingCharacters(in: .newlines) }
                ?? ProcessInfo.processInfo.environment["LBS_SIM_REFRESH_TOKEN"] ?? "emporia"
            let password = try passwordFile.map { try String(contentsOfFile: $0, encoding: .utf8).trimmingCharacters(in: .newlines) }
                ?? ProcessInfo.processInfo.environment["LBS_SIM_PASSWORD"] ?? "emporia-password"
            let simulator = EmporiaSimulator(refreshToken: token, username: username, password: password, port: port)
            try await simulator.start()
            print("emporia simulator on \(await simulator.baseURL) (auth_url: \(await simulator.baseURL)/)")
            while !Task.isCancelled { try await Task.sleep(for: .seconds(3600)) }
        }
    }

    struct Matter: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "A Matter server's WebSocket API (python-matter-server, schema 11) with node dumps; commands come back as attribute reports."
        )

        @Option(help: "Port on 127.0.0.1 (0: a free one, printed).") var port: UInt16 = 0
        @Option(help: "Folder of node dumps (*.json, python-matter-server's node format); default: the test fixtures.")
        var nodes = "Tests/Fixtures/matter/nodes"

        func run() async throws {
            let files = try FileManager.default.contentsOfDirectory(atPath: nodes).filter { $0.hasSuffix(".json") }.sorted()
            let dumps = try files.map { try Data(contentsOf: URL(fileURLWithPath: nodes + "/" + $0)) }
            let simulator = try MatterSimulator(nodes: dumps, port: port)
            try await simulator.start()
            print("matter server simulator on \(await simulator.url) (\(dumps.count) nodes)")
            while !Task.isCancelled { try await Task.sleep(for: .seconds(3600)) }
        }
    }

    struct Sense: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Sense's sign-in, trends and realtime WebSocket feed (2 frames a second; plain HTTP/WS).")

        @Option(help: "Port on 127.0.0.1 (0: a free one, printed).") var port: UInt16 = 0
        @Option(help: "The accepted email.") var email = "sense@example.com"
        @Option(help: "File holding the accepted password (default: the LBS_SIM_PASSWORD variable, else 'sense').") var passwordFile: String?
        @Option(help: "File holding a base32 TOTP secret: the account then asks for a one-time code.") var totpSecretFile: String?

        func run() async throws {
            let password = try passwordFile.map { try String(contentsOfFile: $0, encoding: .utf8).trimmingCharacters(in: .newlines) }
                ?? ProcessInfo.processInfo.environment["LBS_SIM_PASSWORD"] ?? "sense"
            let secret = try totpSecretFile.map { try String(contentsOfFile: $0, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines) }
            let simulator = SenseSimulator(email: email, password: password, totpSecret: secret, port: port)
            try await simulator.start()
            print("sense simulator: url \(await simulator.baseURL), realtime_url \(await simulator.realtimeURL)")
            while !Task.isCancelled { try await Task.sleep(for: .seconds(3600)) }
        }
    }
}
