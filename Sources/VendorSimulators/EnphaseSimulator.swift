import FlyingFox
import Foundation
import GatewayModel
import SimulatorKit
import Synchronization

/// An Enphase IQ Gateway (Envoy) on loopback serving one of pyenphase's recorded firmware folders
/// (`Tests/Fixtures/enphase/<firmware>`): `/info` as XML without authentication; from firmware 7 on the owner
/// token as a bearer or the `sessionId` cookie `/auth/check_jwt` sets; a path it does not serve answers with a
/// redirect to an error page, as the real one does. The nightly outage: `setDark(true)` (or a daily `darkWindow`)
/// makes it accept connections and never answer, as the real one does while it resets; `stop()` refuses them.
public final class EnphaseSimulator: Sendable {
    /// One-off answers in place of the next data request's (not `/info`, not the token check).
    public enum Fault: Sendable, Equatable {
        /// Answers after a delay (the Envoy is slow; pyenphase waits 45 s).
        case slow(seconds: Double)
        /// A truncated JSON body.
        case malformedJSON
        /// An HTML error page with this status.
        case htmlError(status: Int)
        /// 401, as when the owner token was revoked or the session dropped.
        case unauthorized
    }

    private struct State {
        var faults: [Fault] = []
        var sessions: Set<String> = []
        var requests: [String: Int] = [:]
        var tokenChecks = 0
        var digestChallenges = 0
        var dark = false
    }

    /// When it does not answer, every day (`lbs-sim enphase --outage`).
    public let darkWindow: DailyWindow?

    private let nonce = UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
    public var digestChallenges: Int { state.withLock { $0.digestChallenges } }

    public let folder: String
    public let token: String
    /// The gateway's serial (from the recorded `/info`): a token Enlighten issued for it is accepted too.
    public let serial: String
    private let server: SimServer
    private let needsToken: Bool
    private let state = Mutex(State())

    /// `folder`: a recorded firmware folder; `token`: the owner token it accepts (firmware 7 and later).
    public init(folder: String, token: String, port: UInt16 = 0, darkWindow: DailyWindow? = nil) throws {
        self.darkWindow = darkWindow
        self.folder = folder
        self.token = token
        server = SimServer(port: port)
        guard let info = FileManager.default.contents(atPath: folder + "/info") else {
            throw SimulatorError(code: "sim.fixture_missing", message: "no info file in \(folder)")
        }
        let text = String(decoding: info, as: UTF8.self)
        let software = text.range(of: "<software>").map { text[$0.upperBound...].prefix { $0 != "<" } } ?? ""
        let major = Int(software.drop { !$0.isNumber }.prefix { $0.isNumber }) ?? 0
        needsToken = major >= 7 || text.contains("<web-tokens>true</web-tokens>")
        serial = text.range(of: "<sn>").map { String(text[$0.upperBound...].prefix { $0 != "<" }) } ?? ""
    }

    @discardableResult
    public func start() async throws(SimulatorError) -> UInt16 {
        try await server.start { [self] request in await handle(request) }
    }

    public func stop() async { await server.stop() }

    public var baseURL: String { get async { await server.baseURL } }

    public var requests: [String: Int] { state.withLock { $0.requests } }
    public var tokenChecks: Int { state.withLock { $0.tokenChecks } }

    public func inject(_ fault: Fault) { state.withLock { $0.faults.append(fault) } }

    /// While dark every request hangs unanswered (for ten minutes), as the Envoy does during its nightly reset.
    public func setDark(_ dark: Bool) { state.withLock { $0.dark = dark } }

    private var isDark: Bool {
        if state.withLock({ $0.dark }) { return true }
        return darkWindow?.contains(Date()) ?? false
    }

    /// Ends every session: the next request with the old cookie gets 401.
    public func expireSessions() { state.withLock { $0.sessions.removeAll() } }

    private func handle(_ request: FlyingFox.HTTPRequest) async -> FlyingFox.HTTPResponse {
        let path = request.path
        state.withLock { $0.requests[path, default: 0] += 1 }
        if isDark {
            try? await Task.sleep(for: .seconds(600))
            return SimResponse.text("", status: .serviceUnavailable)
        }
        if path == "/info" { return file("info", contentType: "application/xml") ?? notServed }
        if path == "/auth/check_jwt" {
            guard let header = request.headers[.authorization], header.hasPrefix("Bearer "), accepts(String(header.dropFirst(7))) else { return unauthorized }
            let session = UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
            state.withLock { state in
                state.sessions.insert(session)
                state.tokenChecks += 1
            }
            var response = SimResponse.text("<!DOCTYPE html><h2>Valid token.</h2>", status: .ok, contentType: "text/html")
            response.headers[HTTPHeader("Set-Cookie")] = "sessionId=\(session); HttpOnly; Path=/"
            return response
        }
        if needsToken, !authorized(request) { return unauthorized }
        switch state.withLock({ $0.faults.isEmpty ? nil : $0.faults.removeFirst() }) {
        case .slow(let seconds)?:
            try? await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
        case .malformedJSON?:
            return SimResponse.text(#"{"production":[{"type":"inverters","wNow":"#, status: .ok, contentType: "application/json")
        case .htmlError(let status)?:
            return SimResponse.htmlError(HTTPStatusCode(status, phrase: status == 500 ? "Internal Server Error" : "Error"))
        case .unauthorized?:
            state.withLock { $0.sessions.removeAll() }
            return unauthorized
        case nil:
            break
        }
        // Legacy firmware guards the inverter list with Digest as `envoy`, password the serial's last six digits.
        if !needsToken, path == "/api/v1/production/inverters", !digestAuthorized(request) {
            state.withLock { $0.digestChallenges += 1 }
            var response = SimResponse.text("<html><body><h1>401 Unauthorized</h1></body></html>", status: .unauthorized, contentType: "text/html")
            response.headers[HTTPHeader("WWW-Authenticate")] = #"Digest realm="enphaseenergy.com", qop="auth", nonce="\#(nonce)""#
            return response
        }
        let name = String(path.dropFirst()).replacingOccurrences(of: "/", with: "_")
        let isJSON = name.hasSuffix(".json") || !name.contains(".")
        let contentType = isJSON ? "application/json" : "text/html"
        // A folder recorded with `?details=1` keeps that answer as `<name>_details_1`.
        if request.query.contains(where: { $0.name == "details" && $0.value == "1" }), let detailed = file(name + "_details_1", contentType: contentType) {
            return detailed
        }
        return file(name, contentType: contentType) ?? notServed
    }

    private func authorized(_ request: FlyingFox.HTTPRequest) -> Bool {
        if let header = request.headers[.authorization], header.hasPrefix("Bearer "), accepts(String(header.dropFirst(7))) { return true }
        guard let cookies = request.headers[HTTPHeader("Cookie")] else { return false }
        let presented = cookies.split(separator: ";").compactMap { part -> String? in
            let pair = part.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            return pair.count == 2 && pair[0] == "sessionId" ? pair[1] : nil
        }
        return state.withLock { state in presented.contains { state.sessions.contains($0) } }
    }

    /// A Digest answer for `envoy` with the serial's last six digits (RFC 7616, MD5, qop=auth).
    private func digestAuthorized(_ request: FlyingFox.HTTPRequest) -> Bool {
        guard let header = request.headers[.authorization], header.hasPrefix("Digest ") else { return false }
        var fields: [String: String] = [:]
        for part in header.dropFirst("Digest ".count).split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard pair.count == 2 else { continue }
            fields[pair[0]] = pair[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        }
        guard fields["username"] == "envoy", fields["nonce"] == nonce, let uri = fields["uri"], let realm = fields["realm"],
              let nc = fields["nc"], let cnonce = fields["cnonce"], let qop = fields["qop"], let answer = fields["response"] else { return false }
        let ha1 = MD5.hex("envoy:\(realm):\(serial.suffix(6))")
        let ha2 = MD5.hex("\(request.method.rawValue.uppercased()):\(uri)")
        return answer == MD5.hex("\(ha1):\(nonce):\(nc):\(cnonce):\(qop):\(ha2)")
    }

    /// The configured token, or an unexpired one issued for this serial (`EnlightenSimulator.token`).
    private func accepts(_ presented: String) -> Bool {
        if presented == token { return true }
        let parts = presented.split(separator: ".")
        guard parts.count == 3 else { return false }
        var payload = String(parts[1]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while payload.count % 4 != 0 { payload += "=" }
        guard let data = Data(base64Encoded: payload), let claims = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else { return false }
        return claims["aud"] as? String == serial && (claims["exp"] as? Double).map { $0 > Date().timeIntervalSince1970 } == true
    }

    private func file(_ name: String, contentType: String) -> FlyingFox.HTTPResponse? {
        guard !name.hasSuffix("_log.json"), let data = FileManager.default.contents(atPath: folder + "/" + name) else { return nil }
        let text = String(decoding: data, as: UTF8.self)
        // A recorded HTML page (production.json on firmware 3.9) is served as the Envoy served it.
        let html = text.drop { $0.isWhitespace }.first == "<"
        return SimResponse.text(text, status: .ok, contentType: html && contentType != "application/xml" ? "text/html" : contentType)
    }

    private var notServed: FlyingFox.HTTPResponse {
        var response = SimResponse.text("", status: HTTPStatusCode(301, phrase: "Moved Permanently"))
        response.headers[HTTPHeader("Location")] = "/home"
        return response
    }

    private var unauthorized: FlyingFox.HTTPResponse {
        SimResponse.text("<html><body><h1>401 Unauthorized</h1></body></html>", status: .unauthorized, contentType: "text/html")
    }
}
