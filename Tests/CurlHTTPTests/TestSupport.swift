import ConsciousnessSimulator
import CurlHTTP
import Foundation
import Testing

/// A running simulator with a manual clock and a fresh client; stopped by `withSimulator`.
struct SimulatorFixture {
    let simulator: ConsciousnessSimulator
    let clock: SimulatorClock
    let client: HTTPClient
    let api: String
    let password: String

    /// Logs in and returns the bearer token.
    func login() async throws -> String {
        let response = try await client.send(HTTPClientRequest(
            method: .post,
            url: "\(api)/auth/login",
            headers: ["Content-Type": "application/json"],
            body: Data(#"{"username":"admin","password":"\#(password)"}"#.utf8)
        ))
        #expect(response.status == 200)
        let object = try jsonObject(response.body)
        guard let token = object["access_token"] as? String else {
            throw HTTPError(kind: .other(-1), message: "login answered without access_token")
        }
        return token
    }

    /// A request to `path` under `/api/v1` carrying the token.
    func request(_ method: HTTPClientRequest.Method, _ path: String, token: String, json: String? = nil) -> HTTPClientRequest {
        var headers: HTTPHeaderFields = ["Authorization": "Bearer \(token)"]
        if json != nil {
            headers.add(name: "Content-Type", value: "application/json")
        }
        return HTTPClientRequest(method: method, url: "\(api)\(path)", headers: headers, body: json.map { Data($0.utf8) })
    }
}

/// Runs `body` against a fresh simulator on a free loopback port and always stops it.
func withSimulator(expiresIn: Int = 3600, _ body: (SimulatorFixture) async throws -> Void) async throws {
    let clock = SimulatorClock()
    let password = "pw-\(UInt64.random(in: 0...UInt64.max))"
    let simulator = ConsciousnessSimulator(configuration: .init(
        password: password, expiresIn: expiresIn, now: { clock.now }
    ))
    try await simulator.start()
    let fixture = SimulatorFixture(
        simulator: simulator, clock: clock, client: try HTTPClient(), api: await simulator.apiBaseURL, password: password
    )
    do {
        try await body(fixture)
    } catch {
        await simulator.stop()
        fixture.client.shutdown()
        throw error
    }
    await simulator.stop()
    fixture.client.shutdown()
}

/// Expects `operation` to fail with an `HTTPError` of `kind`; returns the error.
@discardableResult
func expectHTTPError<T>(
    _ kind: HTTPError.Kind,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ operation: () async throws -> T
) async -> HTTPError? {
    do {
        _ = try await operation()
        Issue.record("expected HTTPError \(kind), got success", sourceLocation: sourceLocation)
        return nil
    } catch let error as HTTPError {
        #expect(error.kind == kind, "\(error)", sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected HTTPError \(kind), got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

func jsonObject(_ data: Data) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
}

/// A gzip member with stored (uncompressed) deflate blocks: valid gzip without needing a compressor.
func gzipStored(_ payload: [UInt8]) -> [UInt8] {
    var out: [UInt8] = [0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0xff]
    var offset = 0
    repeat {
        let length = min(65_535, payload.count - offset)
        let isFinal = offset + length == payload.count
        out.append(isFinal ? 1 : 0)
        out += [UInt8(length & 0xff), UInt8(length >> 8), UInt8(~length & 0xff), UInt8((~length >> 8) & 0xff)]
        out += payload[offset..<offset + length]
        offset += length
    } while offset < payload.count
    let crc = crc32(payload)
    let size = UInt32(truncatingIfNeeded: payload.count)
    for value in [crc, size] {
        out += [UInt8(value & 0xff), UInt8((value >> 8) & 0xff), UInt8((value >> 16) & 0xff), UInt8(value >> 24)]
    }
    return out
}

private func crc32(_ bytes: [UInt8]) -> UInt32 {
    var crc: UInt32 = 0xffff_ffff
    for byte in bytes {
        crc ^= UInt32(byte)
        for _ in 0..<8 {
            crc = (crc & 1) != 0 ? (crc >> 1) ^ 0xedb8_8320 : crc >> 1
        }
    }
    return ~crc
}

