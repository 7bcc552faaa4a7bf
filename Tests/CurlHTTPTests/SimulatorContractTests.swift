import ConsciousnessSimulator
import CurlHTTP
import Foundation
import GatewayTesting
import TestTraits
import Testing

@Suite("CurlHTTP against the consciousness simulator", .integration)
struct SimulatorContractTests {
    @Test func loginListControlAndBatchRoundTrip() async throws {
        try await withSimulator { fixture in
            let token = try await fixture.login()

            let list = try await fixture.client.send(fixture.request(.get, "/devices", token: token))
            #expect(list.status == 200)
            #expect(list.headers["content-type"] == "application/json")
            let listed = try jsonObject(list.body)
            #expect(listed["total"] as? Int == 7)
            let devices = try #require(listed["devices"] as? [[String: Any]])
            let types = Set(devices.compactMap { $0["type"] as? String })
            #expect(types == ["thermostat", "smart_light", "security_camera", "motion_sensor", "smart_speaker", "smart_lock", "garage_door"])

            let control = try await fixture.client.send(
                fixture.request(.put, "/devices/lights-kitchen/control", token: token, json: #"{"action":"turn_off","value":null}"#)
            )
            #expect(control.status == 200)
            let controlled = try jsonObject(control.body)
            #expect(controlled["status"] as? String == "success")
            let device = try #require(controlled["device"] as? [String: Any])
            #expect(device["status"] as? String == "inactive")
            // Like the real server: turn_off sets `status` only; the light's `power` property stays as seeded.
            #expect((device["properties"] as? [String: Any])?["power"] as? Bool == true)
            #expect(fixture.simulator.counters.controlCalls(deviceID: "lights-kitchen", action: "turn_off") == 1)

            let batch = try await fixture.client.send(fixture.request(
                .post, "/devices/batch-control", token: token,
                json: #"{"devices":[{"device_id":"lights-kitchen","action":"turn_on"},{"device_id":"nope","action":"turn_on"}]}"#
            ))
            #expect(batch.status == 200)
            let results = try #require(try jsonObject(batch.body)["results"] as? [[String: Any]])
            #expect(results.map { $0["status"] as? String } == ["success", "error"])

            let missing = try await fixture.client.send(
                fixture.request(.put, "/devices/nope/control", token: token, json: #"{"action":"turn_on","value":null}"#)
            )
            #expect(missing.status == 404)
            #expect(try jsonObject(missing.body)["detail"] as? String == "Device not found")

            let single = try await fixture.client.send(fixture.request(.get, "/devices/lights-kitchen", token: token))
            #expect(single.status == 404)
            #expect(single.effectiveURL.hasSuffix("/api/v1/devices/lights-kitchen"))
        }
    }

    @Test func missingAndBadTokensAreRejected() async throws {
        try await withSimulator { fixture in
            let anonymous = try await fixture.client.send(HTTPClientRequest(url: "\(fixture.api)/devices"))
            #expect(anonymous.status == 401)
            #expect(try jsonObject(anonymous.body)["detail"] as? String == "Authentication required")

            let forged = try await fixture.client.send(fixture.request(.get, "/devices", token: "forged"))
            #expect(try jsonObject(forged.body)["detail"] as? String == "Invalid token")

            let wrongPassword = try await fixture.client.send(HTTPClientRequest(
                method: .post, url: "\(fixture.api)/auth/login", body: Data(#"{"username":"admin","password":"nope"}"#.utf8)
            ))
            #expect(wrongPassword.status == 401)
            #expect(try jsonObject(wrongPassword.body)["detail"] as? String == "Invalid credentials")
        }
    }

    @Test func tokenExpiryFollowsTheInjectedClock() async throws {
        try await withSimulator(expiresIn: 60) { fixture in
            let token = try await fixture.login()
            #expect(try await fixture.client.send(fixture.request(.get, "/devices", token: token)).status == 200)

            fixture.clock.advance(by: 61)
            let expired = try await fixture.client.send(fixture.request(.get, "/devices", token: token))
            #expect(expired.status == 401)
            #expect(try jsonObject(expired.body)["detail"] as? String == "Invalid token")

            let fresh = try await fixture.login()
            fixture.simulator.expireAllTokens()
            #expect(try await fixture.client.send(fixture.request(.get, "/devices", token: fresh)).status == 401)

            let again = try await fixture.login()
            fixture.simulator.inject(.expiredToken)
            #expect(try await fixture.client.send(fixture.request(.get, "/devices", token: again)).status == 401)
            #expect(try await fixture.client.send(fixture.request(.get, "/devices", token: again)).status == 200)
            #expect(fixture.simulator.counters.logins == 3)
        }
    }

    @Test func rateLimitExposesRetryAfter() async throws {
        try await withSimulator { fixture in
            let token = try await fixture.login()
            fixture.simulator.injectRateLimit(count: 1, retryAfterSeconds: 42)
            let limited = try await fixture.client.send(fixture.request(.get, "/devices", token: token))
            #expect(limited.status == 429)
            #expect(limited.headers["retry-after"] == "42")
            #expect(limited.retryAfterSeconds == 42)
            #expect(try await fixture.client.send(fixture.request(.get, "/devices", token: token)).status == 200)
        }
    }

    @Test func serverErrorBurstThenRecovery() async throws {
        try await withSimulator { fixture in
            let token = try await fixture.login()
            fixture.simulator.injectServerErrors(count: 3)
            var statuses: [Int] = []
            for _ in 0..<4 {
                statuses.append(try await fixture.client.send(fixture.request(.get, "/devices", token: token)).status)
            }
            #expect(statuses == [500, 502, 503, 200])
        }
    }

    @Test func malformedJSONAndHTMLErrorFaults() async throws {
        try await withSimulator { fixture in
            let token = try await fixture.login()
            fixture.simulator.inject(.malformedJSON)
            let truncated = try await fixture.client.send(fixture.request(.get, "/devices", token: token))
            #expect(truncated.status == 200)
            #expect(throws: (any Error).self) { try JSONSerialization.jsonObject(with: truncated.body) }

            fixture.simulator.inject(.htmlError)
            let html = try await fixture.client.send(fixture.request(.get, "/devices", token: token))
            #expect(html.status == 502)
            #expect(html.headers["Content-Type"] == "text/html")
            #expect(String(decoding: html.body, as: UTF8.self).contains("<h1>502 Bad Gateway</h1>"))
        }
    }

    @Test func adminRouteDrivesFaultsOverHTTP() async throws {
        try await withSimulator { fixture in
            let token = try await fixture.login()
            let base = await fixture.simulator.baseURL
            let injected = try await fixture.client.send(HTTPClientRequest(
                method: .post, url: "\(base)/_sim/faults", body: Data(#"{"fault":"serverErrors","count":2,"method":"GET"}"#.utf8)
            ))
            #expect(injected.status == 200)
            var statuses: [Int] = []
            for _ in 0..<3 {
                statuses.append(try await fixture.client.send(fixture.request(.get, "/devices", token: token)).status)
            }
            #expect(statuses == [500, 502, 200])
            let counters = try jsonObject(try await fixture.client.send(HTTPClientRequest(url: "\(base)/_sim/counters")).body)
            #expect(counters["faults_served"] as? Int == 2)
        }
    }

    @Test func downFaultOverAdminRouteStopsAndRestartsOnTheSamePort() async throws {
        try await withSimulator { fixture in
            let base = await fixture.simulator.baseURL
            let port = await fixture.simulator.port
            let accepted = try await fixture.client.send(HTTPClientRequest(
                method: .post, url: "\(base)/_sim/faults", body: Data(#"{"fault":"down","seconds":1}"#.utf8)
            ))
            #expect(accepted.status == 200)
            try await waitUntil("the simulator down") { await !fixture.simulator.isRunning }
            await expectHTTPError(.connectFailed) { try await fixture.client.send(HTTPClientRequest(url: "\(base)/health")) }
            try await waitUntil("the simulator back") {
                (try? await fixture.client.send(HTTPClientRequest(url: "\(base)/health")).status) == 200
            }
            #expect(await fixture.simulator.port == port)
        }
    }
}
