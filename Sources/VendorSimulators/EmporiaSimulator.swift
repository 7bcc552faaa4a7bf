import BigInt
import FlyingFox
import Foundation
import SimulatorKit
import Synchronization

/// Emporia's cloud on loopback, in the wire format PyEmVue's API notes document: Cognito (`POST /` with
/// `X-Amz-Target`): the password sign-in `USER_SRP_AUTH` + `PASSWORD_VERIFIER` (the claim checked with SRP-6a,
/// `CognitoSRPServer`) and `REFRESH_TOKEN_AUTH`, an id token valid an hour; the `authtoken` header,
/// `/customers/devices` (a Vue with three circuits, a smart plug and an EV charger under it),
/// `getDeviceListUsages` (kWh per minute at `1MIN`, plug and charger nested under the Vue's Mains),
/// `PUT /devices/outlet` and `PUT /devices/evcharger`. Faults: an id token that expired early (401), 429, 5xx,
/// slow answers, truncated JSON, and an MFA step after the password.
public final class EmporiaSimulator: Sendable {
    public enum Fault: Sendable, Equatable {
        case rateLimited(retryAfter: Int)
        case serverError
        case slow(seconds: Double)
        case malformedJSON
    }

    /// The simulated house, in W.
    public struct House: Sendable {
        public var kitchen: Double = 640
        public var airConditioner: Double = 1850
        public var balance: Double = 310
        public var plugOn = true
        public var plugWatts: Double = 95
        public var chargerOn = true
        /// The charging current the charger offers the car, in A (6 … `chargerMaxRate`).
        public var chargingRate = 32
        public var chargerMaxRate = 40
        /// What the car draws while charging (240 V × the rate).
        public var chargerWatts: Double { chargerOn ? Double(chargingRate) * 240 : 0 }
        /// The Mains: the circuits and the rest.
        public var mains: Double { kitchen + airConditioner + balance }
    }

    private struct State {
        var faults: [Fault] = []
        var requests: [String: Int] = [:]
        var idToken: String?
        var logins = 0
        var house = House()
        var outletPuts = 0
        var chargerPuts = 0
        var refreshTokens: Set<String> = []
        var challenges: [String: CognitoSRPServer.Challenge] = [:]
        var passwordLogins = 0
        var requireMFA = false
    }

    public let refreshToken: String
    public let clientID: String
    public let username: String
    /// Cognito's internal id for the user (`USER_ID_FOR_SRP`): the SRP maths uses it, not the email.
    public let userIDForSRP = "6f1c7e2a-53b9-4d0e-8a41-0c2b9e7d5f13"
    public static let vueGid: Int64 = 1234
    public static let plugGid: Int64 = 3456
    public static let chargerGid: Int64 = 4567
    private let srp: CognitoSRPServer
    private let server: SimServer
    private let state: Mutex<State>

    /// `password`: the account's password for the SRP sign-in; `refreshToken`: a refresh token issued earlier.
    public init(refreshToken: String, username: String = "home@example.com", password: String = "emporia-password",
                userPoolID: String = "us-east-2_ghlOXVLi1", clientID: String = "4qte47jbstod8apnfic0bunmrq", port: UInt16 = 0) {
        self.refreshToken = refreshToken
        self.clientID = clientID
        self.username = username
        srp = CognitoSRPServer(poolID: userPoolID, userID: userIDForSRP, password: password, salt: Data((0..<16).map { _ in UInt8.random(in: 1...255) }))
        server = SimServer(port: port)
        var initial = State()
        initial.refreshTokens = [refreshToken]
        state = Mutex(initial)
    }

    @discardableResult
    public func start() async throws(SimulatorError) -> UInt16 {
        try await server.start { [self] request in await handle(request) }
    }

    public func stop() async { await server.stop() }

    public var baseURL: String { get async { await server.baseURL } }

    public func inject(_ fault: Fault) { state.withLock { $0.faults.append(fault) } }

    /// The issued id token is refused (401) until the next sign-in.
    public func expireToken() { state.withLock { $0.idToken = nil } }

    public func update(_ change: @Sendable (inout House) -> Void) { state.withLock { change(&$0.house) } }

    public var house: House { state.withLock { $0.house } }
    public var logins: Int { state.withLock { $0.logins } }
    public var requests: [String: Int] { state.withLock { $0.requests } }
    public var outletPutCount: Int { state.withLock { $0.outletPuts } }
    public var chargerPutCount: Int { state.withLock { $0.chargerPuts } }
    /// Sign-ins with the password (SRP) that succeeded.
    public var passwordLogins: Int { state.withLock { $0.passwordLogins } }

    /// Every refresh token stops working (the password changed or the account signed out everywhere).
    public func revokeRefreshTokens() { state.withLock { $0.refreshTokens = [] } }

    /// The password sign-in is followed by a `SOFTWARE_TOKEN_MFA` challenge.
    public func requireMFA(_ on: Bool = true) { state.withLock { $0.requireMFA = on } }

    private func handle(_ request: FlyingFox.HTTPRequest) async -> FlyingFox.HTTPResponse {
        let path = request.path
        let fault: Fault? = state.withLock { state in
            state.requests[path, default: 0] += 1
            return state.faults.isEmpty ? nil : state.faults.removeFirst()
        }
        if let target = request.headers[HTTPHeader("X-Amz-Target")], target.hasPrefix("AWSCognitoIdentityProviderService.") {
            return await cognito(target.replacingOccurrences(of: "AWSCognitoIdentityProviderService.", with: ""), request)
        }
        switch fault {
        case .rateLimited(let seconds)?:
            var headers = HTTPHeaders()
            headers[HTTPHeader("Retry-After")] = String(seconds)
            return SimResponse.json(#"{"message":"Too Many Requests"}"#, status: HTTPStatusCode(429, phrase: "Too Many Requests"), headers: headers)
        case .serverError?:
            return SimResponse.json(#"{"message":"Internal server error"}"#, status: .internalServerError)
        case .slow(let seconds)?:
            try? await Task.sleep(for: .milliseconds(Int64(seconds * 1000)))
        case .malformedJSON?:
            return SimResponse.json(#"{"deviceListUsages":{"devices":[{"#)
        case nil:
            break
        }
        let token = state.withLock { $0.idToken }
        guard let token, request.headers[HTTPHeader("authtoken")] == token else {
            return SimResponse.json(#"{"message":"Unauthorized"}"#, status: .unauthorized)
        }
        switch (request.method, path) {
        case (.GET, "/customers/devices"):
            return SimResponse.json(devices())
        case (.GET, "/AppAPI"):
            let query = Dictionary(request.query.map { ($0.name, $0.value) }, uniquingKeysWith: { $1 })
            guard query["apiMethod"] == "getDeviceListUsages", query["scale"] == "1MIN", query["energyUnit"] == "KilowattHours",
                  query["deviceGids"]?.split(separator: "+").contains("\(Self.vueGid)") == true else {
                return SimResponse.json(#"{"message":"Bad request"}"#, status: .badRequest)
            }
            return SimResponse.json(usages(instant: query["instant"] ?? ""))
        case (.PUT, "/devices/outlet"):
            let body = (try? await request.bodyData) ?? Data()
            guard let fields = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any], (fields["deviceGid"] as? Int).map(Int64.init) == Self.plugGid,
                  let on = fields["outletOn"] as? Bool else {
                return SimResponse.json(#"{"message":"Bad request"}"#, status: .badRequest)
            }
            state.withLock { state in
                state.house.plugOn = on
                state.outletPuts += 1
            }
            return SimResponse.json(#"{"deviceGid":\#(Self.plugGid),"outletOn":\#(on),"parentDeviceGid":\#(Self.vueGid),"parentChannelNum":"1,2,3","schedules":[]}"#)
        case (.PUT, "/devices/evcharger"):
            let body = (try? await request.bodyData) ?? Data()
            // PyEmVue sends deviceGid, loadGid, chargerOn, chargingRate and maxChargingRate.
            guard let fields = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any],
                  (fields["deviceGid"] as? Int).map(Int64.init) == Self.chargerGid, let on = fields["chargerOn"] as? Bool,
                  let rate = fields["chargingRate"] as? Int, fields["maxChargingRate"] is Int else {
                return SimResponse.json(#"{"message":"Bad request"}"#, status: .badRequest)
            }
            let max = state.withLock { $0.house.chargerMaxRate }
            guard (6...max).contains(rate) else {
                return SimResponse.json(#"{"message":"chargingRate must be between 6 and \#(max)"}"#, status: .badRequest)
            }
            state.withLock { state in
                state.house.chargerOn = on
                state.house.chargingRate = rate
                state.chargerPuts += 1
            }
            return SimResponse.json(charger())
        default:
            return SimResponse.json(#"{"message":"Not found"}"#, status: .notFound)
        }
    }

    private func cognito(_ action: String, _ request: FlyingFox.HTTPRequest) async -> FlyingFox.HTTPResponse {
        let body = (try? await request.bodyData) ?? Data()
        let fields = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:]
        func refuse(_ message: String, type: String = "NotAuthorizedException") -> FlyingFox.HTTPResponse {
            SimResponse.text(#"{"__type":"\#(type)","message":"\#(message)"}"#, status: .badRequest, contentType: "application/x-amz-json-1.1")
        }
        guard fields["ClientId"] as? String == clientID else { return refuse("User pool client does not exist.", type: "ResourceNotFoundException") }
        switch (action, fields["AuthFlow"] as? String) {
        case ("InitiateAuth", "REFRESH_TOKEN_AUTH"?):
            let token = (fields["AuthParameters"] as? [String: Any])?["REFRESH_TOKEN"] as? String ?? ""
            guard state.withLock({ $0.refreshTokens.contains(token) }) else { return refuse("Invalid Refresh Token") }
            return issueTokens(refresh: nil)
        case ("InitiateAuth", "USER_SRP_AUTH"?):
            let parameters = fields["AuthParameters"] as? [String: Any] ?? [:]
            guard parameters["USERNAME"] as? String == username else { return refuse("Incorrect username or password.") }
            guard let a = (parameters["SRP_A"] as? String).flatMap({ BigUInt($0, radix: 16) }), let challenge = srp.challenge(publicA: a) else {
                return refuse("SRP_A is not valid.", type: "InvalidParameterException")
            }
            let session = UUID().uuidString
            state.withLock { $0.challenges[session] = challenge }
            let salt = String(BigUInt(srp.salt), radix: 16)
            return SimResponse.text(#"""
            {"ChallengeName":"PASSWORD_VERIFIER","ChallengeParameters":{"SALT":"\#(salt)","SECRET_BLOCK":"\#(challenge.secretBlock.base64EncodedString())",
             "SRP_B":"\#(String(challenge.publicB, radix: 16))","USERNAME":"\#(userIDForSRP)","USER_ID_FOR_SRP":"\#(userIDForSRP)"}}
            """#, status: .ok, contentType: "application/x-amz-json-1.1")
        case ("RespondToAuthChallenge", _):
            let responses = fields["ChallengeResponses"] as? [String: Any] ?? [:]
            guard fields["ChallengeName"] as? String == "PASSWORD_VERIFIER", responses["USERNAME"] as? String == userIDForSRP,
                  let block = (responses["PASSWORD_CLAIM_SECRET_BLOCK"] as? String).flatMap({ Data(base64Encoded: $0) }),
                  let timestamp = responses["TIMESTAMP"] as? String, let signature = responses["PASSWORD_CLAIM_SIGNATURE"] as? String else {
                return refuse("Missing required parameter.", type: "InvalidParameterException")
            }
            // Cognito finds the challenge by its secret block; a block is good for one answer.
            let challenge = state.withLock { state -> CognitoSRPServer.Challenge? in
                guard let key = state.challenges.first(where: { $0.value.secretBlock == block })?.key else { return nil }
                return state.challenges.removeValue(forKey: key)
            }
            guard let challenge, Self.isCognitoTimestamp(timestamp) else { return refuse("Incorrect username or password.") }
            guard srp.expectedSignature(challenge, timestamp: timestamp) == signature else { return refuse("Incorrect username or password.") }
            if state.withLock({ $0.requireMFA }) {
                return SimResponse.text(#"{"ChallengeName":"SOFTWARE_TOKEN_MFA","ChallengeParameters":{},"Session":"mfa-session"}"#,
                                        status: .ok, contentType: "application/x-amz-json-1.1")
            }
            let refresh = "issued-refresh-" + UUID().uuidString
            state.withLock { state in
                state.refreshTokens.insert(refresh)
                state.passwordLogins += 1
            }
            return issueTokens(refresh: refresh)
        default:
            return refuse("Unsupported \(action).", type: "InvalidParameterException")
        }
    }

    /// `EEE MMM d HH:mm:ss UTC yyyy`, e.g. `Thu Mar 5 07:08:09 UTC 2026`.
    static func isCognitoTimestamp(_ text: String) -> Bool {
        text.range(of: #"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [1-9][0-9]? \d{2}:\d{2}:\d{2} UTC \d{4}$"#,
                   options: .regularExpression) != nil
    }

    private func issueTokens(refresh: String?) -> FlyingFox.HTTPResponse {
        let token = "eyJraWQiOiJzaW0iLCJhbGciOiJSUzI1NiJ9.eyJ0b2tlbl91c2UiOiJpZCJ9." + UUID().uuidString.replacingOccurrences(of: "-", with: "")
        state.withLock { state in
            state.idToken = token
            state.logins += 1
        }
        let refreshField = refresh.map { #","RefreshToken":"\#($0)""# } ?? ""
        return SimResponse.text(#"{"AuthenticationResult":{"AccessToken":"access-\#(UUID().uuidString)","ExpiresIn":3600,"IdToken":"\#(token)"\#(refreshField),"TokenType":"Bearer"},"ChallengeParameters":{}}"#,
                                status: .ok, contentType: "application/x-amz-json-1.1")
    }

    private func charger() -> String {
        let house = state.withLock { $0.house }
        return #"{"deviceGid":\#(Self.chargerGid),"loadGid":9876,"chargerOn":\#(house.chargerOn),"message":"","status":"Standby","icon":"CarConnected","iconLabel":"Charging","iconDetailText":"","faultText":"","chargingRate":\#(house.chargingRate),"maxChargingRate":\#(house.chargerMaxRate),"offPeakSchedulesEnabled":false,"customSchedules":[],"debugCode":"","proControlCode":"","breakerPIN":null}"#
    }

    private func devices() -> String {
        let on = state.withLock { $0.house.plugOn }
        return #"""
        {"customerGid":42,"email":"home@example.com","devices":[
          {"deviceGid":\#(Self.vueGid),"manufacturerDeviceId":"A2B3C4","model":"VUE002","firmware":"Vue2-1660000000",
           "locationProperties":{"deviceGid":\#(Self.vueGid),"deviceName":"Home","timeZone":"America/New_York"},
           "outlet":null,"devices":[],
           "channels":[{"deviceGid":\#(Self.vueGid),"name":null,"channelNum":"1,2,3","channelMultiplier":1.0,"channelTypeGid":null},
                       {"deviceGid":\#(Self.vueGid),"name":"Kitchen","channelNum":"1","channelMultiplier":1.0,"channelTypeGid":13},
                       {"deviceGid":\#(Self.vueGid),"name":"A/C","channelNum":"2","channelMultiplier":1.0,"channelTypeGid":1}]},
          {"deviceGid":\#(Self.plugGid),"manufacturerDeviceId":"D5E6F7","model":"SSO001","firmware":"Outlet-1594685591",
           "locationProperties":{"deviceGid":\#(Self.plugGid),"deviceName":"Coffee maker","timeZone":"America/New_York"},
           "outlet":{"deviceGid":\#(Self.plugGid),"outletOn":\#(on),"parentDeviceGid":\#(Self.vueGid),"parentChannelNum":"1,2,3","schedules":[]},
           "devices":[],"channels":[{"deviceGid":\#(Self.plugGid),"name":null,"channelNum":"1,2,3","channelMultiplier":1.0,"channelTypeGid":23}]},
          {"deviceGid":\#(Self.chargerGid),"manufacturerDeviceId":"E1F2A3","model":"EVC002","firmware":"EVSE-1700000000",
           "locationProperties":{"deviceGid":\#(Self.chargerGid),"deviceName":"Garage charger","timeZone":"America/New_York"},
           "outlet":null,"evCharger":\#(charger()),
           "devices":[],"channels":[{"deviceGid":\#(Self.chargerGid),"name":null,"channelNum":"1,2,3","channelMultiplier":1.0,"channelTypeGid":null}]}
        ]}
        """#
    }

    private func usages(instant: String) -> String {
        let house = state.withLock { $0.house }
        func kWh(_ watts: Double) -> Double { watts / 60_000 }
        let plug = house.plugOn ? house.plugWatts : 0
        let evse = house.chargerWatts
        return #"""
        {"deviceListUsages":{"instant":"\#(instant)","scale":"1MIN","energyUnit":"KilowattHours","devices":[
          {"deviceGid":\#(Self.vueGid),"channelUsages":[
            {"name":"Main","usage":\#(kWh(house.mains)),"deviceGid":\#(Self.vueGid),"channelNum":"1,2,3","percentage":100.0,
             "nestedDevices":[{"deviceGid":\#(Self.plugGid),"channelUsages":[{"name":"Main","usage":\#(kWh(plug)),"deviceGid":\#(Self.plugGid),
               "channelNum":"1,2,3","percentage":3.0,"nestedDevices":[]}]},
               {"deviceGid":\#(Self.chargerGid),"channelUsages":[{"name":"Main","usage":\#(kWh(evse)),"deviceGid":\#(Self.chargerGid),
               "channelNum":"1,2,3","percentage":40.0,"nestedDevices":[]}]}]},
            {"name":"Kitchen","usage":\#(kWh(house.kitchen)),"deviceGid":\#(Self.vueGid),"channelNum":"1","percentage":22.0,"nestedDevices":[]},
            {"name":"A/C","usage":\#(kWh(house.airConditioner)),"deviceGid":\#(Self.vueGid),"channelNum":"2","percentage":66.0,"nestedDevices":[]},
            {"name":"Balance","usage":\#(kWh(house.balance)),"deviceGid":\#(Self.vueGid),"channelNum":"Balance","percentage":11.0,"nestedDevices":[]}
          ]}
        ]}}
        """#
    }
}
