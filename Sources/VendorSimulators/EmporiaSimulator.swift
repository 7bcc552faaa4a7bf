import FlyingFox
import Foundation
import SimulatorKit
import Synchronization

/// Emporia's cloud on loopback, in the wire format PyEmVue's API notes document: Cognito's
/// `REFRESH_TOKEN_AUTH` (`POST /` with `X-Amz-Target`, the refresh token checked, an id token valid an hour),
/// the `authtoken` header, `/customers/devices` (a Vue with three circuits and a smart plug under it),
/// `getDeviceListUsages` (kWh per minute at `1MIN`, the plug nested under the Vue's Mains) and
/// `PUT /devices/outlet`. Faults: an id token that expired early (401), 429, 5xx, slow answers, truncated JSON.
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
    }

    public let refreshToken: String
    public let clientID: String
    public static let vueGid: Int64 = 1234
    public static let plugGid: Int64 = 3456
    private let server: SimServer
    private let state: Mutex<State>

    public init(refreshToken: String, clientID: String = "4qte47jbstod8apnfic0bunmrq", port: UInt16 = 0) {
        self.refreshToken = refreshToken
        self.clientID = clientID
        server = SimServer(port: port)
        state = Mutex(State())
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

    private func handle(_ request: FlyingFox.HTTPRequest) async -> FlyingFox.HTTPResponse {
        let path = request.path
        let fault: Fault? = state.withLock { state in
            state.requests[path, default: 0] += 1
            return state.faults.isEmpty ? nil : state.faults.removeFirst()
        }
        if request.headers[HTTPHeader("X-Amz-Target")] == "AWSCognitoIdentityProviderService.InitiateAuth" { return await signIn(request) }
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
        default:
            return SimResponse.json(#"{"message":"Not found"}"#, status: .notFound)
        }
    }

    private func signIn(_ request: FlyingFox.HTTPRequest) async -> FlyingFox.HTTPResponse {
        let body = (try? await request.bodyData) ?? Data()
        let fields = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
        guard fields?["AuthFlow"] as? String == "REFRESH_TOKEN_AUTH", fields?["ClientId"] as? String == clientID,
              (fields?["AuthParameters"] as? [String: Any])?["REFRESH_TOKEN"] as? String == refreshToken else {
            return SimResponse.text(#"{"__type":"NotAuthorizedException","message":"Invalid Refresh Token"}"#, status: .badRequest,
                                    contentType: "application/x-amz-json-1.1")
        }
        let token = "eyJraWQiOiJzaW0iLCJhbGciOiJSUzI1NiJ9.eyJ0b2tlbl91c2UiOiJpZCJ9." + UUID().uuidString.replacingOccurrences(of: "-", with: "")
        state.withLock { state in
            state.idToken = token
            state.logins += 1
        }
        return SimResponse.text(#"{"AuthenticationResult":{"AccessToken":"access-\#(UUID().uuidString)","ExpiresIn":3600,"IdToken":"\#(token)","TokenType":"Bearer"},"ChallengeParameters":{}}"#,
                                status: .ok, contentType: "application/x-amz-json-1.1")
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
           "devices":[],"channels":[{"deviceGid":\#(Self.plugGid),"name":null,"channelNum":"1,2,3","channelMultiplier":1.0,"channelTypeGid":23}]}
        ]}
        """#
    }

    private func usages(instant: String) -> String {
        let house = state.withLock { $0.house }
        func kWh(_ watts: Double) -> Double { watts / 60_000 }
        let plug = house.plugOn ? house.plugWatts : 0
        return #"""
        {"deviceListUsages":{"instant":"\#(instant)","scale":"1MIN","energyUnit":"KilowattHours","devices":[
          {"deviceGid":\#(Self.vueGid),"channelUsages":[
            {"name":"Main","usage":\#(kWh(house.mains)),"deviceGid":\#(Self.vueGid),"channelNum":"1,2,3","percentage":100.0,
             "nestedDevices":[{"deviceGid":\#(Self.plugGid),"channelUsages":[{"name":"Main","usage":\#(kWh(plug)),"deviceGid":\#(Self.plugGid),
               "channelNum":"1,2,3","percentage":3.0,"nestedDevices":[]}]}]},
            {"name":"Kitchen","usage":\#(kWh(house.kitchen)),"deviceGid":\#(Self.vueGid),"channelNum":"1","percentage":22.0,"nestedDevices":[]},
            {"name":"A/C","usage":\#(kWh(house.airConditioner)),"deviceGid":\#(Self.vueGid),"channelNum":"2","percentage":66.0,"nestedDevices":[]},
            {"name":"Balance","usage":\#(kWh(house.balance)),"deviceGid":\#(Self.vueGid),"channelNum":"Balance","percentage":11.0,"nestedDevices":[]}
          ]}
        ]}}
        """#
    }
}
