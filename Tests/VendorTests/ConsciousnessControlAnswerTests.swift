import CurlHTTP
import Foundation
import GatewayModel
import Testing
@testable import VendorConsciousness
import VendorKit
import VendorTesting

/// The control answer is read from the strict parse's tree (`JSONObjectReader`), not by `JSONDecoder`: it must
/// read every answer as `Decodable` does, and word every malformed one the same way.
@Suite struct ConsciousnessControlAnswerTests {
    func response(_ body: String) -> HTTPClientResponse {
        HTTPClientResponse(status: 200, headers: ["Content-Type": "application/json"], body: Data(body.utf8),
                           effectiveURL: "http://127.0.0.1/api/v1/devices/lights-kitchen/control")
    }

    /// What the running server answers, and the shapes around it.
    static let answers = [
        #"{"status":"success","device":{"id":"lights-kitchen","name":"Kitchen Smart Lights","type":"smart_light","status":"active","location":"kitchen","properties":{"brightness":80,"color":"warm_white","power":true,"energy_usage":12.5},"last_seen":"2026-11-28T00:44:13.761901","discovery_method":"mdns"}}"#,
        #"{"status":"success"}"#,
        #"{"status":"error","message":"Device is offline","device":null}"#,
        #"{"device":{"id":"x","name":null,"properties":null}}"#,
        #"{"device":{"id":"x","properties":{"nested":{"a":[1,"b",null,false]}}}}"#,
        #"{}"#,
    ]

    /// Malformed answers, each with the words both readers must use.
    static let malformed: [(body: String, words: String)] = [
        (#"{"status":"success","device":{"name":"no id"}}"#, "missing key 'id' at device"),
        (#"{"status":"success","device":{"id":null}}"#, "missing String value at device.id"),
        (#"{"status":"success","device":{"id":7}}"#, "expected String at device.id"),
        (#"{"status":true}"#, "expected String at status"),
        (#"{"status":"success","device":"lights-kitchen"}"#, "at device"),
        (#"{"status":"success","device":{"id":"x","properties":[1,2]}}"#, "at device.properties"),
        (#"[]"#, "the top level"),
    ]

    @Test func readsEveryAnswerAsDecodableDoes() async throws {
        let rig = try await Rig.start()
        defer { Task { await rig.stop() } }
        for body in Self.answers {
            let decoded = try rig.vendor.http.decode(WireControlAnswer.self, from: response(body), context: "control answer")
            let read = try rig.vendor.http.decode(from: response(body), context: "control answer", read: WireControlAnswer.init(json:))
            #expect(read.status == decoded.status && read.message == decoded.message, "\(body)")
            #expect(read.device?.id == decoded.device?.id && read.device?.name == decoded.device?.name
                    && read.device?.type == decoded.device?.type && read.device?.status == decoded.device?.status
                    && read.device?.location == decoded.device?.location && read.device?.lastSeen == decoded.device?.lastSeen, "\(body)")
            #expect(read.device?.properties == decoded.device?.properties, "\(body)")
        }
        let first = try rig.vendor.http.decode(from: response(Self.answers[0]), context: "control answer", read: WireControlAnswer.init(json:))
        #expect(first.device?.properties?["energy_usage"] == .number(12.5))
    }

    @Test func malformedAnswersAreWordedAsJSONDecoderWordsThem() async throws {
        let rig = try await Rig.start()
        defer { Task { await rig.stop() } }
        for (body, words) in Self.malformed {
            let decoded = await gatewayError { _ = try rig.vendor.http.decode(WireControlAnswer.self, from: response(body), context: "control answer") }
            let read = await gatewayError {
                _ = try rig.vendor.http.decode(from: response(body), context: "control answer", read: WireControlAnswer.init(json:))
            }
            #expect(read?.code == .malformedResponse, "\(body): \(String(describing: read))")
            #expect(read?.outcomeUnknown == true)
            #expect(read?.message.contains(words) == true, "\(body): \(read?.message ?? "no error")")
            // JSONDecoder names a non-object by its own type words; both name the same place.
            if !body.hasPrefix("[") && !body.contains(#""device":"lights"#) && !body.contains("[1,2]") {
                #expect(read?.message == decoded?.message, "\(body)")
            }
        }
    }

    @Test func theRequestBodyIsTheActionAndANullValue() {
        #expect(String(decoding: WireControlRequest(action: "turn_on").body, as: UTF8.self) == #"{"action":"turn_on","value":null}"#)
        #expect(String(decoding: WireControlRequest(action: "a\"b").body, as: UTF8.self) == #"{"action":"a\"b","value":null}"#)
    }
}
