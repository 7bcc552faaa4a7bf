import FlyingFox
import Foundation
import SimulatorKit
import Synchronization

/// A Neurio / PWRview sensor's local API on loopback: `/current-sample` from a sample file in the published
/// format (`Tests/Fixtures/neurio/current-sample.json`). Faults: a sensor that has not synchronized its clock
/// (`NOT_SYNCHRONIZED`), 500, an HTML error page, slow answers, truncated JSON.
public final class NeurioSimulator: Sendable {
    public enum Fault: Sendable, Equatable {
        case notSynchronized
        case serverError
        case htmlError
        case slow(seconds: Double)
        case malformedJSON
    }

    private struct State {
        var faults: [Fault] = []
        var requests = 0
    }

    private let sample: String
    private let server: SimServer
    private let state = Mutex(State())

    public init(sampleFile: String, port: UInt16 = 0) throws {
        guard let data = FileManager.default.contents(atPath: sampleFile) else {
            throw SimulatorError(code: "sim.fixture_missing", message: "cannot read \(sampleFile)")
        }
        sample = String(decoding: data, as: UTF8.self)
        server = SimServer(port: port)
    }

    @discardableResult
    public func start() async throws(SimulatorError) -> UInt16 {
        try await server.start { [self] request in await handle(request) }
    }

    public func stop() async { await server.stop() }

    public var baseURL: String { get async { await server.baseURL } }

    public func inject(_ fault: Fault) { state.withLock { $0.faults.append(fault) } }

    public var requests: Int { state.withLock { $0.requests } }

    private func handle(_ request: FlyingFox.HTTPRequest) async -> FlyingFox.HTTPResponse {
        let fault: Fault? = state.withLock { state in
            state.requests += 1
            return state.faults.isEmpty ? nil : state.faults.removeFirst()
        }
        guard request.path == "/current-sample" || request.path == "/current-sample/" else {
            return SimResponse.text("<html><body>Not Found</body></html>", status: .notFound, contentType: "text/html")
        }
        switch fault {
        case .notSynchronized?:
            var text = sample
            if let range = text.range(of: #""timestamp":"[^"]*""#, options: .regularExpression) {
                text.replaceSubrange(range, with: #""timestamp":"NOT_SYNCHRONIZED""#)
            }
            return SimResponse.json(text)
        case .serverError?:
            return SimResponse.text("", status: .internalServerError)
        case .htmlError?:
            return SimResponse.htmlError(HTTPStatusCode(503, phrase: "Service Unavailable"))
        case .slow(let seconds)?:
            try? await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
        case .malformedJSON?:
            return SimResponse.json(#"{"sensorId":"0x0000C47F5101A2B3","channels":[{"type":"NET","#)
        case nil:
            break
        }
        return SimResponse.json(sample)
    }
}
