import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayModel
import GatewayTesting
import MQTT
import TestTraits
import Testing
import VendorKit
import VendorSimulators

/// Scenes end to end: defined in the config or added by request (kept in the cache across a restart), run from
/// MQTT across two vendors (the demo and Matter), one result per action on the response topic and as an event,
/// Home Assistant `scene` entities.
@Suite(.integration, .timeLimit(.minutes(2))) struct SceneTests {
    static let scenes = """
    scenes:
      - id: evening
        name: Evening
        actions:
          - {device: demo_light, set: {state: "ON", brightness: 30}}
          - {device: matter_5, set: {brightness: 50}}
          - {device: demo_lock, set: {lock: LOCK}}
          - {device: nowhere_1, set: {state: "ON"}}
    """

    func start(directory: TemporaryDirectory? = nil, broker: MosquittoBroker? = nil) async throws -> (MatterSimulator, GatewayHarness) {
        let light = try Data(contentsOf: URL(fileURLWithPath: Fixtures.path("matter", "nodes/color_temperature_light.json")))
        let simulator = try MatterSimulator(nodes: [light])
        try await simulator.start()
        let vendors = """
              - {type: demo, id: demo, poll_interval: 3600}
              - {type: matter, id: matter, url: "\(await simulator.url)"}
            """
        let gateway = try await GatewayHarness.start(broker: broker, directory: directory, yaml: Self.scenes, vendors: vendors, storage: true)
        return (simulator, gateway)
    }

    @Test func aSceneRunsAcrossVendorsWithOneResultPerAction() async throws {
        let (simulator, gateway) = try await start()
        defer { Task { await gateway.stop(); await simulator.stop() } }
        let client = try await gateway.observer("lbs/device/+", "lbs/bridge/event", "homeassistant/scene/#", "replies/#")
        _ = try await client.waitForMessage(topic: "lbs/device/matter_5", timeout: .seconds(10))
        let entity = try await client.waitForMessage(topic: "homeassistant/scene/lbs_scene_evening/config", timeout: .seconds(10))
        #expect(entity.json?["command_topic"] as? String == "lbs/scene/evening/set" && entity.json?["name"] as? String == "Evening")

        try await client.publish("lbs/scene/evening/set", "ON", qos: .atLeastOnce, responseTopic: "replies/evening")
        let reply = try await client.waitForMessage(topic: "replies/evening", timeout: .seconds(15))
        let results = try #require((reply.json?["data"] as? [String: Any])?["results"] as? [[String: Any]], "\(reply.text)")
        #expect(results.map { $0["status"] as? String } == ["ok", "ok", "ok", "error"])
        #expect(((results[3]["error"] as? [String: Any])?["code"] as? String) == "unknown_device")
        #expect((reply.json?["data"] as? [String: Any])?["failed"] as? Double == 1)
        let event = try await client.waitForMessage(topic: "lbs/bridge/event", timeout: .seconds(5)) { $0.json?["type"] as? String == "scene_run" }
        #expect((event.json?["data"] as? [String: Any])?["scene"] as? String == "evening")
        _ = try await client.waitForMessage(topic: "lbs/device/demo_light", timeout: .seconds(5)) { $0.json?["brightness"] as? Double == 30 }
        _ = try await client.waitForMessage(topic: "lbs/device/matter_5", timeout: .seconds(5)) { $0.json?["brightness"] as? Double == 50 }
        #expect(simulator.commands.contains("device_command 5/1/8 MoveToLevelWithOnOff"))
        // An unknown scene and a retained run are refused with a code.
        try await client.publish("lbs/scene/nothing/set", "ON", qos: .atLeastOnce, responseTopic: "replies/nothing")
        let unknown = try await client.waitForMessage(topic: "replies/nothing", timeout: .seconds(5))
        #expect(unknown.text.contains("invalid_payload"))
    }

    @Test func anAddedSceneIsKeptAcrossARestartAndCanBeRemoved() async throws {
        let directory = try TemporaryDirectory()
        let (simulator, gateway) = try await start(directory: directory)
        let client = try await gateway.observer("lbs/bridge/response/#", "homeassistant/scene/#")
        let movie = #"{"id":"movie","name":"Movie night","actions":[{"device":"demo_light","set":{"state":"OFF"}},{"device":"demo_plug","set":{"state":"ON"}}],"transaction":"t1"}"#
        try await client.publish("lbs/bridge/request/scene/add", movie, qos: .atLeastOnce)
        let added = try await client.waitForMessage(topic: "lbs/bridge/response/scene/add", timeout: .seconds(5))
        #expect(added.json?["status"] as? String == "ok" && added.json?["transaction"] as? String == "t1", "\(added.text)")
        _ = try await client.waitForMessage(topic: "homeassistant/scene/lbs_scene_movie/config", timeout: .seconds(5))
        // The config's scene cannot be replaced or removed by request.
        try await client.publish("lbs/bridge/request/scene/remove", #"{"id":"evening"}"#, qos: .atLeastOnce)
        let refused = try await client.waitForMessage(topic: "lbs/bridge/response/scene/remove", timeout: .seconds(5))
        #expect(refused.json?["status"] as? String == "error")
        await client.shutdown()
        let broker = gateway.broker
        await gateway.stop()
        await simulator.stop()

        let (again, restarted) = try await start(directory: directory, broker: broker)
        defer { Task { await restarted.stop(); await again.stop() } }
        let second = try await restarted.observer("lbs/bridge/response/#", "homeassistant/scene/#", "lbs/device/demo_plug")
        try await second.publish("lbs/bridge/request/scenes", "{}", qos: .atLeastOnce)
        let list = try await second.waitForMessage(topic: "lbs/bridge/response/scenes", timeout: .seconds(5))
        let scenes = try #require((list.json?["data"] as? [String: Any])?["scenes"] as? [[String: Any]])
        #expect(scenes.map { $0["id"] as? String } == ["evening", "movie"])
        #expect(scenes.map { $0["source"] as? String } == ["config", "request"])
        try await second.publish("lbs/bridge/request/scene/run", #"{"id":"movie"}"#, qos: .atLeastOnce)
        let ran = try await second.waitForMessage(topic: "lbs/bridge/response/scene/run", timeout: .seconds(10))
        #expect((ran.json?["data"] as? [String: Any])?["failed"] as? Double == 0, "\(ran.text)")
        _ = try await second.waitForMessage(topic: "lbs/device/demo_plug", timeout: .seconds(5)) { $0.json?["state"] as? String == "ON" }
        try await second.publish("lbs/bridge/request/scene/remove", #"{"id":"movie"}"#, qos: .atLeastOnce)
        let removed = try await second.waitForMessage(topic: "lbs/bridge/response/scene/remove", timeout: .seconds(5))
        #expect(removed.json?["status"] as? String == "ok")
        _ = try await second.waitForMessage(topic: "homeassistant/scene/lbs_scene_movie/config", timeout: .seconds(5)) { $0.payload.isEmpty }
    }

    @Test func theConfigsScenesAreChecked() {
        let yaml = """
        mqtt: {url: "mqtt://127.0.0.1:1883"}
        http: {enabled: false}
        scenes:
          - {id: Bad Id, actions: [{device: demo_light, set: {state: "ON"}}]}
          - {id: empty, actions: []}
          - {id: ok, actions: [{device: demo_light, set: {state: "ON", brightness: 40, on: true}}]}
          - {id: ok, actions: [{device: demo_light, set: {state: "OFF"}}]}
        vendors: [{type: demo, id: demo}]
        """
        guard case .failure(let problems) = ConfigLoader.parse(yaml: yaml, baseDirectory: "/tmp") else {
            Issue.record("the config should be refused")
            return
        }
        let paths = problems.problems.map(\.path)
        #expect(paths == ["scenes[0]", "scenes[1]", "scenes[3].id"], "\(paths)")
    }

    /// Names, actions, size and count are bounded: 2,000 scenes with 30 KB names once took 66 MB of memory,
    /// 59 MB of cache and 60 MB retained on the broker.
    @Test func whatARequestMayAddIsBounded() async throws {
        let gateway = try await GatewayHarness.start(vendors: "  - {type: demo, id: demo, poll_interval: 3600}", storage: true)
        defer { Task { await gateway.stop() } }
        let client = try await gateway.observer("lbs/bridge/response/scene/add", "lbs/bridge/event")
        /// The code of the newest command_failed event.
        func lastFailure() -> String? {
            let failed = client.messages(on: "lbs/bridge/event").last { $0.json?["type"] as? String == "command_failed" }
            return ((failed?.json?["data"] as? [String: Any])?["error"] as? [String: Any])?["code"] as? String
        }
        func add(_ body: String) async throws -> [String: Any] {
            let before = client.messages(on: "lbs/bridge/response/scene/add").count
            try await client.publish("lbs/bridge/request/scene/add", body, qos: .atLeastOnce)
            try await waitUntil("scene/add answered", timeout: .seconds(10)) { client.messages(on: "lbs/bridge/response/scene/add").count > before }
            return client.messages(on: "lbs/bridge/response/scene/add").last?.json ?? [:]
        }
        let action = #"{"device":"demo_light","set":{"state":"ON"}}"#
        let longName = String(repeating: "n", count: 30_000)
        let tooLong = try await add(#"{"id":"long","name":"\#(longName)","actions":[\#(action)]}"#)
        #expect(tooLong["status"] as? String == "error", "\(tooLong)")
        #expect(client.messages(on: "lbs/bridge/response/scene/add").last?.text.contains("128 characters") == true)
        try await waitUntil("payload_too_large event") { lastFailure() == "payload_too_large" }
        let many = try await add(#"{"id":"many","actions":[\#(Array(repeating: action, count: 101).joined(separator: ","))]}"#)
        #expect(many["status"] as? String == "error")
        try await waitUntil("invalid_payload event") { lastFailure() == "invalid_payload" }
        let wideSet = (0..<33).map { #""k\#($0)":1"# }.joined(separator: ",")
        let wide = try await add(#"{"id":"wide","actions":[{"device":"demo_light","set":{\#(wideSet)}}]}"#)
        #expect(wide["status"] as? String == "error")

        // 256 scenes fit; the 257th is refused with limit_reached; replacing one of the 256 still works.
        for index in 0..<Scene.maxScenes {
            try await client.publish("lbs/bridge/request/scene/add", #"{"id":"s\#(index)","actions":[\#(action)]}"#, qos: .atLeastOnce)
        }
        try await waitUntil("256 scenes added", timeout: .seconds(30)) {
            client.messages(on: "lbs/bridge/response/scene/add").filter { $0.json?["status"] as? String == "ok" }.count == Scene.maxScenes
        }
        let over = try await add(#"{"id":"one-more","actions":[\#(action)]}"#)
        #expect(over["status"] as? String == "error", "\(over)")
        try await waitUntil("limit_reached event") { lastFailure() == "limit_reached" }
        let replaced = try await add(#"{"id":"s7","name":"Seven","actions":[\#(action)]}"#)
        #expect(replaced["status"] as? String == "ok")
    }
}
