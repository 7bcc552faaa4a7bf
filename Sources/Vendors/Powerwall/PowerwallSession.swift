#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import CurlHTTP
import GatewayModel
import Resilience
import VendorKit

/// The customer login: `POST /api/login/Basic`, then the bearer token and the `AuthCookie`/`UserRecord`
/// cookies on every request. Tesla does not say how long a session lives, so it is renewed only when a
/// request is refused (401/403). A refused password is held off for 5 minutes: repeated bad logins lock
/// the Tesla gateway out.
enum PowerwallSession {
    static func make(http: VendorHTTP, options: PowerwallOptions) -> LoginSession {
        let url = options.base + "/api/login/Basic"
        return LoginSession(time: http.time) { () async throws(GatewayError) -> SessionCredentials in
            do throws(GatewayError) {
                var request = HTTPClientRequest(method: .post, url: url, timeout: options.network.timeout)
                request.headers.set(name: "Content-Type", value: "application/json")
                do {
                    request.body = try JSONEncoder().encode(WireLoginRequest(password: options.password.reveal(), email: options.email))
                } catch {
                    throw GatewayError.internal("could not encode the Powerwall login")
                }
                let response = try await http.send(request, use: .refresh)
                let login = try http.decode(WireLogin.self, from: response, context: "Powerwall login answer")
                var headers: [(name: String, value: String)] = []
                if let token = login.token, !token.isEmpty {
                    http.redactor.set("token", token)
                    headers.append((name: "Authorization", value: "Bearer \(token)"))
                }
                let cookies = SessionCookies.named(["AuthCookie", "UserRecord"], in: response.headers)
                for cookie in cookies { http.redactor.set("cookie-\(cookie.name)", cookie.value) }
                if !cookies.isEmpty { headers.append((name: "Cookie", value: SessionCookies.header(cookies))) }
                guard !headers.isEmpty else {
                    throw http.classifier.unexpectedShape("it has neither a token nor session cookies", context: "Powerwall login answer")
                }
                return SessionCredentials(headers: headers)
            } catch {
                throw final(error, url: url, http: http)
            }
        }
    }

    /// A refused password is final and held off for 5 minutes; 429/503 start the 5-minute cooldown.
    static func final(_ error: GatewayError, url: String, http: VendorHTTP) -> GatewayError {
        var final = error
        if error.requiresReauthentication || error.code == .authFailed {
            final.requiresReauthentication = false
            final.retryable = false
            final.code = .authFailed
            final.message = "The Powerwall at \(ErrorClassifier.displayURL(url)) refused the customer password (HTTP \(error.httpStatus ?? 401))."
            final.suggestion = "Check password_file (the customer password: the last 5 characters of the gateway's password unless you "
                + "changed it, and the email if you set one). The gateway tries again once every 5 min: repeated bad logins lock the "
                + "Tesla gateway out."
            http.holdOff(after: final, for: PowerwallVendor.cooldown)
        } else if PowerwallVendor.startsCooldown(error) {
            final = PowerwallVendor.cooldownError(error)
            http.holdOff(after: final, for: PowerwallVendor.cooldown)
        } else if error.code == .notFound {
            final.suggestion = "Check the url: it must be the Tesla gateway's address, e.g. https://192.168.91.1."
            http.holdOff(after: final)
        }
        return final
    }
}
