import Foundation
import GatewayTesting
import MQTT

// lbs-bench: benchmark programs whose numbers go into docs/benchmarks.md (the key figures also into the README).
//   swift build -c release && .build/release/lbs-bench [gateway|latency|publish|rss|coldstart|cache|overload|storage|peer|sense|matter|homekit|all]
// Needs `mosquitto` on PATH (each run starts its own broker on a free loopback port).

let mode = CommandLine.arguments.dropFirst().first ?? "all"

func line(_ name: String, _ value: String) { print("\(name): \(value)") }

/// The brokers the benchmarks compare, as lines of a fresh mosquitto's config: `nodelay` answers without Nagle's
/// delay (deploy/mosquitto ships it); `installed` is the broker as deploy/install.sh sets it up.
enum BrokerSettings {
    static let nodelay = "set_tcp_nodelay true"
    static let installed = nodelay + "\nmax_queued_messages 10000"
    static let byName = ["nodelay": nodelay, "installed": installed]
}

if mode == "gateway" || mode == "all" {
    let broker = try await MosquittoBroker.started()
    let extra = 1000
    let rounds = 100
    // Alternate the two sides so background load hits both alike; report medians. Nine pairs, not five: on two cores
    // shared with the broker and the subscriber single pairs swing by ±0.1, and the median of five by half that.
    let pairs = 9
    var gatewayRuns: [ThroughputResult] = []
    var plainRuns: [ThroughputResult] = []
    var devices = 0
    for _ in 0..<pairs {
        let (gateway, count) = try await GatewayBench.gatewayPublishing(broker: broker, extraDevices: extra, rounds: rounds)
        devices = count
        gatewayRuns.append(gateway)
        plainRuns.append(try await GatewayBench.plainLoop(broker: broker, devices: devices, rounds: rounds, payloadBytes: 110))
    }
    func median(_ runs: [ThroughputResult]) -> ThroughputResult { runs.sorted { $0.rate < $1.rate }[runs.count / 2] }
    let gateway = median(gatewayRuns), plain = median(plainRuns)
    line("devices", "\(devices)")
    line("gateway_state_publish_rate", String(format: "%.0f msg/s median of %d (%d of %d delivered in %.2f s)", gateway.rate, pairs, gateway.delivered, gateway.messages, gateway.seconds))
    line("plain_libmosquitto_rate", String(format: "%.0f msg/s median of %d (%d of %d delivered in %.2f s)", plain.rate, pairs, plain.delivered, plain.messages, plain.seconds))
    let wrapped = try await GatewayBench.wrapperLoop(broker: broker, devices: devices, rounds: rounds, payloadBytes: 110)
    line("wrapper_loop_rate", String(format: "%.0f msg/s (the plain loop through our MQTTClient; diagnostic)", wrapped.rate))
    line("throughput_ratio", String(format: "%.2f (target >= 0.9; runs: %@)", gateway.rate / plain.rate,
                                    zip(gatewayRuns, plainRuns).map { String(format: "%.2f", $0.rate / $1.rate) }.joined(separator: ", ")))
    let samples = try await GatewayBench.setLatency(broker: broker, extraDevices: extra, iterations: 2000)
    line("set_to_state_p50", String(format: "%.3f ms", GatewayBench.percentile(samples, 0.5)))
    line("set_to_state_p99", String(format: "%.3f ms (target < 5 ms)", GatewayBench.percentile(samples, 0.99)))
    let qos1 = try await GatewayBench.setLatency(broker: broker, extraDevices: extra, iterations: 2000, qos: .atLeastOnce)
    line("set_to_state_qos1_p50", String(format: "%.3f ms", GatewayBench.percentile(qos1, 0.5)))
    line("set_to_state_qos1_p99", String(format: "%.3f ms (target < 5 ms)", GatewayBench.percentile(qos1, 0.99)))
    let memory = try await GatewayBench.residentMemory(broker: broker, extraDevices: extra, settle: .seconds(10))
    line("rss_with_1000_devices", String(format: "%.1f MB (peak %.1f MB, target < 30 MB)", Double(memory.rssKB) / 1024, Double(memory.peakKB) / 1024))
    await broker.stop()
}

// Only the gateway's publish path, long enough to profile (`perf record -g -p <pid>`).
if mode == "publish" {
    let broker = try await MosquittoBroker.started()
    for _ in 0..<3 {
        let (result, count) = try await GatewayBench.gatewayPublishing(broker: broker, extraDevices: 1000, rounds: 200)
        line("gateway_state_publish_rate", String(format: "%.0f msg/s (%d devices, %d of %d delivered)", result.rate, count, result.delivered, result.messages))
    }
    await broker.stop()
}

// Only the gateway's logic per state (no network, no broker), to profile it (`perf record -g`).
//   lbs-bench logic [rounds]   (default 200 rounds over 1,000 demo devices)
if mode == "logic" {
    let rounds = max(1, CommandLine.arguments.dropFirst(2).first.flatMap { Int($0) } ?? 200)
    for _ in 0..<3 {
        let result = try await GatewayBench.logicOnly(extraDevices: 1000, rounds: rounds)
        line("gateway_logic_per_state", String(format: "%.2f µs (%d updates, %d messages handed to the transport)",
                                                result.nanosecondsPerUpdate / 1000, result.updates, result.published))
    }
}

// Only the plain libmosquitto loop (the throughput ceiling), to compare its CPU per message with `publish`'s.
if mode == "plain" {
    let broker = try await MosquittoBroker.started()
    for _ in 0..<3 {
        let result = try await GatewayBench.plainLoop(broker: broker, devices: 1006, rounds: 200, payloadBytes: 110)
        line("plain_libmosquitto_rate", String(format: "%.0f msg/s (%d of %d delivered)", result.rate, result.delivered, result.messages))
    }
    await broker.stop()
}

// `/set` round trips only, QoS 0 and QoS 1.
//   lbs-bench latency [round_trips]   (default 500 per broker and QoS)
if mode == "latency" {
    let roundTrips = max(1, CommandLine.arguments.dropFirst(2).first.flatMap { Int($0) } ?? 500)
    // Also against a broker with `set_tcp_nodelay true`: mosquitto's own Nagle otherwise holds the state PUBLISH
    // behind its PUBACK to a client that publishes and subscribes on one connection (the bench client).
    for brokerConfig in ["", BrokerSettings.nodelay] {
        let broker = try await MosquittoBroker.started(extraConfiguration: brokerConfig)
        for qos in [MQTTQoS.atMostOnce, .atLeastOnce] {
            let samples = try await GatewayBench.setLatency(broker: broker, extraDevices: 1000, iterations: roundTrips, qos: qos)
            line("set_to_state_qos\(qos.rawValue)\(brokerConfig.isEmpty ? "" : " (broker: \(brokerConfig))")",
                 String(format: "p50 %.3f ms, p99 %.3f ms (%d of %d round trips; %d over 10 ms)",
                        GatewayBench.percentile(samples, 0.5), GatewayBench.percentile(samples, 0.99), samples.count, roundTrips,
                        samples.filter { $0 > 10 }.count))
        }
        await broker.stop()
    }
}

// Resident memory only (LBS_BENCH_GATEWAY=<binary> to measure another build, e.g. deploy/build-release.sh's).
//   lbs-bench rss [runs] [limit_mb] [http_limit_mb]   (defaults 1 and none: with a limit, exits 1 when the median
//   reaches it)
// Each run starts the gateway afresh with 1,000 demo devices and reads VmRSS after 10 s; then the same with an HTTP
// vendor as well (libcurl and its libraries load only for one; run from the repository root), and with the cache on.
// `limit_mb` applies to the first, `http_limit_mb` to the second.
if mode == "rss" {
    let arguments = Array(CommandLine.arguments.dropFirst(2))
    let runs = max(1, arguments.first.flatMap { Int($0) } ?? 1)
    let limit = arguments.count > 1 ? Double(arguments[1]) : nil
    let httpLimit = arguments.count > 2 ? Double(arguments[2]) : nil
    let broker = try await MosquittoBroker.started()
    func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
    var medians: [Double] = []
    for (storage, http) in [(false, false), (false, true), (true, false)] {
        var samples: [Double] = []
        var peaks: [Double] = []
        for _ in 0..<runs {
            let memory = try await GatewayBench.residentMemory(broker: broker, extraDevices: 1000, settle: .seconds(10), storage: storage,
                                                               httpVendor: http)
            samples.append(Double(memory.rssKB) / 1024)
            peaks.append(Double(memory.peakKB) / 1024)
        }
        medians.append(median(samples))
        line(storage ? "rss_with_1000_devices_and_cache" : http ? "rss_with_1000_devices_and_an_http_vendor" : "rss_with_1000_devices",
             String(format: "%.1f MB median of %d (", median(samples), runs) + samples.map { String(format: "%.1f", $0) }.joined(separator: ", ")
                + String(format: "; peak %.1f MB), target < 30 MB", peaks.max() ?? 0))
    }
    await broker.stop()
    for (name, median, bound) in [("", medians[0], limit), (" with an HTTP vendor", medians[1], httpLimit)] {
        if let bound, median >= bound {
            print("rss: the median\(name) \(String(format: "%.1f", median)) MB is not under \(bound) MB")
            exit(1)
        }
    }
}

// Overload: the demo driven faster than the box can publish; `/set` latency and memory meanwhile.
//   lbs-bench overload [devices] [poll_interval_s] [seconds] [nodelay|installed]   (defaults 5000 0.05 60: ~100,000 updates/s
//   offered; `nodelay`: the broker with `set_tcp_nodelay true`; `installed`: also `max_queued_messages 10000`, as
//   deploy/install.sh and deploy/mosquitto set up the broker). LBS_BENCH_MQTT adds keys to the gateway's `mqtt:` section
//   (e.g. LBS_BENCH_MQTT="max_backlog: 2000" to compare backlog limits).
if mode == "overload" {
    let arguments = Array(CommandLine.arguments.dropFirst(2))
    let devices = arguments.count > 0 ? Int(arguments[0]) ?? 5000 : 5000
    let poll = arguments.count > 1 ? Double(arguments[1]) ?? 0.05 : 0.05
    let seconds = arguments.count > 2 ? Int(arguments[2]) ?? 60 : 60
    let broker = try await MosquittoBroker.started(extraConfiguration: arguments.count > 3 ? BrokerSettings.byName[arguments[3]] ?? "" : "")
    let result = try await OverloadBench.run(broker: broker, devices: devices, pollInterval: poll, duration: .seconds(seconds), commandsPerSecond: 10)
    line("offered_updates", String(format: "%.0f /s (%d devices every %.3f s)", result.offeredPerSecond, devices + 6, poll))
    line("published_states", String(format: "%.0f /s", result.publishedPerSecond))
    line("set_to_state_under_overload", String(format: "p50 %.2f ms, p99 %.2f ms, max %.2f ms (%d commands, %d unanswered in 10 s; target p99 < 50 ms)",
                                               GatewayBench.percentile(result.samples, 0.5), GatewayBench.percentile(result.samples, 0.99),
                                               result.samples.last ?? .nan, result.samples.count + result.lost, result.lost))
    line("rss_mb_every_5s", result.rss.map { String(format: "%d s: %.1f", $0.second, Double($0.kb) / 1024) }.joined(separator: ", "))
    line("merged_or_dropped", result.coalesced)
    await broker.stop()
}

// Soak: 1,000 demo devices and a simulated house, a QoS 1 command every 100 ms, the broker restarted every 5 min and
// the vendor down every 7 min (both divided by `compression`); every command's reply counted, RSS slope.
//   lbs-bench soak [minutes] [compression] [devices]   (defaults 30 10 1000: a restart every 30 s, an outage every 42 s)
if mode == "soak" {
    let arguments = Array(CommandLine.arguments.dropFirst(2))
    let minutes = arguments.count > 0 ? Double(arguments[0]) ?? 30 : 30
    let compression = arguments.count > 1 ? Double(arguments[1]) ?? 10 : 10
    let devices = arguments.count > 2 ? Int(arguments[2]) ?? 1000 : 1000
    let result = try await SoakBench.run(minutes: minutes, compression: compression, devices: devices)
    line("soak", String(format: "%.1f min, %d devices, %d broker restarts, %d vendor outages", minutes, devices + 6, result.brokerRestarts, result.vendorOutages))
    line("commands", "\(result.sent) sent, \(result.replies.count) answered; outcomes \(result.outcomes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))")
    line("lost", "\(result.lost.count)\(result.lost.isEmpty ? "" : " (" + result.lost.prefix(20).map(String.init).joined(separator: ", ") + ")")")
    line("answered_twice", "\(result.duplicated.count)\(result.duplicated.isEmpty ? "" : " (" + result.duplicated.prefix(20).map(String.init).joined(separator: ", ") + ")")")
    line("vendor_control_calls", "\(result.vendorControlCalls) at the simulator for \(result.consciousnessOK) ok house commands")
    line("rss_mb", result.rss.map { String(format: "%.0f s: %.1f", $0.seconds, Double($0.kb) / 1024) }.joined(separator: ", "))
    line("rss_slope", String(format: "%.1f KB/min after the first fifth (min %.1f MB, max %.1f MB)", result.slopeKBPerMinute,
                              Double(result.rss.map(\.kb).min() ?? 0) / 1024, Double(result.rss.map(\.kb).max() ?? 0) / 1024))
    line("waited_for_gateway_after_restarts", String(format: "%.1f s in total", result.waitedForGateway))
    if !result.lost.isEmpty || !result.duplicated.isEmpty { exit(1) }
}

// What the SQLite cache adds to a command: /set → vendor HTTP → state with and without storage, and plain HTTP.
if mode == "storage" {
    let iterations = Int(CommandLine.arguments.dropFirst(2).first ?? "") ?? 500
    let broker = try await MosquittoBroker.started()
    let result = try await StorageBench.run(broker: broker, iterations: iterations)
    func summary(_ samples: [Double]) -> String {
        String(format: "p50 %.3f ms, p99 %.3f ms", GatewayBench.percentile(samples, 0.5), GatewayBench.percentile(samples, 0.99))
    }
    line("plain_http_control_request", summary(result.plainHTTP))
    line("set_to_state_without_storage", summary(result.withoutStorage))
    line("set_to_state_with_storage", summary(result.withStorage))
    line("storage_adds_at_p50", String(format: "%.3f ms (target <= 0.3 ms; %d round trips each)",
                                       GatewayBench.percentile(result.withStorage, 0.5) - GatewayBench.percentile(result.withoutStorage, 0.5), iterations))
    line("demo_set_to_state_without_storage", summary(result.demoWithoutStorage))
    line("demo_set_to_state_with_storage", summary(result.demoWithStorage))
    line("storage_adds_at_p50_demo", String(format: "%.3f ms (no HTTP: the storage path alone)",
                                            GatewayBench.percentile(result.demoWithStorage, 0.5) - GatewayBench.percentile(result.demoWithoutStorage, 0.5)))
    line("outbox_commit_direct", summary(result.commitDirect) + " (one row stored as sending, synchronous = FULL: the disk's floor)")
    line("outbox_commit_from_task", summary(result.commitFromTask) + " (the same through CacheStore.run, as the gateway calls it without the journal)")
    line("outbox_journal_append", summary(result.journalAppend) + " (the same appended to the outbox journal from a task: O_DSYNC write, the gateway's default)")
    await broker.stop()
}

// Side by side with a Python peer bridge (deploy/bench/peer-bridge.py), each with its own broker and backend process.
//   lbs-bench peer [rounds] [round_trips]   (defaults 5 300; run from the repository root; needs lbs-gateway and
//   consciousness-sim beside lbs-bench, or LBS_BENCH_GATEWAY / LBS_BENCH_CONSCIOUSNESS_SIM; the peer's venv is made once;
//   LBS_BENCH_BASELINE_GATEWAY=<another build> adds that build to the same rounds, for before/after figures)
if mode == "peer" {
    let arguments = Array(CommandLine.arguments.dropFirst(2))
    let rounds = max(1, arguments.first.flatMap { Int($0) } ?? 5)
    let iterations = max(10, arguments.count > 1 ? Int(arguments[1]) ?? 300 : 300)
    try await PeerBench.run(rounds: rounds, iterations: iterations)
}

// Cold start over a 1,000-device cache (vendor unreachable): exec → first stale state, all of them, online.
//   lbs-bench coldstart [runs]   (default 7; LBS_BENCH_GATEWAY=<binary> to measure another build)
if mode == "coldstart" || mode == "all" {
    let runs = max(1, Int(CommandLine.arguments.dropFirst(2).first ?? "") ?? 7)
    let broker = try await MosquittoBroker.started()
    let directory = try TemporaryDirectory(prefix: "lbs-coldstart")
    let database = try await ColdStartBench.fillCache(broker: broker, devices: 1000, directory: directory)
    await broker.stop()
    // Against Debian's default mosquitto, then with `set_tcp_nodelay true` (deploy/mosquitto and install.sh set it): the
    // default broker holds its PUBACKs behind Nagle's algorithm, which paces the ~3,500 QoS 1 start-up messages.
    for (suffix, brokerConfiguration) in [("", ""), ("_nodelay", BrokerSettings.nodelay)] {
        var results: [ColdStartBench.Result] = []
        for _ in 0..<runs {
            results.append(try await ColdStartBench.run(database: database, devices: 1000, directory: directory, brokerConfiguration: brokerConfiguration))
        }
        // Medians over the runs that reached the milestone (a run that did not shows as "-").
        func median(_ values: [Double]) -> Double {
            let reached = values.filter { !$0.isNaN }.sorted()
            return reached.isEmpty ? .nan : reached[reached.count / 2]
        }
        func list(_ values: [Double]) -> String { values.map { $0.isNaN ? "-" : String(format: "%.0f", $0) }.joined(separator: ", ") }
        line("cold_start_first_state\(suffix)", String(format: "%.0f ms median of %d (%@; target < 150 ms)", median(results.map(\.firstState)), runs, list(results.map(\.firstState))))
        line("cold_start_online\(suffix)", String(format: "%.0f ms median (%@)", median(results.map(\.online)), list(results.map(\.online))))
        let complete = results.filter { !$0.allStates.isNaN }.count
        line("cold_start_to_cached_state_1000_devices\(suffix)", String(format: "%.0f ms median from exec of the %d of %d runs in which all 1,000 stale states arrived (%@; fewest received: %d)",
                                                                       median(results.map(\.allStates)), complete, runs, list(results.map(\.allStates)),
                                                                       results.map(\.received).min() ?? 0))
    }
    directory.remove()
}

if mode == "cache" || mode == "all" {
    try runCacheBenchmarks(arguments: Array(CommandLine.arguments.dropFirst(2)))
}

// A Matter server with 500 nodes reporting 200 attribute changes a second: publish latency and CPU.
if mode == "matter" {
    let broker = try await MosquittoBroker.started()
    let result = try await MatterBench.run(broker: broker, nodes: 500, rate: 200, duration: .seconds(30))
    line("matter_updates", String(format: "%d sent in %.0f s (%.0f/s), %d published", result.sent, result.seconds, Double(result.sent) / result.seconds, result.received))
    line("matter_publish_latency", String(format: "p50 %.2f ms, p99 %.2f ms, max %.2f ms (simulator report → MQTT state)", result.p50, result.p99, result.max))
    line("matter_gateway_cpu", String(format: "%.1f %% of one core", result.cpuPercent))
    line("matter_gateway_rss", String(format: "%.1f MB", Double(result.rssKB) / 1024))
    await broker.stop()
}

// A Sense realtime feed: 2 frames a second, 40 detected devices changing every frame.
// HomeKit against real accessories (HAP-python): pair setup, pair verify, event → MQTT, memory per accessory.
if mode == "homekit" {
    let arguments = CommandLine.arguments.dropFirst(2).compactMap { Int($0) }
    let rounds = arguments.first ?? 50
    let accessories = max(2, arguments.dropFirst().first ?? 8)
    let (setup, verify, verifyAndRead) = try await HomeKitBench.pairing(rounds: rounds)
    func summary(_ values: [Double]) -> String {
        String(format: "p50 %.1f ms, p90 %.1f ms, max %.1f ms (%d rounds)", HomeKitBench.percentile(values, 0.5), HomeKitBench.percentile(values, 0.9),
               values.max() ?? .nan, values.count)
    }
    line("homekit_pair_setup", summary(setup))
    line("homekit_pair_verify", summary(verify))
    line("homekit_pair_verify_and_accessories", summary(verifyAndRead))
    let broker = try await MosquittoBroker.started()
    let one = try await HomeKitBench.gateway(broker: broker, count: 1, events: 200)
    line("homekit_event_to_mqtt", String(format: "p50 %.2f ms, p99 %.2f ms, max %.2f ms (%d events, from the accessory's EVENT frame to the state on MQTT)",
                                         HomeKitBench.percentile(one.latencies, 0.5), HomeKitBench.percentile(one.latencies, 0.99), one.latencies.max() ?? .nan, one.latencies.count))
    let many = try await HomeKitBench.gateway(broker: broker, count: accessories, events: 0)
    line("homekit_rss", String(format: "%.1f MB with 1 accessory, %.1f MB with %d", Double(one.rssKB) / 1024, Double(many.rssKB) / 1024, accessories))
    line("homekit_memory_per_accessory", String(format: "%.0f KB", Double(many.rssKB - one.rssKB) / Double(accessories - 1)))
    await broker.stop()
}

// The gateway as a HomeKit bridge with 1,000 devices: MQTT /set → HAP event at aiohomekit, memory with and without.
if mode == "homekit-bridge" {
    let events = CommandLine.arguments.dropFirst(2).compactMap { Int($0) }.first ?? 100
    let broker = try await MosquittoBroker.started()
    let on = try await HomeKitBridgeBench.run(broker: broker, devices: 1000, events: events, bridge: true)
    let off = try await HomeKitBridgeBench.run(broker: broker, devices: 1000, events: 0, bridge: false)
    line("homekit_bridge_accessories", "\(on.accessories) of 1,006 devices (HomeKit's limit: 149 behind one bridge, plus the bridge)")
    line("homekit_bridge_set_to_event", String(format: "p50 %.2f ms, p99 %.2f ms, max %.2f ms (%d events, MQTT /set → demo vendor → HAP event at aiohomekit)",
                                              HomeKitBench.percentile(on.latencies, 0.5), HomeKitBench.percentile(on.latencies, 0.99), on.latencies.max() ?? .nan, on.latencies.count))
    line("homekit_bridge_rss", String(format: "%.1f MB with the bridge and a controller connected, %.1f MB without (1,000 demo devices)",
                                      Double(on.rssKB) / 1024, Double(off.rssKB) / 1024))
    await broker.stop()
}

if mode == "sense" {
    let broker = try await MosquittoBroker.started()
    let result = try await SenseBench.run(broker: broker, devices: 40, duration: .seconds(30))
    line("sense_feed_frames", String(format: "%.1f frames/s (%d in %.0f s, 41 devices each)", Double(result.frames) / result.seconds, result.frames, result.seconds))
    line("sense_states_published", String(format: "%.1f states/s (at most 1 a second per device: 41)", Double(result.states) / result.seconds))
    line("sense_gateway_cpu", String(format: "%.1f %% of one core", result.cpuPercent))
    line("sense_gateway_rss", String(format: "%.1f MB", Double(result.rssKB) / 1024))
    await broker.stop()
}
