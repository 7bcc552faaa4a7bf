import ConsciousnessSimulator
import CurlHTTP
import FlyingFox
import Foundation
import GatewayTesting
import TestTraits
import Testing

@Suite("CurlHTTP transport behaviour", .integration)
struct TransportTests {
    @Test(arguments: [HTTPClientRequest.Method.get, .post, .put, .patch, .delete])
    func methodsHeadersAndBodiesReachTheServer(method: HTTPClientRequest.Method) async throws {
        try await withScriptedServer({ request in
            let body = try await request.bodyData
            let echo: [String: Any] = [
                "method": request.method.rawValue,
                "header": request.headers[HTTPHeader("X-Trace")] ?? "",
                "contentType": request.headers[.contentType] ?? "",
                "body": String(decoding: body, as: UTF8.self),
            ]
            let json = try JSONSerialization.data(withJSONObject: echo)
            return HTTPResponse(statusCode: .ok, headers: [.contentType: "application/json", HTTPHeader("X-Reply"): "yes"], body: json)
        }) { base in
            let client = try CurlHTTP.HTTPClient()
            defer { client.shutdown() }
            let payload = method == .get ? nil : #"{"answer":42}"#
            let response = try await client.send(HTTPClientRequest(
                method: method,
                url: "\(base)/echo",
                headers: ["X-Trace": "abc-123", "Content-Type": "application/json"],
                body: payload.map { Data($0.utf8) }
            ))
            #expect(response.status == 200)
            #expect(response.headers["x-reply"] == "yes")
            #expect(response.headers["X-REPLY"] == "yes")
            let echo = try jsonObject(response.body)
            #expect(echo["method"] as? String == method.rawValue)
            #expect(echo["header"] as? String == "abc-123")
            #expect(echo["body"] as? String == (payload ?? ""))
        }
    }

    @Test func bodyWithoutContentTypeIsNotLabelledAsAForm() async throws {
        try await withScriptedServer({ request in
            HTTPResponse(statusCode: .ok, body: Data((request.headers[.contentType] ?? "none").utf8))
        }) { base in
            let client = try CurlHTTP.HTTPClient()
            defer { client.shutdown() }
            let response = try await client.send(HTTPClientRequest(method: .post, url: base, body: Data("x".utf8)))
            #expect(String(decoding: response.body, as: UTF8.self) == "none")
        }
    }

    @Test func gzipResponseIsDecoded() async throws {
        let document = Array(String(repeating: #"{"reading":21.5}"#, count: 500).utf8)
        try await withScriptedServer({ request in
            let accepts = request.headers[HTTPHeader("Accept-Encoding")] ?? ""
            guard accepts.contains("gzip") else {
                return HTTPResponse(statusCode: .badRequest, body: Data("no gzip offered".utf8))
            }
            return HTTPResponse(statusCode: .ok, headers: [.contentEncoding: "gzip"], body: Data(gzipStored(document)))
        }) { base in
            let client = try CurlHTTP.HTTPClient()
            defer { client.shutdown() }
            let response = try await client.send(HTTPClientRequest(url: base))
            #expect(response.status == 200)
            #expect(Array(response.body) == document)
        }
    }

    @Test func connectionRefusedIsConnectFailedAndRestartServesAgain() async throws {
        try await withSimulator { fixture in
            let url = "\(await fixture.simulator.baseURL)/health"
            await fixture.simulator.stop()
            let error = await expectHTTPError(.connectFailed) {
                try await fixture.client.send(HTTPClientRequest(url: url, connectTimeout: .seconds(2)))
            }
            // Refused (7), or reset while the stopping server still held the accepted socket (56).
            #expect([7, 56].contains(error?.curlCode ?? -1))

            try await fixture.simulator.start()
            let response = try await fixture.client.send(HTTPClientRequest(url: url))
            #expect(response.status == 200)
        }
    }

    @Test func slowServerHitsTheTotalTimeout() async throws {
        try await withSimulator { fixture in
            fixture.simulator.inject(.slow(delay: .seconds(20)))
            let started = ContinuousClock.now
            await expectHTTPError(.timeout) {
                try await fixture.client.send(HTTPClientRequest(url: "\(fixture.api)/consciousness/emotions", timeout: .milliseconds(300)))
            }
            #expect(ContinuousClock.now - started < .seconds(5))
        }
    }

    @Test func responseOverLimitByContentLength() async throws {
        try await withSimulator { fixture in
            let token = try await fixture.login()
            var request = fixture.request(.get, "/devices", token: token)
            request.maxResponseBytes = 256
            let error = await expectHTTPError(.responseTooLarge) { try await fixture.client.send(request) }
            #expect(error?.message.contains("256") == true)
        }
    }

    @Test func responseOverLimitWhileStreaming() async throws {
        let chunks = Array(repeating: Array(repeating: UInt8(ascii: "a"), count: 1000), count: 20)
        try await withScriptedServer({ _ in
            HTTPResponse(statusCode: .ok, body: HTTPBodySequence(from: ChunkedBody(chunks: chunks)))
        }) { base in
            let client = try CurlHTTP.HTTPClient()
            defer { client.shutdown() }
            var request = HTTPClientRequest(url: base, maxResponseBytes: 5000)
            await expectHTTPError(.responseTooLarge) { try await client.send(request) }

            request.maxResponseBytes = 20_000
            let response = try await client.send(request)
            #expect(response.body.count == 20_000)
            #expect(response.headers["Content-Length"] == nil)
        }
    }

    @Test func twoHundredConcurrentRequestsComplete() async throws {
        try await withSimulator { fixture in
            let token = try await fixture.login()
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<200 {
                    let request = index.isMultiple(of: 2)
                        ? fixture.request(.get, "/devices", token: token)
                        : fixture.request(.get, "/consciousness/status", token: token)
                    group.addTask { try await fixture.client.send(request).status }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.count == 200)
            #expect(statuses.allSatisfy { $0 == 200 })
            #expect(fixture.simulator.counters.requests == 201)
        }
    }

    @Test func cancellingTheTaskAbortsTheTransfer() async throws {
        try await withSimulator { fixture in
            fixture.simulator.inject(.slow(delay: .seconds(30)))
            let client = fixture.client
            let url = "\(fixture.api)/consciousness/emotions"
            let task = Task { () async throws -> HTTPClientResponse in
                try await client.send(HTTPClientRequest(url: url, timeout: .seconds(60)))
            }
            try await waitUntil("the request at the simulator") { fixture.simulator.counters.requests == 1 }
            let started = ContinuousClock.now
            task.cancel()
            let result = await task.result
            #expect(ContinuousClock.now - started < .seconds(2))
            switch result {
            case .success:
                Issue.record("a cancelled request must not succeed")
            case .failure(let error):
                #expect((error as? HTTPError)?.kind == .cancelled)
            }
            // The engine keeps serving after a cancellation.
            let health = "\(await fixture.simulator.baseURL)/health"
            let after = try await client.send(HTTPClientRequest(url: health))
            #expect(after.status == 200)
        }
    }

    @Test func alreadyCancelledTaskDoesNotSend() async throws {
        try await withSimulator { fixture in
            let client = fixture.client
            let url = "\(await fixture.simulator.baseURL)/health"
            let task = Task { () async throws -> HTTPClientResponse in
                withUnsafeCurrentTask { $0?.cancel() }
                return try await client.send(HTTPClientRequest(url: url))
            }
            let result = await task.result
            guard case .failure(let error) = result else {
                Issue.record("expected cancellation")
                return
            }
            #expect((error as? HTTPError)?.kind == .cancelled)
        }
    }

    @Test func invalidHeaderIsRejectedWithoutLeakingItsValue() async throws {
        let client = try CurlHTTP.HTTPClient()
        defer { client.shutdown() }
        let error = await expectHTTPError(.invalidRequest) {
            try await client.send(HTTPClientRequest(url: "http://127.0.0.1:9/", headers: ["Authorization": "Bearer top-secret\r\nX-Evil: 1"]))
        }
        #expect(error?.message.contains("top-secret") == false)
        #expect(error?.description.contains("top-secret") == false)
        await expectHTTPError(.invalidRequest) {
            try await client.send(HTTPClientRequest(url: "http://127.0.0.1:9/", headers: ["Bad Name": "x"]))
        }
        await expectHTTPError(.invalidRequest) {
            try await client.send(HTTPClientRequest(url: "ftp://127.0.0.1/file"))
        }
        await expectHTTPError(.invalidRequest) {
            try await client.send(HTTPClientRequest(url: "https://127.0.0.1/", tls: .pinned(spkiSHA256Base64: "not-a-digest")))
        }
    }

    @Test func shutDownClientRejectsRequests() async throws {
        let client = try CurlHTTP.HTTPClient()
        client.shutdown()
        await expectHTTPError(.cancelled) { try await client.send(HTTPClientRequest(url: "http://127.0.0.1:9/")) }
    }
}
