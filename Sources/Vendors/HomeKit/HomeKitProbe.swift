import GatewayModel
import HAP
import Resilience

/// One pairing step at a time against an accessory, outside a running vendor: what `lbs-bench homekit` times
/// (pair setup, pair verify) with the same code the vendor runs.
public enum HomeKitProbe {
    /// Pair Setup on a fresh connection; the controller identity and the accessory's pairing.
    public static func pairSetup(host: String, port: Int, setupCode: String, identity: ControllerIdentity = .generate(),
                                 timeout: Duration = .seconds(10)) async throws -> AccessoryPairing {
        let time = TimeSource(ContinuousClock())
        // As the vendor does: an accessory that refuses the proof when K began with a zero byte (HAP-python truncates
        // it) is asked again with a fresh SRP secret.
        for attempt in 1...4 {
            let result: AccessoryPairing? = try await HAPConnection.withConnection(
                host: host, port: port, label: "probe", connectTimeout: timeout, time: time, onEvent: { _ in }
            ) { connection in
                var client = PairSetupClient(setupCode: setupCode, identity: identity)
                func exchange(_ body: [UInt8]) async throws -> [UInt8] {
                    try await connection.request("POST", "/pair-setup", contentType: "application/pairing+tlv8", body: body, timeout: timeout).body
                }
                do {
                    let m2 = try await exchange(client.m1())
                    let m4 = try await exchange(try client.m3(answering: m2))
                    let m6 = try await exchange(try client.m5(answering: m4))
                    return try client.finish(answering: m6)
                } catch HAPError.refused(.authentication, let step, let delay) {
                    if client.mayRetryRefusal, attempt < 4 { return nil }
                    throw HAPError.refused(.authentication, step: step, retryDelay: delay)
                }
            }
            if let result { return result }
        }
        throw HAPError.authentication("the accessory refused the proof 4 times")
    }

    /// Pair Verify on a fresh connection, then one encrypted `GET /accessories`; returns its body's size.
    public static func pairVerify(host: String, port: Int, identity: ControllerIdentity, pairing: AccessoryPairing,
                                  timeout: Duration = .seconds(10), readDatabase: Bool = false) async throws -> Int {
        try await get(host: host, port: port, identity: identity, pairing: pairing, path: readDatabase ? "/accessories" : nil, timeout: timeout)?.body.count ?? 0
    }

    /// Pair Verify on a fresh connection, then one encrypted `GET path` (none when nil); its answer.
    public static func get(host: String, port: Int, identity: ControllerIdentity, pairing: AccessoryPairing, path: String?,
                           timeout: Duration = .seconds(10)) async throws -> HAPMessage? {
        let time = TimeSource(ContinuousClock())
        return try await HAPConnection.withConnection(host: host, port: port, label: "probe", connectTimeout: timeout, time: time, onEvent: { _ in }) { connection in
            var verify = PairVerifyClient(identity: identity, accessory: pairing)
            let m2 = try await connection.request("POST", "/pair-verify", contentType: "application/pairing+tlv8", body: verify.m1(), timeout: timeout).body
            let m4 = try await connection.request("POST", "/pair-verify", contentType: "application/pairing+tlv8", body: try verify.m3(answering: m2), timeout: timeout).body
            connection.startEncryption(try verify.finish(answering: m4))
            guard let path else { return nil }
            return try await connection.request("GET", path, timeout: timeout)
        }
    }
}
