import FlyingFox
import FlyingSocks
#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Errors starting or driving a simulator.
public struct SimulatorError: Error, Sendable, CustomStringConvertible {
    /// A short stable code, e.g. `sim.listen_failed`.
    public let code: String
    /// What went wrong.
    public let message: String

    public init(code: String, message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
}

/// Start and stop of one simulator's FlyingFox server on loopback, serialized. A port picked once is kept
/// across `stop()`/`start()`, so a vendor pointed at it sees the same device come back.
public actor SimServer {
    public typealias Handler = @Sendable (FlyingFox.HTTPRequest) async -> FlyingFox.HTTPResponse

    private let host: String
    public private(set) var port: UInt16
    private var server: HTTPServer?
    private var runTask: Task<String?, Never>?

    public init(host: String = "127.0.0.1", port: UInt16 = 0) {
        self.host = host
        self.port = port
    }

    public var isRunning: Bool { server != nil }

    /// `http://host:port`.
    public var baseURL: String { "http://\(host):\(port)" }

    /// Binds and serves `handler`; returns the port.
    public func start(handler: @escaping Handler) async throws(SimulatorError) -> UInt16 {
        if server != nil { return port }
        guard port == 0 else { return try await listen(handler: handler) }
        // Port 0 picks from 20000–32767, below the kernel's ephemeral range: a client retrying a
        // stopped simulator on an ephemeral port can connect to itself (TCP self-connect on
        // loopback) and then hold the very port the simulator needs to restart on.
        var lastError: SimulatorError?
        for _ in 0..<20 {
            port = UInt16.random(in: 20_000...32_767)
            do {
                return try await listen(handler: handler, wait: 1)
            } catch {
                lastError = error
            }
        }
        port = 0
        throw lastError ?? SimulatorError(code: "sim.listen_failed", message: "no free port")
    }

    private func listen(handler: @escaping Handler, wait: Double = 5) async throws(SimulatorError) -> UInt16 {
        let address: sockaddr_in
        do {
            address = try .inet(ip4: host, port: port)
        } catch {
            throw SimulatorError(code: "sim.bad_address", message: "cannot bind to \(host): \(error)")
        }
        // A long handler timeout so a `slow` fault can outlast any client timeout.
        let server = HTTPServer(config: .init(address: address, timeout: 600, logger: .disabled), handler: ClosureHandler(handle: handler))
        let task = Task { () -> String? in
            do {
                try await server.run()
                return nil
            } catch {
                return "\(error)"
            }
        }
        do {
            try await server.waitUntilListening(timeout: wait)
        } catch {
            task.cancel()
            let reason = await task.value ?? "\(error)"
            throw SimulatorError(code: "sim.listen_failed", message: "could not listen on \(host):\(port): \(reason)")
        }
        if case .ip4(_, let boundPort)? = await server.listeningAddress {
            port = boundPort
        }
        Self.disableNagle(onListenerAt: port)
        self.server = server
        runTask = task
        return port
    }

    /// FlyingFox writes a response's header and body in two writes; with Nagle's algorithm the body then waits
    /// for the client's delayed ACK (40 ms on Linux) on every keep-alive request, which real servers (uvicorn,
    /// nginx: one write, or TCP_NODELAY) never show. Connections accepted on Linux inherit the listener's
    /// TCP_NODELAY, and FlyingFox does not expose its socket, so the listener is found by its port.
    private static func disableNagle(onListenerAt port: UInt16) {
        #if os(Linux)
        guard port != 0, let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") else { return }
        for entry in entries {
            guard let fd = Int32(entry) else { continue }
            var listening: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            guard getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &length) == 0, listening == 1 else { continue }
            var address = sockaddr_in()
            var addressLength = socklen_t(MemoryLayout<sockaddr_in>.size)
            let named = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &addressLength) }
            }
            guard named == 0, address.sin_family == sa_family_t(AF_INET), UInt16(bigEndian: address.sin_port) == port else { continue }
            var on: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
        }
        #endif
    }

    /// Stops listening; connections are closed and `start` may be called again.
    public func stop() async {
        guard let server else { return }
        self.server = nil
        await server.stop(timeout: 0)
        runTask?.cancel()
        _ = await runTask?.result
        runTask = nil
    }
}

private struct ClosureHandler: HTTPHandler {
    let handle: SimServer.Handler

    func handleRequest(_ request: FlyingFox.HTTPRequest) async throws -> FlyingFox.HTTPResponse {
        await handle(request)
    }
}

/// Responses every simulator sends.
public enum SimResponse {
    public static func json(_ text: String, status: HTTPStatusCode = .ok, headers: HTTPHeaders = [:]) -> FlyingFox.HTTPResponse {
        self.text(text, status: status, contentType: "application/json", headers: headers)
    }

    public static func text(_ text: String, status: HTTPStatusCode, contentType: String = "text/plain", headers: HTTPHeaders = [:]) -> FlyingFox.HTTPResponse {
        var all = headers
        all[.contentType] = contentType
        return HTTPResponse(statusCode: status, headers: all, body: Data(text.utf8))
    }

    /// A status with an empty body (a Powerwall whose sitemaster is stopped answers 502 like this).
    public static func empty(_ status: HTTPStatusCode) -> FlyingFox.HTTPResponse {
        HTTPResponse(statusCode: status, headers: HTTPHeaders(), body: Data())
    }

    /// An nginx-style HTML error page.
    public static func htmlError(_ status: HTTPStatusCode) -> FlyingFox.HTTPResponse {
        let title = "\(status.code) \(status.phrase)"
        return text("<html><head><title>\(title)</title></head><body><center><h1>\(title)</h1></center><hr><center>nginx</center></body></html>",
                    status: status, contentType: "text/html")
    }
}
