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

/// The backend's bearer token, kept in memory only. There is no refresh endpoint, so the session logs in
/// again when 90 % of `expires_in` has passed, or after a 401 (then the call is repeated once by `VendorHTTP`).
/// Logins are single-flight: concurrent calls that need one share it.
final class ConsciousnessSession: VendorAuthorizer {
    private struct State {
        var token: String?
        /// Bumped on every login, so a 401 on old credentials does not log in twice.
        var tag: UInt64 = 0
        var renewAt: Duration = .zero
        var expiresAt: Duration = .zero
        var login: Task<Result<Void, GatewayError>, Never>?
    }

    /// Part of the token lifetime after which a new login is due.
    static let renewFraction = 0.9
    /// Lifetime assumed when the backend does not say.
    static let defaultLifetime: Double = 3600

    private let http: VendorHTTP
    private let loginURL: String
    private let username: String
    private let password: VendorSecret
    private let timeout: Duration
    private let state = Mutex(State())

    init(http: VendorHTTP, apiBase: String, username: String, password: VendorSecret, timeout: Duration) {
        self.http = http
        loginURL = apiBase + "/auth/login"
        self.username = username
        self.password = password
        self.timeout = timeout
    }

    /// Logins so far that succeeded (for tests and diagnostics).
    var loginCount: UInt64 { state.withLock { $0.tag } }

    func prepare() async throws(GatewayError) {
        let now = http.time.now()
        let (due, usable) = state.withLock { ($0.token == nil || now >= $0.renewAt, $0.token != nil && now < $0.expiresAt) }
        guard due else { return }
        do {
            try await login(replacing: nil)
        } catch {
            // An early renewal that failed is not fatal while the old token still lives.
            if !usable || error.code == .authFailed { throw error }
        }
    }

    func authorize(_ request: inout HTTPClientRequest) -> UInt64 {
        let (token, tag) = state.withLock { ($0.token, $0.tag) }
        if let token { request.headers.set(name: "Authorization", value: "Bearer \(token)") }
        return tag
    }

    func reauthenticate(after tag: UInt64) async throws(GatewayError) {
        try await login(replacing: tag)
    }

    /// Logs in unless another caller already did: `replacing` is the tag of refused credentials
    /// (nil: log in if there is no token or it is due for renewal).
    private func login(replacing refused: UInt64?) async throws(GatewayError) {
        let now = http.time.now()
        let task: Task<Result<Void, GatewayError>, Never>? = state.withLock { state in
            if let running = state.login { return running }
            if let refused {
                if state.token != nil, state.tag != refused { return nil }
            } else if state.token != nil, now < state.renewAt {
                return nil
            }
            if refused != nil { state.token = nil }
            // The task cannot finish before this closure releases the lock, so `login` is set first.
            let task = Task { await self.performLogin() }
            state.login = task
            return task
        }
        guard let task else { return }
        try await task.value.get()
    }

    private func performLogin() async -> Result<Void, GatewayError> {
        let result: Result<WireLogin, GatewayError>
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
            result = .success(answer)
        } catch {
            let final = Self.final(error, url: loginURL, vendor: http.vendorID)
            // Refused credentials or a URL without the API: logging in again at once cannot help, so the
            // vendor holds off (exponential, capped) instead of logging in on every poll.
            if final.code == .authFailed || final.code == .notFound { http.holdOff(after: final) }
            result = .failure(final)
        }
        let now = http.time.now()
        return state.withLock { state in
            state.login = nil
            switch result {
            case .success(let answer):
                let lifetime = max(1, answer.expiresIn ?? Self.defaultLifetime)
                state.token = answer.accessToken
                http.redactor.set("token", answer.accessToken)
                state.tag += 1
                state.renewAt = now + .clampedSeconds(lifetime * Self.renewFraction)
                state.expiresAt = now + .clampedSeconds(lifetime)
                return .success(())
            case .failure(let error):
                return .failure(error)
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
