import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayTesting
import MQTT
import TestTraits
import Testing

@Suite(.integration, .timeLimit(.minutes(2))) struct HistoryAndBatchTests {
    @Test func historyAnswersFromTheCacheInRawAndHourlyResolution() async throws {
        let gateway = try await GatewayHarness.start(vendors: "  - {type: demo, id: demo, poll_interval: 0.1}", storage: true)
        defer { Task { await gateway.stop() } }
        let client = try await gateway.observer("lbs/bridge/response/#")
        // Readings are written in batches about once a second: asked until five are there.
        var attempt = 0
        var found: MQTTMessage?
        try await waitUntil("five raw readings", timeout: .seconds(20)) {
            attempt += 1
            let tag = "h1-\(attempt)"
            try await client.publish("lbs/bridge/request/history", #"{"device":"demo_plug","key":"power","transaction":"\#(tag)"}"#, qos: .atLeastOnce)
            let answer = try await client.waitForMessage(topic: "lbs/bridge/response/history") { $0.text.contains("\"\(tag)\"") }
            found = answer
            return ((answer.json?["data"] as? [String: Any])?["points"] as? [[String: Any]])?.count ?? 0 >= 5
        }
        let raw = try #require(found)
        let data = try #require(raw.json?["data"] as? [String: Any])
        #expect(data["unit"] as? String == "W")
        let points = try #require(data["points"] as? [[String: Any]])
        #expect(points.count >= 5, "only \(points.count) raw points")
        #expect(points.allSatisfy { $0["value"] is Double && $0["time"] is String })

        try await client.publish("lbs/bridge/request/history",
                                 #"{"device":"demo_energy","key":"solar_energy","resolution":"hourly","transaction":"h2"}"#, qos: .atLeastOnce)
        let hourly = try await client.waitForMessage(topic: "lbs/bridge/response/history") { $0.text.contains("h2") }
        let hourPoints = try #require((hourly.json?["data"] as? [String: Any])?["points"] as? [[String: Any]])
        #expect(hourPoints.count >= 1)
        #expect(hourPoints.first?["sum"] != nil && hourPoints.first?["max"] != nil)

        try await client.publish("lbs/bridge/request/history", #"{"device":"demo_light","key":"state","transaction":"h3"}"#, qos: .atLeastOnce)
        let refused = try await client.waitForMessage(topic: "lbs/bridge/response/history") { $0.text.contains("h3") }
        #expect(refused.json?["status"] as? String == "error")
        await client.shutdown()
    }

    @Test func batchRunsEachItemAndReportsPerItemResults() async throws {
        let gateway = try await GatewayHarness.start()
        defer { Task { await gateway.stop() } }
        let client = try await gateway.observer("lbs/bridge/response/batch", "lbs/device/demo_plug")
        let request = """
        {"transaction":"b1","commands":[
          {"device":"demo_light","set":{"state":"ON","brightness":12}},
          {"device":"ghost","set":{"state":"ON"}},
          {"device":"demo_plug","set":{"state":"OFF"}},
          {"device":"demo_light","set":{"brightness":400}}]}
        """
        try await client.publish("lbs/bridge/request/batch", request, qos: .atLeastOnce)
        let response = try await client.waitForMessage(topic: "lbs/bridge/response/batch")
        #expect(response.json?["transaction"] as? String == "b1")
        let results = try #require((response.json?["data"] as? [String: Any])?["results"] as? [[String: Any]])
        #expect(results.map { $0["status"] as? String } == ["ok", "error", "ok", "error"])
        #expect(((results[1]["error"] as? [String: Any])?["code"] as? String) == "unknown_device")
        #expect(((results[3]["error"] as? [String: Any])?["code"] as? String) == "out_of_range")
        try await client.waitForMessage(topic: "lbs/device/demo_plug") { $0.json?["state"] as? String == "OFF" }
        await client.shutdown()
    }
}
