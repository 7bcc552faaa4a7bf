import Foundation
import GatewayTesting
import Testing
import VendorKit
@testable import VendorMatter

/// The bound on a Matter server's messages and what a large one costs: a 57 MB message once peaked at 1.5 GB and
/// held up SIGTERM for 40 s while it was parsed.
@Suite struct MatterMessageLimitTests {
    /// `start_listening`'s answer for `count` nodes (the recorded dumps, repeated with new ids).
    static func startListeningAnswer(nodes count: Int) throws -> String {
        let folder = Fixtures.path("matter", "nodes")
        let dumps = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".json") }.sorted()
            .map { try String(contentsOfFile: folder + "/" + $0, encoding: .utf8) }
        let nodes = (0..<count).map { dumps[$0 % dumps.count] }
        return #"{"message_id":"start","result":[\#(nodes.joined(separator: ","))]}"#
    }

    @Test func theDefaultLimitHoldsHundredsOfNodesAndIsBounded() throws {
        #expect(MatterOptions().maxMessageSize == 4 << 20)
        // 150 recorded nodes (a large home; about 1.6 MB) fit with a quarter to spare.
        let answer = try Self.startListeningAnswer(nodes: 150)
        #expect(answer.utf8.count < MatterOptions().maxMessageSize * 3 / 4, "\(answer.utf8.count) bytes")
        func parse(_ value: String) -> (MatterOptions?, [String]) {
            var reader = ConfigReader()
            let settings = VendorSettings(type: "matter", id: "matter", options: .mapping([(key: "max_message_size_mb", value: .scalar(value, line: 1))]), path: "vendors[0]")
            let options = MatterVendorFactory.parse(settings, reader: &reader, environment: [:])
            return (options, reader.problems.map(\.path))
        }
        #expect(parse("16").0?.maxMessageSize == 16 << 20)
        #expect(parse("1024").1 == ["vendors[0].max_message_size_mb"])
    }

    @Test func aLargeMessageIsDecodedOffTheReaderAndACancelledReaderDoesNotWaitForIt() async throws {
        let answer = try Self.startListeningAnswer(nodes: 200)
        let decoded = try await MatterVendor.decodeUnlessCancelled(answer)
        #expect(decoded.message?.result?.array?.count == 200)

        // Cancelled at once: the reader gets CancellationError, not the parse's result (which takes far longer
        // than this task needs to see its cancellation).
        let reader = Task { try await MatterVendor.decodeUnlessCancelled(answer) }
        reader.cancel()
        let outcome = await reader.result
        #expect(throws: CancellationError.self) { try outcome.get() }
    }
}
