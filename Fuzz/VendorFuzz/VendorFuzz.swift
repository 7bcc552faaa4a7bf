// libFuzzer harness for every vendor decoder: each input goes through every vendor's way of reading outside
// bytes, as the vendor reads them, and on success through the mapping that turns the result into the gateway's
// model. Invariants: no crash, no hang, a refused body is an error with a message, and no mapped state holds
// a number that is not finite. Seeds: Tests/Fixtures (the recorded answers) and Fuzz/corpus/vendors.
//
// What each vendor reads (the async poll loops around these are covered by the simulator tests):
// - JSON bodies through `VendorHTTP.decode` (strict, depth-limited parse, then the Wire types): Awair, Consciousness,
//   Emporia, Enphase, Flume, Neurio, Powerwall, SolarEdge, Sense's sign-in; then their mappings.
// - Enphase's `/info` XML (`EnphaseInfo.parse`) and the Enlighten token's claims (`JWTClaims`).
// - Green Button XML files (`GreenButtonFeed.parse`) and their mapping to series and devices.
// - Sense's WebSocket frames (`SenseVendor.handle(frame:)`) and Matter server messages (`MatterVendor` decode and
//   `handle(event:data:)`), one per input line; the whole input also as a Matter node (`MatterNode`, `plans`).
// Demo has no decoder: its devices are simulated in process.
//
// Internal names are reached with @testable, which debug builds (the fuzz build and the test build) allow.

import FuzzDriver

@main enum VendorFuzz {
    static func main() { fuzzMain(fuzzOne) }
}

#if DEBUG
import CurlHTTP
import Foundation
import GatewayModel
import Resilience
import Synchronization
import VendorKit
@testable import VendorAwair
@testable import VendorConsciousness
@testable import VendorEmporia
@testable import VendorEnphase
@testable import VendorFlume
@testable import VendorGreenButton
@testable import VendorMatter
@testable import VendorNeurio
@testable import VendorPowerwall
@testable import VendorSense
@testable import VendorSolarEdge

/// What the vendors sent to the gateway while one input ran.
let events = Mutex<[VendorEvent]>([])
let sink = VendorEventSink { event in events.withLock { $0.append(event) } }
let now = Date(timeIntervalSince1970: 1_800_000_000)
let context = VendorContext(now: { now })

/// One libcurl client and one `VendorHTTP` for every decode: `decode` is the same code for all vendors.
let http: VendorHTTP = {
    do {
        return VendorHTTP(vendorID: "fuzz", client: try HTTPClient(), settings: VendorHTTP.Settings(), sink: sink, time: TimeSource(ContinuousClock()))
    } catch {
        fatalError("fuzz: cannot start the HTTP client: \(error)")
    }
}()

/// Sense keeps the devices of the feed between frames, as in a session; one vendor for the whole run.
let sense: SenseVendor = {
    let network = NetworkOptions(url: "http://127.0.0.1:9", timeout: .seconds(2), pollInterval: .seconds(900))
    let options = SenseOptions(network: network, realtimeURL: "ws://127.0.0.1:9", email: "fuzz@example.com", password: VendorSecret("p"))
    do {
        return try SenseVendor(instanceID: "sense", options: options, sink: sink, context: context)
    } catch {
        fatalError("fuzz: cannot make the Sense vendor: \(error)")
    }
}()
let senseMonitors = [
    WireHello.Monitor(id: 1, serial_number: "fuzz", solar_configured: true, solar_connected: true),
    WireHello.Monitor(id: 2, serial_number: nil, solar_configured: false, solar_connected: nil),
]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = fuzzBytes(data, size)
    let body = Data(bytes)
    let response = HTTPClientResponse(
        status: 200, headers: ["Content-Type": "application/json"], body: body, effectiveURL: "http://127.0.0.1/fuzz"
    )
    // `decode` parses strictly before JSONDecoder: a body that fails there fails the same way for every type.
    let strict: Bool
    if case .success = StrictJSON.parse(bytes) { strict = true } else { strict = false }
    let check = Checker(bytes: bytes, response: response, json: strict)
    if !strict { _ = check.decode(JSONValue.self, always: true) }
    awair(check)
    consciousness(check)
    emporia(check)
    enphase(check)
    flume(check)
    neurio(check)
    powerwall(check)
    solarEdge(check)
    greenButton(check)
    senseFrames(check)
    matter(check)
    for event in events.withLock({ events in defer { events.removeAll() }; return events }) { check.event(event) }
    return 0
}

/// The input and the checks every decoder's result goes through.
struct Checker {
    let bytes: [UInt8]
    let response: HTTPClientResponse
    /// Whether the body is JSON the strict parser accepts.
    let json: Bool

    /// The body as the vendor's `VendorHTTP.decode` reads it; nil (with a readable error) when refused.
    func decode<T: Decodable>(_ type: T.Type, always: Bool = false) -> T? {
        guard json || always else { return nil }
        do {
            return try http.decode(type, from: response, context: "\(T.self)")
        } catch {
            if error.message.isEmpty { violated("\(T.self): refused without a message (\(error.code.rawValue))", bytes) }
            return nil
        }
    }

    var lines: [String] {
        String(decoding: bytes, as: UTF8.self).split(whereSeparator: \.isNewline).prefix(8).map(String.init)
    }

    func state(_ values: [String: StateValue], _ what: String) {
        for (key, value) in values { finite(value, "\(what) \(key)") }
    }

    func finite(_ value: StateValue, _ what: String) {
        switch value {
        case .number(let number): if !number.isFinite { violated("\(what) = \(number)", bytes) }
        case .object(let members): for (key, member) in members { finite(member, "\(what).\(key)") }
        case .string, .bool: break
        }
    }

    func number(_ value: Double?, _ what: String) {
        if let value, !value.isFinite { violated("\(what) = \(value)", bytes) }
    }

    func event(_ event: VendorEvent) {
        switch event {
        case .state(let id, let values, _): state(values, "state of \(id)")
        case .deviceEvent(let id, let type, let data, _): state(data, "event \(type) of \(id)")
        case .history(let id, let readings): for reading in readings { number(reading.value, "history \(reading.key) of \(id)") }
        default: break
        }
    }
}

// MARK: JSON vendors

func awair(_ check: Checker) {
    if let latest = check.decode(WireCloudLatest.self) {
        for reading in latest.data ?? [] { check.state(AwairReadings.cloud(reading), "awair cloud") }
    }
    if let latest = check.decode(WireLocalLatest.self) { check.state(AwairReadings.local(latest), "awair local") }
    if let config = check.decode(WireLocalConfig.self) { _ = AwairLocalVendor.model(config.device_uuid) }
    if let list = check.decode(WireDevices.self) { for entry in list.devices ?? [] { _ = AwairReadings.roomName(entry.roomType) } }
    if let user = check.decode(WireUser.self) { _ = user.quota("LATEST") }
}

func consciousness(_ check: Checker) {
    if let list = check.decode(VendorConsciousness.WireDeviceList.self) {
        let mapped = list.devices.map { device in
            ConsciousnessMapping.map(device, vendorID: "house", now: now, temperatureUnit: .auto)
        }
        for item in mapped { check.state(item.values, "consciousness \(item.device.id)") }
        _ = ConsciousnessMapping.assignIDs(mapped, vendorID: "house")
    }
    if let status = check.decode(VendorConsciousness.WireStatus.self) {
        let emotions = check.decode(WireEmotions.self)?.current
        check.state(ConsciousnessMapping.houseValues(status, emotions: emotions), "consciousness house")
    }
    if let answer = check.decode(WireControlAnswer.self), let device = answer.device {
        check.state(ConsciousnessMapping.map(device, vendorID: "house", now: now, temperatureUnit: .fahrenheit).values, "consciousness control")
    }
    _ = check.decode(WireBatchAnswer.self)
    _ = check.decode(VendorConsciousness.WireLogin.self)
}

func emporia(_ check: Checker) {
    if let customer = check.decode(WireCustomer.self) {
        for device in (customer.devices ?? []).flatMap(\.all) {
            if let charger = device.evCharger { check.state(EmporiaVendor.state(of: charger), "emporia charger") }
        }
    }
    if let charger = check.decode(VendorEmporia.WireDevice.Charger.self) { check.state(EmporiaVendor.state(of: charger), "emporia charger") }
    _ = check.decode(WireUsages.self)
    _ = check.decode(WireCognito.self)
}

func enphase(_ check: Checker) {
    var readings: [EnphaseMapping.Reading] = []
    func reading(_ fill: (inout EnphaseMapping.Reading) -> Void) {
        var reading = EnphaseMapping.Reading(firmware: "D8.3.5433")
        fill(&reading)
        readings.append(reading)
    }
    if let production = check.decode(WireProductionJSON.self) { reading { $0.production = production } }
    if let v1 = check.decode(WireV1Production.self) { reading { $0.v1 = v1 } }
    if let meters = check.decode([WireMeterConfig].self) {
        reading { $0.meters = meters }
        for type in ["production", "net-consumption", "total-consumption", "storage"] { _ = EnphaseMapping.enabledMeter(type, in: meters) }
    }
    if let meterReadings = check.decode([WireMeterReading].self) { reading { $0.readings = meterReadings } }
    if let secctrl = check.decode(WireSecCtrl.self) { reading { $0.secctrl = secctrl } }
    if let power = check.decode(WireEnsemblePower.self) { reading { $0.ensemblePower = power } }
    _ = check.decode([WireInverter].self)
    for reading in readings { check.state(EnphaseMapping.state(reading), "enphase") }
    let text = String(decoding: check.bytes, as: UTF8.self)
    if let info = EnphaseInfo.parse(text) {
        _ = info.needsToken
        _ = EnphaseMapping.version(info.firmware)
        _ = EnphaseMapping.device(vendorID: "envoy", info: info, keys: ["solar_power"])
    }
    _ = EnphaseVendor.claimedExpiry(text)
}

func flume(_ check: Checker) {
    if let devices = check.decode(Envelope<VendorFlume.WireDevice>.self) {
        for device in devices.data ?? [] { check.number(FlumeVendor.battery(device.battery_level), "flume battery") }
    }
    if let query = check.decode(Envelope<WireQueryResult>.self) {
        for result in query.data ?? [] { for buckets in result.values { for bucket in buckets { _ = bucket.value.map(FlumeVendor.rounded) } } }
    }
    _ = check.decode(Envelope<WireLeak>.self)
    _ = check.decode(Envelope<WireToken>.self)
}

func neurio(_ check: Checker) {
    if let sample = check.decode(WireSample.self) { check.state(NeurioMapping.state(sample), "neurio") }
}

func powerwall(_ check: Checker) {
    var reading: PowerwallMapping.Reading?
    if let aggregates = check.decode(WireAggregates.self) { reading = PowerwallMapping.Reading(aggregates: aggregates) }
    var parts = reading ?? PowerwallMapping.Reading(aggregates: WireAggregates())
    parts.soe = check.decode(WireStateOfEnergy.self)
    parts.grid = check.decode(WireGridStatus.self)
    parts.operation = check.decode(WireOperation.self)
    check.state(PowerwallMapping.state(parts), "powerwall")
    let name = check.decode(WireSiteInfo.self)?.siteName
    let firmware = check.decode(VendorPowerwall.WireStatus.self)?.version
    _ = PowerwallMapping.device(vendorID: "pw", reading: parts, siteName: name, firmware: firmware)
    _ = check.decode(VendorPowerwall.WireLogin.self)
}

func solarEdge(_ check: Checker) {
    if let overview = check.decode(WireOverview.self) {
        for (key, value) in overview.counters { check.number(value, "solaredge \(key)") }
    }
    _ = check.decode(WireSites.self)
    _ = check.decode(WireEnergy.self)
}

// MARK: Files and streams

func greenButton(_ check: Checker) {
    let feed: GreenButtonFeed
    do {
        feed = try GreenButtonFeed.parse(Data(check.bytes))
    } catch {
        if error.description.isEmpty { violated("green button: refused without a reason", check.bytes) }
        return
    }
    for point in feed.usagePoints {
        let series = GreenButtonMapping.series(point)
        for (key, values) in series { for value in values { check.number(value.value, "green button \(key)") } }
        _ = GreenButtonMapping.device(vendorID: "gb", point: point, keys: series.keys.sorted())
    }
}

func senseFrames(_ check: Checker) {
    for (index, line) in check.lines.enumerated() {
        _ = sense.handle(frame: line, monitor: senseMonitors[index % senseMonitors.count], connected: {})
    }
    _ = check.decode(WireHello.self)
    _ = check.decode(WireTrends.self)
    _ = check.decode(WireRenew.self)
}

func matter(_ check: Checker) {
    let vendor = MatterVendor(instanceID: "matter", options: MatterOptions(), sink: sink, context: context)
    // The whole input as a node (the fixtures are nodes as the server sends them), then each line as a message.
    if let value = try? JSONDecoder().decode(MatterValue.self, from: Data(check.bytes)), let node = MatterNode(value) {
        for plan in MatterMapping.plans(for: node, vendorID: "matter") { check.state(plan.state, "matter plan \(plan.device.id)") }
        _ = vendor.handle(event: "node_added", data: value)
    }
    for line in check.lines {
        guard let message = try? JSONDecoder().decode(MatterIncoming.self, from: Data(line.utf8)) else { continue }
        if let event = message.event { _ = vendor.handle(event: event, data: message.data ?? .null) }
        if message.schema_version != nil { _ = try? JSONDecoder().decode(MatterServerInfo.self, from: Data(line.utf8)) }
    }
}

#else
/// Release builds are not compiled for testing: the harness is for debug builds only.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt { 0 }
#endif
