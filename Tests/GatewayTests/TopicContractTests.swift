import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayModel
import VendorKit
import Testing

/// Keeps `mqtt-topics.md` true: every topic the code uses and every state key with its unit is there.
@Suite struct TopicContractTests {
    static func contract() throws -> String {
        var dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while dir.path != "/" {
            let candidate = dir.appendingPathComponent("mqtt-topics.md")
            if FileManager.default.fileExists(atPath: candidate.path) { return try String(contentsOf: candidate, encoding: .utf8) }
            dir.deleteLastPathComponent()
        }
        throw CocoaError(.fileNoSuchFile)
    }

    @Test func everyStateKeyIsDocumentedWithItsUnit() throws {
        let doc = try Self.contract()
        let vendorKeys = GatewayApp.vendors.factories.flatMap { $0.stateKeys }
        #expect(vendorKeys.map(\.name).contains("consciousness_status"))
        for spec in StateKeys.all + vendorKeys {
            let row = doc.split(separator: "\n").first { $0.hasPrefix("| `\(spec.name)` |") }
            let line = try #require(row, "key \(spec.name) is not in mqtt-topics.md")
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            #expect(cells.count >= 4 && cells[2] == (spec.unit ?? "—"), "unit of \(spec.name): doc says \(cells.count > 2 ? cells[2] : "?")")
            #expect(cells.count >= 5 && cells[4].hasPrefix(spec.writable ? "yes" : "no"), "settable flag of \(spec.name)")
        }
    }

    /// A vendor's own keys reach the model through the catalog; they can never replace one of the model's.
    @Test func vendorDeclaredKeysAreRegisteredAndCannotReplaceTheModels() throws {
        _ = GatewayApp.vendors
        #expect(StateKeys.spec("consciousness_status")?.kind == .text)
        #expect(StateKeys.spec("consciousness_status_2")?.label == "Consciousness 2", "on a further endpoint too")
        StateKeys.register([KeySpec("power", label: "Not power", unit: "kW", kind: .text)])
        #expect(StateKeys.spec("power")?.unit == "W" && StateKeys.spec("power")?.label == "Power")
        #expect(!StateKeys.all.contains { $0.name == "consciousness_status" }, "the model names no vendor")
    }

    @Test func everyTopicTemplateIsDocumented() throws {
        let doc = try Self.contract()
        let topics = Topics(base: "<base>")
        let id = try #require(DeviceID(validating: "device_id"))
        let used = [
            topics.bridgeState, topics.bridgeInfo, topics.bridgeDevices, topics.bridgeEvent, topics.bridgeHealth,
            topics.bridgeRequest("<name>"), topics.bridgeResponse("<name>"),
            topics.device(id), topics.availability(id), topics.set(id), topics.set(id, key: "<key>"), topics.get(id), topics.commandError(id),
            topics.energyHome, topics.environment(room: "<room>"), topics.alert("<alert_id>"),
        ].map { $0.replacingOccurrences(of: "device_id", with: "<device_id>") }
        for topic in used + ["homeassistant/status", "homeassistant/device/<base>_<device_id>/config", "homeassistant/device/<base>_bridge/config",
                             "homeassistant/device/<base>_energy_home/config", "homeassistant/device/<base>_environment_<room>/config"] {
            #expect(doc.contains("`\(topic)`"), "\(topic) is not documented")
        }
        for request in GatewayController.requestNames {
            #expect(doc.contains("| `\(request)` |"), "bridge request \(request) is not documented")
        }
        for event in GatewayController.eventTypes {
            #expect(doc.contains("| `\(event)` |"), "event \(event) is not documented")
        }
        for code in GatewayError.Code.allCases {
            #expect(doc.contains("`\(code.rawValue)`"), "error code \(code.rawValue) is not documented")
        }
    }
}
