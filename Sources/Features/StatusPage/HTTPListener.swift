import GatewayCore
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Hummingbird
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import VendorKit

/// The gateway's HTTP listener (Hummingbird): the live status page (`/`, its data under `/api/`), and
/// `GET /metrics` in the Prometheus text format. Loopback by default (`http.listen`); a port that is taken is
/// logged, never fatal: the gateway's job is MQTT.
package enum HTTPListener {
    /// The largest command body the page may send (an MQTT `/set` payload).
    package static let maxCommandBytes = 16 * 1024
    /// Open connections at most: far below the descriptors systemd gives the process (`LimitNOFILE`), so HTTP
    /// clients can never take the ones MQTT and the vendors need.
    package static let maxConnections = 64
    /// A connection is closed when a request's head has not arrived within this long, and when it idles this
    /// long between requests (a slow client that never finishes its headers holds nothing for long).
    package static let idleTimeout: TimeAmount = .seconds(5)
    /// One event loop thread for the life of the process (a status page and a scrape every few seconds need no more;
    /// each loop costs a thread stack and its task buffers, and Hummingbird's default is one per core). Never shut
    /// down: the server's channels still schedule their last close on it after the server's `run` returned (when
    /// their async wrappers are released), and a loop shut down by then printed "Cannot schedule tasks on an
    /// EventLoop that has already shut down" on about every other SIGTERM.
    package static let eventLoop = MultiThreadedEventLoopGroup(numberOfThreads: 1)

    /// The server, with every route; `HTTPListenerService` runs it.
    package static func application(settings: HTTPSettings, feature: StatusPageFeature, logger: Logger) -> some ApplicationProtocol {
        let router = Router()
        // Security headers on every answer, then the Host/Origin check before anything else (authentication
        // included): a page that re-resolved its own name to this box gets nothing from it.
        router.add(middleware: SecurityHeadersMiddleware())
        router.add(middleware: HostGuardMiddleware(hosts: HostAllowList(settings: settings)))
        if settings.requiresAuthentication { router.add(middleware: AuthMiddleware(settings: settings)) }
        router.get("/") { _, _ -> Response in
            var headers = HTTPFields()
            headers[.contentType] = "text/html; charset=utf-8"
            // Everything the page needs is in it: the box may have no internet, and nothing else may run there.
            // Never inside a frame: a hidden frame over a decoy button would make a visitor's click switch a device.
            headers[.contentSecurityPolicy] = "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'"
            headers[.cacheControl] = "no-store"
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: StatusPageHTML.page)))
        }
        router.get("/api/status") { _, _ -> Response in
            guard let endpoints = feature.endpoints else { return starting }
            return json(.ok, await endpoints.page?.statusText() ?? "{}")
        }
        router.get("/api/energy") { _, _ -> Response in
            guard let endpoints = feature.endpoints else { return starting }
            return json(.ok, await endpoints.page?.energyHistoryText() ?? "{}")
        }
        router.get("/api/live") { _, _ -> Response in
            guard let feed = feature.endpoints?.feed else { return json(.serviceUnavailable, #"{"error":"no live feed"}"#) }
            let frames = feed.subscribe()
            var headers = HTTPFields()
            headers[.contentType] = "text/event-stream"
            headers[.cacheControl] = "no-store"
            return Response(status: .ok, headers: headers, body: ResponseBody { writer in
                // A comment first, so the browser sees the stream open before the first change.
                try await writer.write(ByteBuffer(string: ": lbs-gateway live\n\n"))
                for await frame in frames { try await writer.write(ByteBuffer(string: frame)) }
                try await writer.finish(nil)
            })
        }
        router.post("/api/devices/{id}/set") { request, context -> Response in
            guard settings.allowCommands else {
                return json(.forbidden, #"{"error":{"code":"forbidden","message":"the status page is read-only; set http.allow_commands: true to switch devices from it"}}"#)
            }
            // A JSON content type cannot be sent cross-site without a CORS preflight (which is never granted):
            // another web page open in the same browser cannot switch devices on this one.
            guard request.headers[.contentType]?.lowercased().hasPrefix("application/json") == true else {
                return json(.unsupportedMediaType, #"{"error":{"code":"invalid_payload","message":"send the /set payload as application/json"}}"#)
            }
            guard let id = context.parameters.get("id") else { return json(.notFound, #"{"error":{"code":"unknown_device","message":"no device id"}}"#) }
            var request = request
            let body: ByteBuffer
            do {
                body = try await request.collectBody(upTo: maxCommandBytes)
            } catch {
                return json(.contentTooLarge, #"{"error":{"code":"payload_too_large","message":"the command is larger than \#(maxCommandBytes) bytes"}}"#)
            }
            guard let endpoints = feature.endpoints else { return starting }
            guard await StatusPageFeature.command(endpoints, device: id, payload: Array(buffer: body)) else {
                return json(.notFound, #"{"error":{"code":"unknown_device","message":"no device with this id"}}"#)
            }
            // The outcome arrives like any command's: the device's new state, or a command_failed event.
            return json(.accepted, #"{"status":"accepted"}"#)
        }
        router.get("/metrics") { _, _ -> Response in
            guard let endpoints = feature.endpoints else { return starting }
            let text = await endpoints.metrics.exposition()
            var headers = HTTPFields()
            headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
        }
        var quiet = logger
        quiet.logLevel = .warning
        let limit = ConnectionLimit(limit: maxConnections)
        return Application(router: router,
                           server: .http1(configuration: .init(additionalChannelHandlers: [limit.handler()], idleTimeout: idleTimeout)),
                           configuration: .init(address: .hostname(settings.host, port: settings.port), serverName: nil),
                           eventLoopGroupProvider: .shared(eventLoop), logger: quiet)
    }

    /// Before the gateway service built its controller (a moment at start).
    private static var starting: Response {
        json(.serviceUnavailable, #"{"error":{"code":"starting","message":"the gateway is starting; try again in a moment"}}"#)
    }

    private static func json(_ status: HTTPResponse.Status, _ text: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        headers[.cacheControl] = "no-store"
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }
}

/// `http.token_*` (bearer) and/or `http.username` + `http.password_*` (basic) guard every route. The page's
/// own requests carry a bearer token as `?access_token=` (a browser cannot add headers to an EventSource).
package struct AuthMiddleware<Context: RequestContext>: RouterMiddleware {
    package let token: [UInt8]?
    package let basic: [UInt8]?

    package init(settings: HTTPSettings) {
        token = settings.token.map { Array($0.reveal().utf8) }
        if let username = settings.username, let password = settings.password {
            basic = Array(Data("\(username):\(password.reveal())".utf8).base64EncodedString().utf8)
        } else {
            basic = nil
        }
    }

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let authorization = request.headers[.authorization] ?? ""
        if let token {
            if authorization.hasPrefix("Bearer "), Self.equal(Array(authorization.utf8.dropFirst(7)), token) { return try await next(request, context) }
            if let query = request.uri.queryParameters["access_token"], Self.equal(Array(query.utf8), token) { return try await next(request, context) }
        }
        if let basic, authorization.hasPrefix("Basic "), Self.equal(Array(authorization.utf8.dropFirst(6)), basic) {
            return try await next(request, context)
        }
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        if basic != nil { headers[.wwwAuthenticate] = #"Basic realm="lbs-gateway", charset="UTF-8""# } else { headers[.wwwAuthenticate] = "Bearer" }
        return Response(status: .unauthorized, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(
            string: #"{"error":{"code":"unauthorized","message":"this gateway's HTTP listener needs credentials (http.token_* or http.username/password_*)"}}"#)))
    }

    /// Compares in time that depends only on the length, so a guess does not learn a prefix.
    private static func equal(_ given: [UInt8], _ expected: [UInt8]) -> Bool {
        guard given.count == expected.count else { return false }
        var difference: UInt8 = 0
        for index in given.indices { difference |= given[index] ^ expected[index] }
        return difference == 0
    }
}
