import Foundation
import GatewayModel
import GatewayTesting
import MQTT

/// Cold start to cached state: the real `lbs-gateway` binary restarted over a cache of 1,000 devices
/// while their vendor is unreachable, timed from process start until a subscriber holds every
/// device's (stale) state.
enum ColdStartBench {
    static func run(broker: MosquittoBroker, devices: Int) async throws -> (millis: Double, received: Int) {
        let directory = try TemporaryDirectory(prefix: "lbs-coldstart")
        defer { directory.remove() }
        let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("lbs-gateway").path
        let database = directory.file("gateway.sqlite")
        // 1. Fill the cache: the demo vendor with `devices - 6` extra devices, then a clean stop.
        let fill = directory.file("fill.yaml")
        try "mqtt: {url: \(broker.url), client_id: coldstart-fill}\nlog_level: error\nstorage: {path: \(database)}\nvendors: [{type: demo, id: demo, poll_interval: 3600, devices: \(devices - 6)}]\n"
            .write(toFile: fill, atomically: true, encoding: .utf8)
        let filler = try ProcessRunner(executable: binary, arguments: ["run", "--config", fill], outputDirectory: directory.path, name: "fill")
        try await Task.sleep(for: .seconds(3))
        _ = await filler.stop()

        // 2. A fresh broker (nothing retained) and the same vendor id, now unreachable.
        let fresh = try await MosquittoBroker.started()
        let counter = try await DeliveryCounter(url: fresh.url, filter: "lbs/device/+")
        let cold = directory.file("cold.yaml")
        try "mqtt: {url: \(fresh.url), client_id: coldstart}\nlog_level: error\nstorage: {path: \(database)}\nvendors: [{type: consciousness, id: demo, url: \"http://127.0.0.1:9\", username: u, password_env: COLDSTART_PW, poll_interval: 60}]\n"
            .write(toFile: cold, atomically: true, encoding: .utf8)
        var environment = ProcessInfo.processInfo.environment
        environment["COLDSTART_PW"] = "unused"
        let started = ContinuousClock.now
        let gateway = try ProcessRunner(executable: binary, arguments: ["run", "--config", cold], environment: environment,
                                        outputDirectory: directory.path, name: "cold")
        let received = await counter.waitFor(devices)
        let elapsed = (counter.last ?? .now) - started
        _ = await gateway.stop()
        await counter.client.shutdown()
        await fresh.stop()
        return (elapsed.inSeconds * 1000, received)
    }
}
