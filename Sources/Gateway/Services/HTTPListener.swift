import Foundation
import Hummingbird
import Logging

/// The gateway's HTTP listener (Hummingbird): `GET /metrics` in the Prometheus text format. Loopback by default
/// (`http.listen`); a port that is taken is logged, never fatal: the gateway's job is MQTT.
enum HTTPListener {
    static func run(settings: HTTPSettings, controller: GatewayController, logger: Logger) async {
        let router = Router()
        router.get("/metrics") { _, _ -> Response in
            let text = await controller.metricsText()
            var headers = HTTPFields()
            headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
        }
        var quiet = logger
        quiet.logLevel = .warning
        let app = Application(router: router, configuration: .init(address: .hostname(settings.host, port: settings.port), serverName: nil), logger: quiet)
        do {
            try await app.run()
        } catch is CancellationError {
        } catch {
            logger.error("the HTTP listener on \(settings.host):\(settings.port) could not run: \(error); /metrics is unavailable (set http.listen)")
        }
    }
}
