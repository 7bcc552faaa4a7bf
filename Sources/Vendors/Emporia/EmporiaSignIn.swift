import CurlHTTP
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import Resilience
import Synchronization
import VendorKit

/// Signing in to Emporia's Cognito user pool. The id token (an hour) is renewed with the refresh token
/// (`REFRESH_TOKEN_AUTH`); the refresh token is either given (`refresh_token_file`) or comes from a password
/// sign-in (`USER_SRP_AUTH`, SRP-6a: the password itself is never sent). When a refresh token is refused and a
/// password is configured, the gateway signs in with the password again; a refused password is held off.
final class EmporiaSignIn: Sendable {
    private let http: VendorHTTP
    private let options: EmporiaOptions
    /// The refresh token in use: the configured one, or the last one Cognito handed out.
    private let refreshToken: Mutex<String?>

    init(http: VendorHTTP, options: EmporiaOptions) {
        self.http = http
        self.options = options
        refreshToken = Mutex(options.refreshToken.map { $0.reveal() })
        if let token = options.refreshToken { http.redactor.set("refresh_token", token) }
        if let password = options.password { http.redactor.set("password", password) }
    }

    func session() -> LoginSession {
        LoginSession(time: http.time) { () async throws(GatewayError) -> SessionCredentials in try await self.signIn() }
    }

    private func signIn() async throws(GatewayError) -> SessionCredentials {
        if let token = refreshToken.withLock({ $0 }) {
            do {
                return try await renew(with: token)
            } catch where error.code == .authFailed && options.password != nil {
                // The refresh token ended (password changed, signed out everywhere): the password makes a new one.
                refreshToken.withLock { $0 = nil }
            }
        }
        guard let username = options.username, let password = options.password else {
            throw GatewayError(.authFailed, message: "Emporia has no refresh token and no password to sign in with.",
                               suggestion: "Give username and password_file, or refresh_token_file.")
        }
        return try await signIn(username: username, password: password)
    }

    /// `REFRESH_TOKEN_AUTH`: a refresh token gives a new id token.
    private func renew(with token: String) async throws(GatewayError) -> SessionCredentials {
        do {
            let answer = try await call("InitiateAuth", [
                "AuthFlow": "REFRESH_TOKEN_AUTH", "ClientId": .string(options.clientID), "AuthParameters": ["REFRESH_TOKEN": .string(token)],
            ], context: "Emporia sign-in (refresh token)")
            return try credentials(from: answer)
        } catch {
            // With a password to fall back on, a refused refresh token is not held off: the password sign-in follows.
            throw refused(error, what: "the refresh token", holdOff: options.password == nil,
                          fix: "Put a current refresh token in refresh_token_file (it ends when the password changes or the account signs out everywhere).")
        }
    }

    /// `USER_SRP_AUTH` then the `PASSWORD_VERIFIER` challenge.
    private func signIn(username: String, password: VendorSecret) async throws(GatewayError) -> SessionCredentials {
        let srp = CognitoSRP()
        let answer: WireCognito
        do throws(GatewayError) {
            let challenge = try await call("InitiateAuth", [
                "AuthFlow": "USER_SRP_AUTH", "ClientId": .string(options.clientID), "AuthParameters": ["USERNAME": .string(username), "SRP_A": .string(srp.srpA)],
            ], context: "Emporia sign-in (SRP)")
            guard challenge.ChallengeName == "PASSWORD_VERIFIER", let parameters = challenge.ChallengeParameters,
                  let salt = parameters["SALT"], let serverB = parameters["SRP_B"], let block = parameters["SECRET_BLOCK"] else {
                throw http.classifier.unexpectedShape("no PASSWORD_VERIFIER challenge with SALT, SRP_B and SECRET_BLOCK", context: "Emporia sign-in (SRP)")
            }
            let userID = parameters["USER_ID_FOR_SRP"] ?? username
            let timestamp = CognitoSRP.timestamp(http.now())
            let claim: String
            do throws(CognitoSRP.Failure) {
                claim = try srp.passwordClaim(poolID: options.userPoolID, userIDForSRP: userID, password: password.reveal(), salt: salt,
                                              serverB: serverB, secretBlock: block, timestamp: timestamp)
            } catch {
                throw http.classifier.unexpectedShape("its SRP challenge is not usable (\(error))", context: "Emporia sign-in (SRP)")
            }
            answer = try await call("RespondToAuthChallenge", [
                "ChallengeName": "PASSWORD_VERIFIER", "ClientId": .string(options.clientID),
                "ChallengeResponses": [
                    "USERNAME": .string(parameters["USERNAME"] ?? userID), "TIMESTAMP": .string(timestamp),
                    "PASSWORD_CLAIM_SECRET_BLOCK": .string(block), "PASSWORD_CLAIM_SIGNATURE": .string(claim),
                ],
            ], context: "Emporia sign-in (password claim)")
        } catch {
            throw refused(error, what: "the username or password", holdOff: true, for: .seconds(900),
                          fix: "Check username and password_file (the Emporia app's sign-in); the gateway waits before it tries again.")
        }
        if let next = answer.ChallengeName {
            // MFA or a forced password change: only the app can answer those.
            var error = GatewayError(.authFailed, message: "Emporia's sign-in asks for \(next), which the gateway cannot answer.",
                                     suggestion: "Finish the sign-in once in the Emporia app (MFA or a new password), or give refresh_token_file.")
            error.requiresReauthentication = false
            http.holdOff(after: error, for: .seconds(900))
            throw error
        }
        return try credentials(from: answer)
    }

    private func credentials(from answer: WireCognito) throws(GatewayError) -> SessionCredentials {
        guard let result = answer.AuthenticationResult, let idToken = result.IdToken, !idToken.isEmpty else {
            throw GatewayError(.authFailed, message: "Cognito answered without an id token.", suggestion: "Check client_id and user_pool_id.")
        }
        http.redactor.set("id_token", idToken)
        if let refresh = result.RefreshToken, !refresh.isEmpty {
            http.redactor.set("issued_refresh_token", refresh)
            refreshToken.withLock { $0 = refresh }
        }
        return SessionCredentials(headers: [(name: "authtoken", value: idToken)], lifetime: result.ExpiresIn ?? 3600)
    }

    /// Cognito answers 400 `NotAuthorizedException` (or `UserNotFoundException`) for a refused credential: that is
    /// final until someone changes the config, so it is held off instead of retried.
    /// A refused password waits 15 min: Cognito locks an account out after a few wrong attempts.
    private func refused(_ error: GatewayError, what: String, holdOff: Bool, for wait: Duration? = nil, fix: String) -> GatewayError {
        guard error.code == .authFailed || error.code == .badRequest || error.requiresReauthentication else { return error }
        var refused = error
        refused.code = .authFailed
        refused.requiresReauthentication = false
        refused.message = "Emporia's sign-in (Cognito) refused \(what) (HTTP \(error.httpStatus ?? 400))."
        refused.suggestion = fix
        if holdOff { http.holdOff(after: refused, for: wait) }
        return refused
    }

    private func call(_ action: String, _ body: JSONValue, context: String) async throws(GatewayError) -> WireCognito {
        var request = HTTPClientRequest(method: .post, url: options.authURL, timeout: options.network.timeout)
        request.headers.set(name: "Content-Type", value: "application/x-amz-json-1.1")
        request.headers.set(name: "X-Amz-Target", value: "AWSCognitoIdentityProviderService.\(action)")
        request.body = Data(body.render().utf8)
        return try await http.sendJSON(request, as: WireCognito.self, context: context, use: .refresh)
    }
}
