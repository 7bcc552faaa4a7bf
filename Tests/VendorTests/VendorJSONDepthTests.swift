import CurlHTTP
import Foundation
import GatewayModel
import Testing
import VendorConsciousness
import VendorKit
import VendorTesting

/// A backend's deeply nested body cost 0.8 s per poll in JSONDecoder; it is now refused
/// by the strict, linear parser before JSONDecoder runs, as `malformed_response` with the reason.
@Suite struct VendorJSONDepthTests {
    func response(_ body: String) -> HTTPClientResponse {
        HTTPClientResponse(
            status: 200, headers: ["Content-Type": "application/json"], body: Data(body.utf8),
            effectiveURL: "http://127.0.0.1/api/v1/devices"
        )
    }

    @Test func deepOrInvalidBodiesAreMalformedResponses() async throws {
        let rig = try await Rig.start()
        defer { Task { await rig.stop() } }
        typealias Devices = [String: [[String: JSONValue]]]
        let deepProperties = #"{"devices":[{"id":"x","properties":{"p":"# + String(repeating: "[", count: 500)
            + String(repeating: "]", count: 500) + "}}]}"
        let deepObject = #"{"devices":[{"id":"x","properties":"# + String(repeating: #"{"a":"#, count: 500) + "1"
            + String(repeating: "}", count: 500) + "}]}"
        for (body, reason) in [
            (deepProperties, "nesting deeper than 32"),
            (deepObject, "nesting deeper than 32"),
            (#"{"devices":[{"id":"x","id":"y"}]}"#, #"duplicate key"#),
            (#"{"devices":[],}"#, "trailing comma"),
        ] {
            let error = await gatewayError { _ = try rig.vendor.http.decode(Devices.self, from: response(body), context: "device list") }
            #expect(error?.code == .malformedResponse, "\(body.prefix(60)): \(String(describing: error))")
            #expect(error?.message.contains(reason) == true, "\(error?.message ?? "no error")")
            #expect(error?.message.contains("device list") == true)
        }
        // Nesting inside the limit still decodes.
        let fine = #"{"devices":[{"id":"x","properties":{"p":[[[1]]],"q":{"r":true}}}]}"#
        let decoded = try rig.vendor.http.decode(Devices.self, from: response(fine), context: "device list")
        #expect(decoded["devices"]?.first?["properties"]?["p"] == .array([.array([.array([.number(1)])])]))
    }
}
