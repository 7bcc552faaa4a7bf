import Foundation
import GatewayTesting

// lbs-bench: benchmark programs whose numbers go into the README.
//   swift build -c release && .build/release/lbs-bench [gateway|cache|all]
// Needs `mosquitto` on PATH (each run starts its own broker on a free loopback port).

let mode = CommandLine.arguments.dropFirst().first ?? "all"

func line(_ name: String, _ value: String) { print("\(name): \(value)") }

if mode == "gateway" || mode == "all" {
    let broker = try await MosquittoBroker.started()
    let extra = 1000
    let rounds = 100
    // Alternate the two sides so background load hits both alike; report medians.
    var gatewayRuns: [ThroughputResult] = []
    var plainRuns: [ThroughputResult] = []
    var devices = 0
    for _ in 0..<5 {
        let (gateway, count) = try await GatewayBench.gatewayPublishing(broker: broker, extraDevices: extra, rounds: rounds)
        devices = count
        gatewayRuns.append(gateway)
        plainRuns.append(try await GatewayBench.plainLoop(broker: broker, devices: devices, rounds: rounds, payloadBytes: 110))
    }
    func median(_ runs: [ThroughputResult]) -> ThroughputResult { runs.sorted { $0.rate < $1.rate }[runs.count / 2] }
    let gateway = median(gatewayRuns), plain = median(plainRuns)
    line("devices", "\(devices)")
    line("gateway_state_publish_rate", String(format: "%.0f msg/s median of 5 (%d of %d delivered in %.2f s)", gateway.rate, gateway.delivered, gateway.messages, gateway.seconds))
    line("plain_libmosquitto_rate", String(format: "%.0f msg/s median of 5 (%d of %d delivered in %.2f s)", plain.rate, plain.delivered, plain.messages, plain.seconds))
    let wrapped = try await GatewayBench.wrapperLoop(broker: broker, devices: devices, rounds: rounds, payloadBytes: 110)
    line("wrapper_loop_rate", String(format: "%.0f msg/s (the plain loop through our MQTTClient; diagnostic)", wrapped.rate))
    line("throughput_ratio", String(format: "%.2f (target >= 0.8; runs: %@)", gateway.rate / plain.rate,
                                    zip(gatewayRuns, plainRuns).map { String(format: "%.2f", $0.rate / $1.rate) }.joined(separator: ", ")))
    let samples = try await GatewayBench.setLatency(broker: broker, extraDevices: extra, iterations: 2000)
    line("set_to_state_p50", String(format: "%.3f ms", GatewayBench.percentile(samples, 0.5)))
    line("set_to_state_p99", String(format: "%.3f ms (target < 5 ms)", GatewayBench.percentile(samples, 0.99)))
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

// Resident memory only (LBS_BENCH_GATEWAY=<binary> to measure another build).
if mode == "rss" {
    let broker = try await MosquittoBroker.started()
    let memory = try await GatewayBench.residentMemory(broker: broker, extraDevices: 1000, settle: .seconds(10))
    line("rss_with_1000_devices", String(format: "%.1f MB (peak %.1f MB, target < 30 MB)", Double(memory.rssKB) / 1024, Double(memory.peakKB) / 1024))
    await broker.stop()
}

if mode == "coldstart" || mode == "all" {
    let broker = try await MosquittoBroker.started()
    let result = try await ColdStartBench.run(broker: broker, devices: 1000)
    line("cold_start_to_cached_state_1000_devices", String(format: "%.0f ms from process start (%d of 1000 stale states received; target < 300 ms)", result.millis, result.received))
    await broker.stop()
}

if mode == "cache" || mode == "all" {
    try runCacheBenchmarks(arguments: Array(CommandLine.arguments.dropFirst(2)))
}
