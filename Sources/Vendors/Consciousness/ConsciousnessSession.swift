#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import CurlHTTP
import GatewayModel
import VendorKit
import Resilience
import Synchronization

/// The backend's bearer token (a `LoginSession`): there is no refresh endpoint, so the session logs in again
/// when 90 % of `expires_in` has passed, or after a 401 (then the call is repeated once by `VendorHTTP`).
enum ConsciousnessSession {
    /// Lifetime assumed when the backend does not say.
    static let defaultLifetime: Double = 3600

    static func make(http: VendorHTTP, apiBase: String, username: String, password: VendorSecret, timeout: Duration) -> LoginSession {
        let loginURL = apiBase + "/auth/login"
        return LoginSession(time: http.time) { () async throws(GatewayError) -> SessionCredentials in
            do throws(GatewayError) {
                var request = HTTPClientRequest(method: .post, url: loginURL, timeout: timeout)
                request.headers.set(name: "Content-Type", value: "application/json")
                request.headers.set(name: "Accept", value: "application/json")
                do {
                    request.body = try JSONEncoder().encode(WireLoginRequest(username: username, password: password.reveal()))
                } catch {
                    throw GatewayError.internal("could not encode the login request")
                }
                let answer = try await http.sendJSON(request, as: WireLogin.self, context: "login answer", use: .refresh)
                guard !answer.accessToken.isEmpty else {
                    throw http.classifier.unexpectedShape("the access token is empty", context: "login answer")
                }
                http.redactor.set("token", answer.accessToken)
                return SessionCredentials(
                    headers: [(name: "Authorization", value: "Bearer \(answer.accessToken)")], lifetime: answer.expiresIn ?? defaultLifetime
                )
            } catch {
                let final = Self.final(error, url: loginURL, vendor: http.vendorID)
                // Refused credentials or a URL without the API: logging in again at once cannot help, so the
                // vendor holds off (exponential, capped) instead of logging in on every poll.
                if final.code == .authFailed || final.code == .notFound { http.holdOff(after: final) }
                throw final
            }
        }
    }

    /// A refused login is final: logging in again with the same password cannot help. Its texts are fixed
    /// (no body excerpt, no times), so the health topic shows one text for one failure.
    private static func final(_ error: GatewayError, url: String, vendor: String) -> GatewayError {
        if error.code == .notFound {
            var missing = error
            missing.retryable = false
            missing.suggestion = "Check the vendor's url: it must be the server root (e.g. http://host:8000), and the "
                + "server must be the house consciousness backend; the gateway tries again with a growing pause."
            return missing
        }
        guard error.requiresReauthentication else { return error }
        var refused = error
        refused.requiresReauthentication = false
        refused.retryable = false
        refused.message = "Vendor '\(vendor)' refused the login (HTTP \(error.httpStatus ?? 401)) at \(ErrorClassifier.displayURL(url))."
        refused.suggestion = "Check the username and the password (password_file or password_env) of this vendor; "
            + "the gateway tries again with a growing pause, up to every 5 min."
        return refused
    }
}
