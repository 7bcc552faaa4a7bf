// swift-tools-version:6.2
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

/// deploy/fuzz.sh builds with LBS_FUZZ=1: the modules that read outside bytes (model, vendor kit, vendors,
/// gateway) and the fuzz targets then get libFuzzer's coverage and AddressSanitizer. Dependencies keep their
/// flags, so their build is the one the tests use; without the variable nothing changes.
let fuzzing = Context.environment["LBS_FUZZ"] == "1"
let fuzzed: [SwiftSetting] = fuzzing ? [.unsafeFlags(["-sanitize=fuzzer,address"])] : []
/// The fuzz targets themselves: in a normal build they are replay tools that run inputs given as arguments.
let fuzzTarget: [SwiftSetting] = fuzzing ? fuzzed + [.define("LIBFUZZER")] : []
let fuzzLink: [LinkerSetting] = fuzzing ? [.unsafeFlags(["-sanitize=fuzzer,address"])] : []

/// The vendors, one target each (`Vendor<name>` in Sources/Vendors/<name>), with what only they need.
/// Adding a vendor: its folder, one line here, one line in Sources/LBSGatewayApp/VendorRegistry.swift.
let vendors: [(name: String, dependencies: [Target.Dependency])] = [
    ("Demo", []),
    ("Consciousness", []),
    ("Powerwall", []),
    ("GreenButton", []),
    ("SolarEdge", []),
    ("Enphase", []),
    ("Awair", []),
    ("Flume", []),
    ("Neurio", []),
    // Cognito's SRP-6a sign-in: 3072-bit arithmetic (ModularPower) and SHA-256/HMAC/HKDF (swift-crypto).
    ("Emporia", ["ModularPower", .product(name: "Crypto", package: "swift-crypto")]),
    ("Sense", [.product(name: "WSClient", package: "swift-websocket"), .product(name: "Crypto", package: "swift-crypto")]),
    ("Matter", [.product(name: "WSClient", package: "swift-websocket")]),
    // HomeKit accessories over HAP (IP): the protocol core, and NIO's TCP client for the sessions.
    ("HomeKit", ["HAP", .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"), .product(name: "Crypto", package: "swift-crypto")]),
]
let vendorTargets: [Target.Dependency] = vendors.map { .target(name: "Vendor\($0.name)") }

/// The features, one target each (`Feature<name>` in Sources/Features/<name>): extensions of the core with what
/// only they need. Adding a feature: its folder, one line here, one line in Sources/LBSGatewayApp/Features.swift.
let features: [(name: String, dependencies: [Target.Dependency])] = [
    ("HomeAssistant", []),
    ("HomeViews", []),
    ("Alerts", []),
    // Scene entities are Home Assistant `scene` components.
    ("Scenes", ["FeatureHomeAssistant"]),
    // The HTTP listener: status page, live feed, Prometheus metrics.
    ("StatusPage", [.product(name: "Hummingbird", package: "hummingbird"), .product(name: "Prometheus", package: "swift-prometheus"),
                    .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")]),
    // The gateway as a HomeKit bridge: the HAP accessory server (NIO) on the protocol core.
    ("HomeKitBridge", ["HAP", .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
                       .product(name: "Crypto", package: "swift-crypto"), .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")]),
    // Active/standby pairs elected through the broker.
    ("ActiveStandby", ["MQTT", "Resilience", .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")]),
]
let featureTargets: [Target.Dependency] = features.map { .target(name: "Feature\($0.name)") }

/// Resident memory of the gateway binary (Linux). `--static-swift-stdlib` links with `-export-dynamic`, which
/// exports every Swift symbol (4 MB of symbol tables the loader reads, and nothing can be dropped by
/// `--gc-sections`); the gateway needs no exported symbols. lld with packed relative relocations (DT_RELR,
/// glibc 2.36+) turns 3 MB of relocation records the loader reads at every start into 26 KB.
///
/// Release links put the functions a running gateway executes first, packed together
/// (`deploy/lbs-gateway.order`, made from a profile by `deploy/hot-order.sh`): the kernel maps code in 64 KB runs
/// around every page touched, so the same hot code scattered over 30 MB costs several times its size in resident
/// memory. The order is a layout hint: names it no longer finds are skipped.
let gatewayLinkerFlags: [LinkerSetting] = [
    .unsafeFlags(["-use-ld=lld", "-Xlinker", "--no-export-dynamic", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
                  // The one symbol a loaded library looks up in the executable (see Sources/CCurl/curl_loader.c).
                  "-Xlinker", "--export-dynamic-symbol=_gnutls_global_init_skip"],
                 .when(platforms: [.linux])),
    .unsafeFlags(["-Xlinker", "--symbol-ordering-file=\(Context.packageDirectory)/deploy/lbs-gateway.order",
                  "-Xlinker", "--no-warn-symbol-ordering",
                  // Swift's private functions have no symbol to order by; deploy/lbs-gateway.ld puts them all
                  // (~200 KB) next to the hot code.
                  "-Xlinker", "-T", "-Xlinker", "\(Context.packageDirectory)/deploy/lbs-gateway.ld"],
                 .when(platforms: [.linux], configuration: .release)),
]

let package = Package(
    name: "lbs-gateway",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "lbs-gateway", targets: ["LBSGatewayCLI"]),
        .executable(name: "consciousness-sim", targets: ["ConsciousnessSim"]),
        .executable(name: "lbs-sim", targets: ["LBSSim"]),
        .executable(name: "lbs-bench", targets: ["Bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/swhitty/FlyingFox.git", from: "0.27.1"),
        .package(url: "https://github.com/hummingbird-project/swift-websocket.git", from: "1.6.2"),
        .package(url: "https://github.com/attaswift/BigInt.git", from: "6.0.1"),
        // Already there for swift-websocket and Hummingbird; named for the HomeKit vendor's TCP sessions.
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        // No traits: the gateway uses neither swift-configuration readers nor the URL-encoded form coders that need
        // full Foundation (Hummingbird then builds on FoundationEssentials, and swift-configuration is not built).
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1", traits: []),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
    ],
    targets: [
        // C shims: system libraries from Debian's -dev packages.
        .systemLibrary(name: "CMosquitto", pkgConfig: "libmosquitto", providers: [.apt(["libmosquitto-dev"])]),
        // libcurl's headers (libcurl4-openssl-dev); the library itself is loaded on first use (see CCurl.h).
        .target(name: "CCurl", linkerSettings: [.linkedLibrary("crypto")]),
        // One glibc malloc arena, set before main (the gateway's few threads do not need one each).
        .target(name: "CMalloc"),
        // glibc's pipe2 and posix_spawn closefrom (GNU extensions) for the helper programs the gateway starts.
        .target(name: "CProcessSpawn"),

        // Protocol clients: thin Swift over the C libraries; no gateway knowledge.
        .target(name: "MQTT", dependencies: ["CMosquitto"], swiftSettings: strict),
        // Big numbers for SRP-6a (Emporia's Cognito, HomeKit pair setup): OpenSSL's libcrypto (there for libcurl
        // anyway) and its constant-time Montgomery exponentiation.
        .systemLibrary(name: "COpenSSLCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .target(name: "ModularPower", dependencies: ["COpenSSLCrypto"], swiftSettings: strict),
        .target(name: "CurlHTTP", dependencies: ["CCurl"], swiftSettings: strict),
        // The HomeKit Accessory Protocol's core, both sides: TLV8, SRP-6a, pair setup and verify, the encrypted
        // session's frames, HTTP messages, the attribute database. No sockets: the vendor and the bridge bring those.
        .target(
            name: "HAP",
            dependencies: ["GatewayModel", "ModularPower", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: strict + fuzzed
        ),

        // The normalized model every vendor produces and the publisher consumes.
        .target(name: "GatewayModel", swiftSettings: strict + fuzzed),
        // Breaker, retry, quotas: pure logic with an injected clock.
        .target(name: "Resilience", dependencies: ["GatewayModel"], swiftSettings: strict),
        // SQLite cache, outbox and history on Debian's libsqlite3, through a thin layer of its own (Cache/SQLite):
        // raw SQL, a writer and reader connections, prepared statements kept per connection.
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .target(name: "Cache", dependencies: ["CSQLite", "GatewayModel"], swiftSettings: strict),
        // What every vendor builds on: the config reader and shared options, HTTP with breaker, retry and
        // quota, TLS trust, secrets, the push-stream helper. The `Vendor` protocol itself is in GatewayModel.
        .target(
            name: "VendorKit",
            dependencies: [
                "GatewayModel", "Resilience", "CurlHTTP", "CProcessSpawn",
                .product(name: "Logging", package: "swift-log"),
                // HMAC-SHA1 for one-time passwords (TOTP).
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strict + fuzzed
        ),
    ] + vendors.map { vendor in
        // One target per vendor (Sources/Vendors/<Name>), so a dependency reaches only the vendors that need it.
        .target(
            name: "Vendor\(vendor.name)", dependencies: ["VendorKit", "GatewayModel", "Resilience", "CurlHTTP",
                .product(name: "Logging", package: "swift-log")] + vendor.dependencies,
            path: "Sources/Vendors/\(vendor.name)", swiftSettings: strict + fuzzed
        )
    } + [
        // The command parser and its strict JSON: what a `/set` payload may be. Its own target so the fuzzer links it.
        .target(name: "CommandParsing", dependencies: ["GatewayModel"], swiftSettings: strict + fuzzed),
        // The core: hub, device registry, command path (parser → lanes → outbox → vendor), state publishing,
        // topics, config, cache writer, the extension and feature protocols, the MQTT and cache services. It
        // imports no vendor and no HTTP stack.
        .target(
            name: "GatewayCore",
            dependencies: [
                "GatewayModel", "MQTT", "VendorKit", "Resilience", "Cache", "CommandParsing",
                .product(name: "Logging", package: "swift-log"),
                // The HomeKit bridge's setup id (SHA-256 of its code).
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict + fuzzed
        ),
    ] + features.map { feature in
        // One target per feature (Sources/Features/<Name>): an extension of the core and what only it needs.
        .target(
            name: "Feature\(feature.name)", dependencies: ["GatewayCore", "GatewayModel", "Cache", "VendorKit",
                .product(name: "Logging", package: "swift-log")] + feature.dependencies,
            path: "Sources/Features/\(feature.name)", swiftSettings: strict
        )
    } + [
        // The composition root: the registry of vendors, the features in dispatch order, the services. The
        // executable, the benchmarks and the tests build the same gateway from it.
        .target(
            name: "LBSGatewayApp",
            dependencies: ["GatewayCore", "VendorKit", "CurlHTTP", .product(name: "Logging", package: "swift-log"),
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")] + featureTargets + vendorTargets,
            swiftSettings: strict
        ),
        .executableTarget(
            name: "LBSGatewayCLI",
            dependencies: [
                "LBSGatewayApp", "GatewayCore", "FeatureActiveStandby", "Cache", "VendorKit", "CMalloc",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict,
            linkerSettings: gatewayLinkerFlags
        ),

        // Simulators and test helpers (real wire formats, real processes).
        // What every vendor simulator builds on: the loopback server, canned responses.
        .target(
            name: "SimulatorKit",
            dependencies: [.product(name: "FlyingFox", package: "FlyingFox"), .product(name: "FlyingSocks", package: "FlyingFox")],
            swiftSettings: strict
        ),
        .target(
            name: "ConsciousnessSimulator",
            dependencies: ["SimulatorKit", "GatewayModel", .product(name: "FlyingFox", package: "FlyingFox"), .product(name: "Yams", package: "Yams")],
            swiftSettings: strict
        ),
        .executableTarget(name: "ConsciousnessSim", dependencies: ["ConsciousnessSimulator"], swiftSettings: strict),
        // Simulators of the energy, water and air vendors (recorded responses plus the real devices' traps).
        .target(
            name: "VendorSimulators",
            dependencies: ["SimulatorKit", "GatewayModel", "VendorKit", .product(name: "FlyingFox", package: "FlyingFox"), .product(name: "Yams", package: "Yams"),
                           "ModularPower", .product(name: "BigInt", package: "BigInt"), .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "LBSSim",
            dependencies: ["VendorSimulators", "GatewayModel", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: strict
        ),
        .target(name: "GatewayTesting", dependencies: ["MQTT", "GatewayModel"], swiftSettings: strict),
        // The `.integration` suite trait (swift-testing): linked by the test targets only, never by a program.
        .target(name: "TestTraits", swiftSettings: strict),
        // Vendor test helpers: a sink that records events, the recorded fixtures of Tests/Fixtures.
        .target(name: "VendorTesting", dependencies: ["GatewayModel", "VendorKit"], swiftSettings: strict),
        .executableTarget(
            name: "Bench",
            dependencies: ["LBSGatewayApp", "GatewayCore", "MQTT", "Cache", "GatewayTesting", "VendorKit", "VendorDemo", "GatewayModel", "CMosquitto", "ConsciousnessSimulator", "CurlHTTP", "VendorSimulators",
                           "VendorHomeKit", "HAP", .product(name: "Logging", package: "swift-log")],
            path: "Sources/Bench",
            swiftSettings: strict
        ),


        // libFuzzer harnesses (deploy/fuzz.sh).
        .target(name: "FuzzDriver", path: "Fuzz/FuzzDriver", swiftSettings: strict + fuzzTarget),
        .executableTarget(
            name: "CommandParserFuzz", dependencies: ["FuzzDriver", "CommandParsing", "GatewayModel"], path: "Fuzz/CommandParserFuzz",
            swiftSettings: strict + fuzzTarget, linkerSettings: fuzzLink
        ),
        .executableTarget(
            name: "ConfigFuzz", dependencies: ["FuzzDriver", "LBSGatewayApp", "GatewayCore", "VendorKit"], path: "Fuzz/ConfigFuzz",
            swiftSettings: strict + fuzzTarget, linkerSettings: fuzzLink
        ),
        .executableTarget(
            name: "VendorFuzz",
            dependencies: ["FuzzDriver", "GatewayModel", "VendorKit", "CurlHTTP", "Resilience", "HAP"] + vendorTargets,
            path: "Fuzz/VendorFuzz", swiftSettings: strict + fuzzTarget, linkerSettings: fuzzLink
        ),

        .testTarget(name: "GatewayModelTests", dependencies: ["GatewayModel"], swiftSettings: strict),
        .testTarget(name: "MQTTTests", dependencies: ["TestTraits", "MQTT", "GatewayTesting"], swiftSettings: strict),
        // BigInt in the simulators and tests: an SRP implementation independent of the gateway's (ModularPower).
        .testTarget(name: "HAPTests", dependencies: ["HAP", "GatewayModel", "ModularPower", "VendorSimulators", .product(name: "BigInt", package: "BigInt"), .product(name: "Crypto", package: "swift-crypto")], swiftSettings: strict),
        .testTarget(name: "CurlHTTPTests", dependencies: ["TestTraits", "CurlHTTP", "ConsciousnessSimulator", "GatewayTesting"], swiftSettings: strict),
        .testTarget(name: "ResilienceTests", dependencies: ["TestTraits", "Resilience", "GatewayTesting"], swiftSettings: strict),
        .testTarget(name: "CacheTests", dependencies: ["TestTraits", "Cache", "CSQLite", "GatewayTesting"], swiftSettings: strict),
        .testTarget(
            name: "VendorTests",
            dependencies: ["TestTraits", "VendorKit", "VendorTesting", "ConsciousnessSimulator", "VendorSimulators", "SimulatorKit", "GatewayTesting", "LBSGatewayApp", "GatewayCore", "GatewayModel", "Resilience", "CurlHTTP",
                           .product(name: "Logging", package: "swift-log"), .product(name: "FlyingFox", package: "FlyingFox"), .product(name: "BigInt", package: "BigInt"), "ModularPower",
                           .product(name: "WSClient", package: "swift-websocket"), "HAP"] + vendorTargets,
            swiftSettings: strict
        ),
        .testTarget(
            name: "GatewayTests",
            dependencies: ["TestTraits", "LBSGatewayApp", "GatewayCore", "CommandParsing", "GatewayTesting", "ConsciousnessSimulator", "VendorSimulators", "Cache", "GatewayModel", "VendorKit", "VendorTesting",
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"), .product(name: "Logging", package: "swift-log"),
                           // The YAML reader's answers are compared with Yams'.
                           .product(name: "Yams", package: "Yams")] + featureTargets + vendorTargets,
            swiftSettings: strict
        ),
    ],
    swiftLanguageModes: [.v6]
)
