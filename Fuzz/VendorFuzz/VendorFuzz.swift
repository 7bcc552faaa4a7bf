// libFuzzer harness for every vendor decoder: each input goes through every vendor's way of reading outside
// bytes, as the vendor reads them, and on success through the mapping that turns the result into the gateway's
// model. Invariants: no crash, no hang, a refused body is an error with a message, no mapped state holds
// a number that is not finite, and no mapped time is a date ISO 8601 cannot show (the publisher writes every one).
// Seeds: Tests/Fixtures (the recorded answers) and Fuzz/corpus/vendors; tokens: Fuzz/vendors.dict.
//
// Numeric extremes: mutation alone rarely turns a `3600` in the middle of a recorded answer into
// 9223372036854775807, so every input also runs as a few variants with its numbers replaced by extremes (huge
// integers, ±1e308, -0, 1e-320, NaN), chosen from the input's hash so a run stays repeatable (three variants: the
// fuzzer runs a fifth as many inputs a second, and finds what it could not find before). A JSON object input
// is also read as the claims of a JWT, as Flume's and Enphase's tokens are.
//
// What each vendor reads (the async poll loops around these are covered by the simulator tests):
// - JSON bodies through `VendorHTTP.decode` (strict, depth-limited parse, then the Wire types): Awair, Consciousness,
//   Emporia, Enphase, Flume, Neurio, Powerwall, SolarEdge, Sense's sign-in; then their mappings.
// - Enphase's `/info` XML (`EnphaseInfo.parse`) and JWT claims (`JWTClaims`: Enphase's `exp`, Flume's `user_id`).
// - Green Button XML files (`GreenButtonFeed.parse`) and their mapping to series and devices.
// - Sense's WebSocket frames (`SenseVendor.handle(frame:)`) and Matter server messages (`MatterVendor` decode and
//   `handle(event:data:)`), one per input line; the whole input also as a Matter node (`MatterNode`, `plans`).
// - HomeKit accessories (HAP): the input as `/accessories` (`AccessoryDatabase`, `HomeKitMapping` plans and state), as
//   a characteristics list (reads, events), as TLV8 (pairing messages) and as an HTTP stream in odd-sized pieces
//   (`HAPMessageParser`, both sides), and each line as `avahi-browse` output.
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
import HAP
@testable import VendorHomeKit
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
    runAll(bytes)
    for variant in NumericExtremes.variants(of: bytes) { runAll(variant) }
    return 0
}

/// One input through every vendor.
func runAll(_ bytes: [UInt8]) {
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
    homekit(check)
    jwtClaims(check)
    for event in events.withLock({ events in defer { events.removeAll() }; return events }) { check.event(event) }
}

/// Variants of an input with its numbers replaced by extremes.
enum NumericExtremes {
    /// What vendors could send in place of a number: past Int64 and UInt64, past Double's range and its
    /// smallest subnormal, negative zero, and the words Double(_:) reads as NaN and infinity.
    static let values = [
        "9223372036854775807", "-9223372036854775808", "9223372036854775808", "18446744073709551616", "99999999999999999999",
        "1e308", "-1e308", "1.7976931348623157e308", "1e300", "-1e300", "1e-320", "-0", "2147483648", "NaN", "Infinity", "1e400",
    ]

    /// Every number replaced by one extreme; every number of six digits or more (times, ids, counters) by 2⁶³−1,
    /// where the next second or unit overflows; and one number replaced by one extreme. Nothing when the input
    /// has no number.
    static func variants(of bytes: [UInt8]) -> [[UInt8]] {
        let numbers = numberRanges(bytes)
        guard !numbers.isEmpty else { return [] }
        var random = hash(bytes)
        func next(_ count: Int) -> Int {
            random = random &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((random >> 33) % UInt64(count))
        }
        let everywhere = Array(values[next(values.count)].utf8)
        var variants = [replacing(bytes, numbers, with: { _ in everywhere })]
        let large = Set(numbers.indices.filter { index in
            numbers[index].prefix { bytes[$0] != UInt8(ascii: ".") && bytes[$0] | 0x20 != UInt8(ascii: "e") }.count(where: { bytes[$0] != UInt8(ascii: "-") }) >= 6
        })
        if !large.isEmpty { variants.append(replacing(bytes, numbers, with: { large.contains($0) ? Array(values[0].utf8) : nil })) }
        let chosen = next(numbers.count)
        let extreme = Array(values[next(values.count)].utf8)
        variants.append(replacing(bytes, numbers, with: { $0 == chosen ? extreme : nil }))
        return variants
    }

    /// The input with the numbers at `ranges` replaced where `with` gives a replacement.
    static func replacing(_ bytes: [UInt8], _ ranges: [Range<Int>], with replacement: (Int) -> [UInt8]?) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count + 32)
        var position = 0
        for (index, range) in ranges.enumerated() {
            guard let new = replacement(index) else { continue }
            out += bytes[position..<range.lowerBound]
            out += new
            position = range.upperBound
        }
        out += bytes[position...]
        return out
    }

    /// Where numbers stand (`-12.5e3`, not the `1` of `v1`): JSON values, XML text and attributes alike.
    static func numberRanges(_ bytes: [UInt8], limit: Int = 512) -> [Range<Int>] {
        func digit(_ at: Int) -> Bool { at < bytes.count && bytes[at] >= UInt8(ascii: "0") && bytes[at] <= UInt8(ascii: "9") }
        func word(_ byte: UInt8) -> Bool { byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "z") || byte == UInt8(ascii: "_") }
        var ranges: [Range<Int>] = []
        var index = 0
        while index < bytes.count, ranges.count < limit {
            let start = index
            var end = bytes[index] == UInt8(ascii: "-") ? index + 1 : index
            guard digit(end) else { index += 1; continue }
            while digit(end) { end += 1 }
            if end < bytes.count, bytes[end] == UInt8(ascii: "."), digit(end + 1) {
                end += 1
                while digit(end) { end += 1 }
            }
            if end < bytes.count, bytes[end] | 0x20 == UInt8(ascii: "e") {
                var exponent = end + 1
                if exponent < bytes.count, bytes[exponent] == UInt8(ascii: "+") || bytes[exponent] == UInt8(ascii: "-") { exponent += 1 }
                if digit(exponent) {
                    while digit(exponent) { exponent += 1 }
                    end = exponent
                }
            }
            if start == 0 || !(word(bytes[start - 1]) || digit(start - 1)) { ranges.append(start..<end) }
            index = end
        }
        return ranges
    }

    /// FNV-1a: the same input always gives the same variants.
    static func hash(_ bytes: [UInt8]) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x0100_0000_01B3 }
        return hash
    }
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

    /// The publisher writes every time as ISO 8601: it must be a date from year 0 to 9999.
    func date(_ date: Date, _ what: String) {
        _ = ISOTime.format(date)
        if !ISOTime.representable.contains(date.timeIntervalSince1970) { violated("\(what) at \(date.timeIntervalSince1970)", bytes) }
    }

    func event(_ event: VendorEvent) {
        switch event {
        case .state(let id, let values, let at):
            state(values, "state of \(id)")
            date(at, "state of \(id)")
        case .deviceEvent(let id, let type, let data, let at):
            state(data, "event \(type) of \(id)")
            date(at, "event \(type) of \(id)")
        case .history(let id, let readings):
            for reading in readings {
                number(reading.value, "history \(reading.key) of \(id)")
                date(reading.at, "history \(reading.key) of \(id)")
            }
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
        for (key, values) in series {
            for value in values {
                check.number(value.value, "green button \(key)")
                check.date(Date(timeIntervalSince1970: Double(value.end)), "green button \(key) interval")
            }
        }
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

func homekit(_ check: Checker) {
    if check.json, let accessories = try? AccessoryDatabase.parse(check.bytes) {
        for plan in HomeKitMapping.plans(vendorID: "hk", name: "fuzz", accessories: accessories) {
            guard let accessory = accessories.first(where: { $0.aid == plan.aid }) else { continue }
            var values: [Int: JSONValue] = [:]
            for service in accessory.services { for item in service.characteristics { values[item.iid] = item.value } }
            check.state(HomeKitMapping.state(plan, values: values), "homekit plan \(plan.device.id)")
            for key in plan.device.writableKeys ?? [] {
                _ = try? HomeKitMapping.writes(for: [key: .number(50)], plan: plan, values: values)
                _ = try? HomeKitMapping.writes(for: [key: .string("ON")], plan: plan, values: values)
            }
        }
    }
    _ = try? CharacteristicValue.parseList(check.bytes)
    _ = try? TLV8.decode(check.bytes)
    var parser = HAPMessageParser(maxBodyBytes: 1 << 16)
    var offset = 0, piece = 1
    while offset < check.bytes.count {
        let end = min(check.bytes.count, offset + piece)
        if (try? parser.feed(Array(check.bytes[offset..<end]))) == nil { break }
        offset = end
        piece = piece * 3 % 97 + 1
    }
    for line in check.lines.prefix(64) { _ = AvahiBrowser.parse(line) }
}

/// A JSON object as a token's claims: what Flume (`user_id`) and Enphase (`exp`) read from theirs. Claims are
/// small; a large answer is not read again (each claim decodes the whole token).
func jwtClaims(_ check: Checker) {
    guard check.json, check.bytes.count <= 2048, case .success(.object(let members)) = JSONValue.parse(check.bytes) else { return }
    let payload = Data(check.bytes).base64EncodedString()
        .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    let token = "eyJhbGciOiJub25lIn0.\(payload).c2ln"
    // Every numeric claim as the vendors read `user_id`.
    let numeric = members.filter { if case .number = $0.value { true } else { false } }.keys.sorted().prefix(4)
    for name in Set(["user_id"] + numeric) { _ = JWTClaims.text(name, in: token) }
    if let expiry = JWTClaims.expiry(token) { check.date(expiry, "token expiry") }
    // Enphase names an expired token's date in its error message.
    if let expired = EnphaseVendor.expiry(token) { _ = ISOTime.format(expired) }
}

#else
/// Release builds are not compiled for testing: the harness is for debug builds only.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt { 0 }
#endif
