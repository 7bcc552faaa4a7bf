import Cache
import Foundation
@testable import GatewayCore
import GatewayModel
import GatewayTesting
import Logging
import Testing

/// A restart reads the cache on every core: every readable device and state comes back, in full, and an
/// unreadable row is skipped on its own.
@Suite struct CachedSnapshotTests {
    @Test func everyReadableDeviceAndStateComesBackAndABrokenRowIsSkipped() throws {
        let directory = try TemporaryDirectory()
        let link = try CacheLink(path: directory.file("g.sqlite"), logger: Logger(label: "test"))
        let devices = (0 ..< 300).map { index in
            Device(vendorID: "demo", vendorDeviceID: "d\(index)", name: "Device \(index)", type: index % 2 == 0 ? .sensor : .plug,
                   room: index % 3 == 0 ? "Kitchen" : nil, keys: index % 2 == 0 ? ["temperature"] : ["state", "power"])
        }
        var rows = devices.compactMap { CacheLink.storedDevice($0, now: Date(timeIntervalSince1970: 1_000)) }
        rows.append(StoredDevice(id: "demo_broken", vendorID: "demo", json: #"{"id":"demo_broken","name":"#, updatedAt: 1_000))
        try link.store.upsertDevices(rows)
        try link.store.saveStates(devices.enumerated().map { index, device in
            StoredState(deviceID: device.id.rawValue, json: #"{"temperature":\#(index)}"#, sourceTime: 2_000, updatedAt: 2_000)
        } + [StoredState(deviceID: "demo_d0x", json: "not json", sourceTime: nil, updatedAt: 2_000)])

        let snapshot = link.loadSnapshot()
        #expect(snapshot.devices.sorted { $0.id < $1.id } == devices.sorted { $0.id < $1.id })
        #expect(snapshot.states.count == devices.count)
        for (index, device) in devices.enumerated() {
            let state = snapshot.states[device.id]
            #expect(state?.values["temperature"] == .number(Double(index)) && state?.stale == true, "\(device.id)")
            #expect(state?.lastSeen == Date(timeIntervalSince1970: 2_000))
        }
    }
}
