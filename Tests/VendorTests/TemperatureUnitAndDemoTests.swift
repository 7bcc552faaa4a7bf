import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayModel
import Testing
import VendorDemo
import VendorKit
import VendorTesting

@Suite struct TemperatureUnitConfigTests {
    private func parse(_ extra: String) -> Result<GatewayConfig, ConfigLoader.Failure> {
        let yaml = "mqtt: {url: mqtt://localhost:1883}\nvendors:\n  - {type: consciousness, id: house, url: http://h:8000, username: admin, "
            + "password_env: PW\(extra)}\n"
        return ConfigLoader.parse(yaml: yaml, environment: ["PW": "secret-pw"])
    }

    @Test func temperatureUnitIsReadAndChecked() {
        guard case .success = parse(", temperature_unit: fahrenheit") else {
            Issue.record("temperature_unit: fahrenheit was refused")
            return
        }
        guard case .failure(let failure) = parse(", temperature_unit: kelvin") else {
            Issue.record("temperature_unit: kelvin was accepted")
            return
        }
        let problem = failure.problems.first { $0.path == "vendors[0].temperature_unit" }
        #expect(problem?.description.contains("celsius") == true)
    }
}

@Suite struct DemoReadStateTests {
    @Test func demoReadStateReturnsCurrentValuesWithoutEvents() async throws {
        let events = EventLog()
        let demo = DemoVendor(instanceID: "demo", options: DemoOptions(), sink: events.sink)
        let light = try #require(demo.devices.first { $0.type == .light })
        _ = try await demo.execute(DeviceCommand(
            id: "c1", device: light.id, vendorID: "demo", vendorDeviceID: light.vendorDeviceID,
            changes: ["state": .string("OFF")], issuedAt: Date(), expiresAt: Date().addingTimeInterval(60)
        ))
        events.clear()
        let values = try await demo.readState(light.id)
        #expect(values["state"] == .string("OFF"))
        #expect(events.all.isEmpty)
        await #expect(throws: GatewayError.self) { _ = try await demo.readState(DeviceID(vendorInstance: "demo", vendorDeviceID: "ghost")) }
    }
}
