import Foundation
import GatewayModel
import Synchronization
import Testing
import VendorDemo
import VendorKit
import VendorTesting

/// The demo's solar + battery system over a simulated day, and its counters across restarts.
@Suite struct DemoVendorTests {
    final class Box<Value: Sendable>: Sendable {
        let lock: Mutex<Value>
        init(_ value: Value) { lock = Mutex(value) }
        func get() -> Value { lock.withLock { $0 } }
        func update(_ body: (inout Value) -> Void) { lock.withLock { body(&$0) } }
    }

    /// A demo vendor on a hand-moved clock that records what it reports.
    final class Rig: Sendable {
        let time: Box<Date>
        let events: Box<[DeviceID: [String: StateValue]]>
        let vendor: DemoVendor

        init(start: Date, seed: UInt64 = 7) {
            let time = Box(start)
            let events = Box<[DeviceID: [String: StateValue]]>([:])
            self.time = time
            self.events = events
            vendor = DemoVendor(
                instanceID: "demo", options: DemoOptions(pollInterval: .seconds(3600), seed: seed),
                sink: VendorEventSink { event in
                    if case .state(let id, let values, _) = event { events.update { $0[id, default: [:]].merge(values) { $1 } } }
                },
                now: { time.get() })
        }

        func advance(_ seconds: TimeInterval) {
            time.update { $0 = $0.addingTimeInterval(seconds) }
            vendor.tick()
        }

        func values(_ id: String) -> [String: Double] {
            let state = events.get()[DeviceID(vendorInstance: "demo", vendorDeviceID: id)] ?? [:]
            return state.compactMapValues(\.number)
        }

        func refreshAll() async throws {
            for device in vendor.devices { try await vendor.refresh(device.id) }
        }
    }

    static let counters = ["solar_energy", "grid_import_energy", "grid_export_energy", "battery_charge_energy",
                           "battery_discharge_energy", "home_energy"]

    /// Local midnight (the demo follows the machine's time zone) of a day after the counters' epoch (the model has no seasons).
    static func midnight() -> Date {
        Calendar.current.startOfDay(for: Date(timeIntervalSince1970: 1_797_854_400)) // 2026-12-21T12:00:00Z
    }

    struct Sample {
        var hour: Double
        var values: [String: Double]
    }

    func simulateDay(seed: UInt64 = 7) async throws -> [Sample] {
        let rig = Rig(start: Self.midnight(), seed: seed)
        try await rig.refreshAll()
        var samples: [Sample] = []
        for step in 1...288 {
            rig.advance(300)
            samples.append(Sample(hour: Double(step) * 300 / 3600, values: rig.values("energy")))
        }
        return samples
    }

    @Test func solarFollowsTheSunTheBatteryMovesAndTheGridBalances() async throws {
        let day = try await simulateDay()
        for sample in day {
            let v = sample.values
            let solar = try #require(v["solar_power"]), grid = try #require(v["grid_power"])
            let battery = try #require(v["battery_power"]), home = try #require(v["home_power"])
            // home = solar + grid + battery, grid + import / − export, battery + discharge / − charge.
            #expect(abs(home - (solar + grid + battery)) < 0.001, "at \(sample.hour) h: \(v)")
            #expect(solar >= 0 && home > 0)
            #expect(abs(battery) <= 3000)
            let level = try #require(v["battery_level"])
            #expect(level >= 0 && level <= 100)
            if sample.hour < 5 || sample.hour > 21 { #expect(solar == 0, "solar at night (\(sample.hour) h): \(solar)") }
            if sample.hour >= 11, sample.hour <= 13 { #expect(solar > 500, "solar at noon (\(sample.hour) h): \(solar)") }
        }
        let levels = day.compactMap { $0.values["battery_level"] }
        #expect((levels.max() ?? 0) - (levels.min() ?? 0) > 10, "battery level barely moved: \(levels.min() ?? 0) … \(levels.max() ?? 0)")
        // The battery both charges (midday surplus) and discharges (evening, night).
        #expect(day.contains { ($0.values["battery_power"] ?? 0) < -100 })
        #expect(day.contains { ($0.values["battery_power"] ?? 0) > 100 })
        // The grid is not idle most of the time (it sat at 0 for 121 of 129 messages).
        let idle = day.filter { $0.values["grid_power"] == 0 }.count
        #expect(idle < day.count / 2, "grid_power was 0 in \(idle) of \(day.count) samples")
        // Counters only grow.
        for key in Self.counters {
            let series = day.compactMap { $0.values[key] }
            #expect(series.count == day.count)
            #expect(zip(series, series.dropFirst()).allSatisfy { $0 <= $1 }, "\(key) went backwards")
        }
        #expect((day.last?.values["solar_energy"] ?? 0) - (day.first?.values["solar_energy"] ?? 0) > 5)
    }

    @Test func theSameSeedAndTimesGiveTheSameDay() async throws {
        let first = try await simulateDay(seed: 11).map(\.values)
        let second = try await simulateDay(seed: 11).map(\.values)
        #expect(first == second)
    }

    /// With the cache: counters and the battery level continue from the last known values.
    @Test func restoreContinuesCountersAndBatteryLevelFromTheCache() async throws {
        let rig = Rig(start: Self.midnight().addingTimeInterval(12 * 3600))
        let energy = DeviceID(vendorInstance: "demo", vendorDeviceID: "energy")
        let plug = DeviceID(vendorInstance: "demo", vendorDeviceID: "plug")
        var cached: [String: StateValue] = ["battery_level": .number(42)]
        for (index, key) in Self.counters.enumerated() { cached[key] = .number(90_000 + Double(index)) }
        rig.vendor.restore(lastKnown: [energy: cached, plug: ["energy": .number(777.5), "power": .number(5)]])
        try await rig.refreshAll()
        let start = rig.values("energy")
        for (index, key) in Self.counters.enumerated() { #expect(start[key] == 90_000 + Double(index), "\(key) did not continue from the cache") }
        #expect(start["battery_level"] == 42)
        #expect(rig.values("plug")["energy"] == 777.5)
        rig.advance(60)
        let after = rig.values("energy")
        for (index, key) in Self.counters.enumerated() {
            let value = try #require(after[key])
            #expect(value >= 90_000 + Double(index) && value < 90_000 + Double(index) + 0.2, "\(key): \(value)")
        }
        #expect(abs((after["battery_level"] ?? 0) - 42) < 1)
        #expect((rig.values("plug")["energy"] ?? 0) >= 777.5)
    }

    /// Without a cache: a later start never begins below where an earlier run ended.
    @Test func withoutACacheALaterStartIsNeverLowerThanAnEarlierRunEnded() async throws {
        let noon = Self.midnight().addingTimeInterval(12 * 3600)
        let first = Rig(start: noon)
        try await first.refreshAll()
        for _ in 0..<120 { first.advance(30) } // one hour of full sun
        let ended = first.values("energy")
        let endedPlug = first.values("plug")
        let second = Rig(start: noon.addingTimeInterval(3600 + 5))
        try await second.refreshAll()
        let started = second.values("energy")
        for key in Self.counters {
            let end = try #require(ended[key]), begin = try #require(started[key])
            #expect(begin >= end, "\(key): previous run ended at \(end), the next one starts at \(begin)")
        }
        #expect((second.values("plug")["energy"] ?? 0) >= (endedPlug["energy"] ?? .infinity))
    }

    @Test func devicesCarrySoftwareVersionAndSerialNumber() {
        let rig = Rig(start: Self.midnight())
        for device in rig.vendor.devices {
            #expect(device.swVersion != nil && device.serialNumber != nil, "\(device.id)")
        }
    }
}
