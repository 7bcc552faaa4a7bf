import FlyingFox
import Foundation
import SimulatorKit
import Synchronization

/// Enphase's cloud login on loopback: `POST /login/login.json` (form `user[email]`, `user[password]`) gives a
/// `session_id` (none when the account has MFA on), and `POST /tokens` (`session_id`, `serial_num`, `username`)
/// answers the gateway's token as raw JWT text, as enlighten.enphaseenergy.com and entrez.enphaseenergy.com do.
public final class EnlightenSimulator: Sendable {
    private struct State {
        var sessions: Set<String> = []
        var logins = 0
        var tokensIssued = 0
        var mfa = false
    }

    public let email: String
    public let password: String
    /// What `/tokens` answers: a JWT whose `exp` is `lifetime` seconds after it was issued.
    public let lifetime: Double
    private let server = SimServer()
    private let state = Mutex(State())

    public init(email: String, password: String, lifetime: Double = 31_536_000) {
        self.email = email
        self.password = password
        self.lifetime = lifetime
    }

    @discardableResult
    public func start() async throws(SimulatorError) -> UInt16 {
        try await server.start { [self] request in await handle(request) }
    }

    public func stop() async { await server.stop() }

    public var baseURL: String { get async { await server.baseURL } }

    public var logins: Int { state.withLock { $0.logins } }
    public var tokensIssued: Int { state.withLock { $0.tokensIssued } }

    /// Accounts with multi-factor authentication get no session id.
    public func requireMFA(_ on: Bool) { state.withLock { $0.mfa = on } }

    /// The token `/tokens` issues for `serial` (its signature is not checked by anyone here).
    public static func token(serial: String, expiresAt: Date) -> String {
        func part(_ text: String) -> String {
            Data(text.utf8).base64EncodedString().replacingOccurrences(of: "=", with: "").replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        }
        return part(#"{"kid":"sim","typ":"JWT","alg":"ES256"}"#) + "."
            + part(#"{"aud":"\#(serial)","iss":"Entrez","enphaseUser":"owner","exp":\#(Int(expiresAt.timeIntervalSince1970))}"#) + ".c2lt"
    }

    private func handle(_ request: FlyingFox.HTTPRequest) async -> FlyingFox.HTTPResponse {
        let body = String(decoding: (try? await request.bodyData) ?? Data(), as: UTF8.self)
        switch (request.method.rawValue.uppercased(), request.path) {
        case ("POST", "/login/login.json"):
            var fields: [String: String] = [:]
            for pair in body.split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String($0) }
                if parts.count == 2 { fields[parts[0]] = parts[1] }
            }
            guard fields["user[email]"] == email, fields["user[password]"] == password else {
                return SimResponse.json(#"{"message":"Invalid email or password"}"#, status: .unauthorized)
            }
            let session = UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
            let mfa = state.withLock { state in
                state.logins += 1
                if !state.mfa { state.sessions.insert(session) }
                return state.mfa
            }
            if mfa { return SimResponse.json(#"{"message":"success","requires_mfa":true,"is_consumer":true}"#) }
            return SimResponse.json(#"{"message":"success","session_id":"\#(session)","manager_token":"m","is_consumer":true,"user_id":1}"#)
        case ("POST", "/tokens"):
            let object = (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any]
            guard let session = object?["session_id"] as? String, state.withLock({ $0.sessions.contains(session) }),
                  let serial = object?["serial_num"] as? String, object?["username"] as? String == email else {
                return SimResponse.text("Unauthorized", status: .unauthorized)
            }
            state.withLock { $0.tokensIssued += 1 }
            return SimResponse.text(Self.token(serial: serial, expiresAt: Date().addingTimeInterval(lifetime)), status: .ok)
        default:
            return SimResponse.text("Not Found", status: .notFound)
        }
    }
}
