import FlyingFox
import FlyingSocks
import Foundation
import Testing

/// Runs `body` against a FlyingFox server on a free loopback port with one catch-all handler.
func withScriptedServer(
    _ handler: @escaping @Sendable (FlyingFox.HTTPRequest) async throws -> FlyingFox.HTTPResponse,
    _ body: (String) async throws -> Void
) async throws {
    let server = HTTPServer(address: try .inet(ip4: "127.0.0.1", port: 0), timeout: 60, logger: .disabled)
    await server.appendRoute("*", handler: handler)
    let task = Task { try await server.run() }
    try await server.waitUntilListening()
    guard case .ip4(_, let port)? = await server.listeningAddress else {
        task.cancel()
        Issue.record("scripted server has no address")
        return
    }
    do {
        try await body("http://127.0.0.1:\(port)")
    } catch {
        await server.stop()
        task.cancel()
        throw error
    }
    await server.stop()
    task.cancel()
}

/// A body FlyingFox sends chunked (no Content-Length), to exercise the streaming size check.
struct ChunkedBody: AsyncBufferedSequence {
    typealias Element = UInt8
    let chunks: [[UInt8]]

    struct Iterator: AsyncBufferedIteratorProtocol {
        var chunks: [[UInt8]]
        var pending: [UInt8] = []

        mutating func next() async throws -> UInt8? {
            if pending.isEmpty {
                guard !chunks.isEmpty else { return nil }
                pending = chunks.removeFirst()
            }
            return pending.isEmpty ? nil : pending.removeFirst()
        }

        mutating func nextBuffer(suggested count: Int) async throws -> [UInt8]? {
            guard !chunks.isEmpty else { return nil }
            return chunks.removeFirst()
        }
    }

    func makeAsyncIterator() -> Iterator {
        Iterator(chunks: chunks)
    }
}
