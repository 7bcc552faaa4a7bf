#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import CurlHTTP
import GatewayModel
import Resilience
import Synchronization

/// What a login produced: the headers that carry the credentials, and how long they live.
public struct SessionCredentials: Sendable {
    /// Added to every request, e.g. `Authorization: Bearer …` or `Cookie: AuthCookie=…; UserRecord=…`.
    public var headers: [(name: String, value: String)]
    /// Seconds until the credentials expire; nil when the vendor does not say (renewed only when refused).
    public var lifetime: Double?

    public init(headers: [(name: String, value: String)], lifetime: Double? = nil) {
        self.headers = headers
        self.lifetime = lifetime
    }
}

/// Credentials kept in memory only and renewed by logging in again: when `renewFraction` of their lifetime
/// has passed, or after the vendor refused them (the call is then repeated once by `VendorHTTP`). Logins are
/// single-flight: concurrent calls that need one share it, and a refusal of credentials that were already
/// replaced does not log in twice.
///
/// `login` performs one login through the vendor's `VendorHTTP` and decides what a failure means (a refused
/// password is final and held off with `VendorHTTP.holdOff`, so the vendor never hammers a login).
public final class LoginSession: VendorAuthorizer {
    public typealias Login = @Sendable () async throws(GatewayError) -> SessionCredentials

    private struct State {
        var credentials: SessionCredentials?
        /// Bumped on every login, so a refusal of old credentials does not log in twice.
        var tag: UInt64 = 0
        var renewAt: Duration?
        var expiresAt: Duration?
        var login: Task<Result<Void, GatewayError>, Never>?
    }

    private let time: TimeSource
    private let renewFraction: Double
    private let performLogin: Login
    private let state = Mutex(State())

    public init(time: TimeSource, renewFraction: Double = 0.9, login: @escaping Login) {
        self.time = time
        self.renewFraction = min(max(renewFraction, 0.1), 1)
        self.performLogin = login
    }

    /// Logins so far that succeeded (tests and diagnostics).
    public var loginCount: UInt64 { state.withLock { $0.tag } }

    public func prepare() async throws(GatewayError) {
        let now = time.now()
        let (due, usable) = state.withLock { state in
            (state.credentials == nil || state.renewAt.map { now >= $0 } == true,
             state.credentials != nil && state.expiresAt.map { now < $0 } != false)
        }
        guard due else { return }
        do {
            try await login(replacing: nil)
        } catch {
            // An early renewal that failed is not fatal while the old credentials still live.
            if !usable || error.code == .authFailed { throw error }
        }
    }

    public func authorize(_ request: inout HTTPClientRequest) -> UInt64 {
        let (credentials, tag) = state.withLock { ($0.credentials, $0.tag) }
        for header in credentials?.headers ?? [] { request.headers.set(name: header.name, value: header.value) }
        return tag
    }

    public func reauthenticate(after tag: UInt64) async throws(GatewayError) {
        try await login(replacing: tag)
    }

    /// Logs in unless another caller already did: `replacing` is the tag of refused credentials
    /// (nil: log in if there are none or they are due for renewal).
    private func login(replacing refused: UInt64?) async throws(GatewayError) {
        let now = time.now()
        let task: Task<Result<Void, GatewayError>, Never>? = state.withLock { state in
            if let running = state.login { return running }
            if let refused {
                if state.credentials != nil, state.tag != refused { return nil }
            } else if state.credentials != nil, state.renewAt.map({ now < $0 }) != false {
                return nil
            }
            if refused != nil { state.credentials = nil }
            // The task cannot finish before this closure releases the lock, so `login` is set first.
            let task = Task { await self.run() }
            state.login = task
            return task
        }
        guard let task else { return }
        try await task.value.get()
    }

    private func run() async -> Result<Void, GatewayError> {
        let result: Result<SessionCredentials, GatewayError>
        do throws(GatewayError) {
            result = .success(try await performLogin())
        } catch {
            result = .failure(error)
        }
        let now = time.now()
        return state.withLock { state in
            state.login = nil
            switch result {
            case .success(let credentials):
                state.credentials = credentials
                state.tag += 1
                let lifetime = credentials.lifetime.map { max(1, $0) }
                state.renewAt = lifetime.map { now + .clampedSeconds($0 * renewFraction) }
                state.expiresAt = lifetime.map { now + .clampedSeconds($0) }
                return .success(())
            case .failure(let error):
                return .failure(error)
            }
        }
    }
}
