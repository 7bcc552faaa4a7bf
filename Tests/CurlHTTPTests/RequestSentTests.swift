import ConsciousnessSimulator
import CurlHTTP
import Foundation
import TestTraits
import Testing

/// A failure says whether the request had left, so a command that may have been carried
/// out is not sent again while one that surely never arrived can be.
@Suite(.integration) struct RequestSentTests {
    @Test func timeoutAfterSendingSaysTheRequestWasSent() async throws {
        try await withSimulator { fixture in
            fixture.simulator.inject(.slow(delay: .seconds(20)))
            let error = await expectHTTPError(.timeout) {
                try await fixture.client.send(HTTPClientRequest(url: "\(fixture.api)/consciousness/emotions", timeout: .milliseconds(500)))
            }
            #expect(error?.requestSent == true)
            #expect(fixture.simulator.counters.requests == 1)
        }
    }

    @Test func refusedConnectionSaysNothingWasSent() async throws {
        try await withSimulator { fixture in
            let url = "\(await fixture.simulator.baseURL)/health"
            await fixture.simulator.stop()
            let error = await expectHTTPError(.connectFailed) {
                try await fixture.client.send(HTTPClientRequest(url: url, connectTimeout: .seconds(2)))
            }
            // A reset of a socket the stopping server had already accepted (56) may count as sent.
            if error?.curlCode == 7 { #expect(error?.requestSent == false) }
        }
    }
}
