import Foundation
import GatewayModel
import GatewayTesting
import Testing
import VendorKit
import VendorTesting
@testable import VendorAwair
@testable import VendorConsciousness
@testable import VendorEnphase
@testable import VendorFlume
@testable import VendorGreenButton
@testable import VendorMatter
@testable import VendorPowerwall
@testable import VendorSense
@testable import VendorSolarEdge

/// Every vendor's decoder and mapping fed numbers at the edges of what JSON and XML can hold. A number
/// is refused, left out or clamped; it never traps and never reaches the model as infinity.
@Suite struct NumericExtremesTests {
    /// JSON numbers Foundation's decoders accept (1e400 and 1e-400 are refused before any vendor sees them).
    static let extremes = [
        "1.7976931348623157e308", "-1.7976931348623157e308", "1e308", "-1e308", "1e300", "9223372036854775807", "-9223372036854775808",
        "18446744073709551616", "5e-324", "-0",
    ]

    /// `template` with every `X` written as `extreme`, decoded as the vendor decodes it; nil when refused.
    static func decode<T: Decodable>(_ type: T.Type, _ template: String, _ extreme: String) -> T? {
        try? JSONDecoder().decode(type, from: Data(template.replacingOccurrences(of: "X", with: extreme).utf8))
    }

    static func expectFinite(_ values: [String: StateValue], _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        for (key, value) in values {
            switch value {
            case .number(let number): #expect(number.isFinite, "\(what): \(key) = \(number)", sourceLocation: sourceLocation)
            case .object(let parts): expectFinite(parts, "\(what).\(key)", sourceLocation: sourceLocation)
            case .string, .bool: break
            }
        }
    }

    /// A JWT with `claims` as its payload (not signed: the gateway reads claims without verifying them).
    static func token(_ claims: String) -> String {
        let payload = Data(claims.utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        return "eyJhbGciOiJub25lIn0.\(payload).c2ln"
    }

    /// `round(x * 1000) / 1000` made 1.7e308 infinite; the scaled rounding gives such a number back whole.
    @Test func roundingAReadingNeverMakesItInfinite() {
        for extreme in [Double.greatestFiniteMagnitude, -Double.greatestFiniteMagnitude, 1e306, -1e306] {
            for rounded in [AwairReadings.rounded(extreme), FlumeVendor.rounded(extreme), SolarEdgeVendor.rounded(extreme),
                            GreenButtonVendor.rounded(extreme), MatterMapping.round3(extreme), PowerwallMapping.round(extreme, places: 1)] {
                #expect(rounded == extreme, "\(extreme) came back as \(rounded)")
            }
        }
        #expect(FlumeVendor.rounded(1.23456) == 1.235 && AwairReadings.rounded(21.770000457763672) == 21.77, "ordinary readings round as before")
    }

    @Test func awairReadingsStayFinite() {
        for extreme in Self.extremes {
            let local = Self.decode(WireLocalLatest.self, #"{"temp":X,"humid":X,"co2":X,"voc":X,"pm25":X,"pm10_est":X,"lux":X,"spl_a":X,"dew_point":X,"score":X}"#, extreme)
            if let local { Self.expectFinite(AwairReadings.local(local), "awair local \(extreme)") }
            let cloud = Self.decode(WireCloudLatest.self, #"{"data":[{"score":X,"sensors":[{"comp":"temp","value":X},{"comp":"dust","value":X}]}]}"#, extreme)
            for reading in cloud?.data ?? [] { Self.expectFinite(AwairReadings.cloud(reading), "awair cloud \(extreme)") }
        }
    }

    /// A thermostat at -1.8e308 °F: (t - 32) × 5 overflowed to -infinity.
    @Test func consciousnessThermostatsStayFinite() {
        for extreme in Self.extremes {
            let list = Self.decode(VendorConsciousness.WireDeviceList.self, #"""
                {"devices":[{"id":"t","type":"thermostat","status":"online","properties":{"current_temp":X,"target_temp":X,"temperature_unit":"F"}},
                            {"id":"l","type":"smart_light","properties":{"brightness":X}}]}
                """#, extreme)
            for device in list?.devices ?? [] {
                for unit in [ConsciousnessOptions.TemperatureUnit.auto, .fahrenheit, .celsius] {
                    Self.expectFinite(ConsciousnessMapping.map(device, vendorID: "house", now: Date(), temperatureUnit: unit).values, "\(device.id) \(extreme)")
                }
            }
        }
    }

    @Test func powerwallAndEnphaseStayFinite() {
        for extreme in Self.extremes {
            let meter = #"{"instant_power":X,"energy_exported":X,"energy_imported":X}"#
            if let aggregates = Self.decode(WireAggregates.self, #"{"site":\#(meter),"battery":\#(meter),"load":\#(meter),"solar":\#(meter)}"#, extreme) {
                Self.expectFinite(PowerwallMapping.state(PowerwallMapping.Reading(aggregates: aggregates)), "powerwall \(extreme)")
            }
            let entry = #"{"type":"eim","activeCount":1,"measurementType":"production","wNow":X,"whLifetime":X}"#
            if let production = Self.decode(WireProductionJSON.self, #"{"production":[\#(entry)],"storage":[{"type":"acb","activeCount":1,"wNow":X,"percentFull":X}]}"#, extreme) {
                var reading = EnphaseMapping.Reading(firmware: "D8.3.5433")
                reading.production = production
                Self.expectFinite(EnphaseMapping.state(reading), "enphase \(extreme)")
            }
        }
    }

    /// Every recorded Matter node with each of its numeric attributes at an extreme: 1e6 / 5e-324 K, a
    /// temperature of 1.8e308 hundredths and 10^(1.8e308) lx were infinite.
    @Test func matterNodesStayFinite() throws {
        let folder = Fixtures.path("matter", "nodes")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".json") }.sorted()
        #expect(!files.isEmpty)
        let values: [MatterValue] = [.double(.greatestFiniteMagnitude), .double(-.greatestFiniteMagnitude), .double(.leastNonzeroMagnitude), .int(.max), .int(.min), .uint(.max)]
        for file in files {
            let dump = try JSONDecoder().decode(MatterValue.self, from: Data(contentsOf: URL(fileURLWithPath: folder + "/" + file)))
            let node = try #require(MatterNode(dump))
            for value in values {
                var extreme = node
                for (path, attribute) in node.attributes where attribute.number != nil { extreme.attributes[path] = value }
                for plan in MatterMapping.plans(for: extreme, vendorID: "matter") { Self.expectFinite(plan.state, "\(file) at \(value)") }
            }
        }
    }

    /// A realtime frame with `epoch: 1e300` gave a state observed in the year 3e292, which the publisher's ISO 8601
    /// formatting trapped on; such a frame now counts as seen when it came. Powers at 1.8e308 × 10 were infinite.
    @Test func senseFramesWithExtremeNumbersStayFiniteAndDated() throws {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        for extreme in Self.extremes {
            let log = EventLog()
            let network = NetworkOptions(url: "http://127.0.0.1:9", timeout: .seconds(2), pollInterval: .seconds(900))
            let options = SenseOptions(network: network, realtimeURL: "ws://127.0.0.1:9", email: "me@example.com", password: VendorSecret("p"))
            let vendor = try SenseVendor(instanceID: "sense", options: options, sink: log.sink, context: VendorContext(now: { now }))
            let monitor = WireHello.Monitor(id: 1, serial_number: nil, solar_configured: true, solar_connected: true)
            let frame = #"{"type":"realtime_update","payload":{"w":X,"solar_w":X,"grid_w":X,"hz":X,"voltage":[X,X],"epoch":X,"devices":[{"id":"d","w":X}]}}"#
            #expect(vendor.handle(frame: frame.replacingOccurrences(of: "X", with: extreme), monitor: monitor, connected: {}) == nil)
            for event in log.all {
                guard case .state(let id, let values, let at) = event else { continue }
                Self.expectFinite(values, "sense \(id) \(extreme)")
                let seconds = at.timeIntervalSince1970
                #expect(seconds >= -62_167_219_200 && seconds <= 253_402_300_799, "\(id) observed at \(seconds) for epoch \(extreme)")
            }
        }
    }

    /// ISO 8601 with four-digit years cannot show 1e300 s: `Int64(1e303)` trapped. Such dates are clamped.
    @Test func farDatesAreWrittenClampedNotACrash() {
        #expect(ISOTime.format(Date(timeIntervalSince1970: 1e300)) == "9999-12-31T23:59:59.999Z")
        #expect(ISOTime.format(Date(timeIntervalSince1970: -1e300)) == "0000-01-01T00:00:00.000Z")
        #expect(ISOTime.format(Date(timeIntervalSince1970: .infinity)) == "9999-12-31T23:59:59.999Z")
        #expect(ISOTime.format(Date(timeIntervalSince1970: .nan)) == "1970-01-01T00:00:00.000Z")
        #expect(ISOTime.format(Date(timeIntervalSince1970: 1_800_000_000.25)) == "2027-01-15T08:00:00.250Z", "ordinary dates as before")
    }

    /// An Envoy token with `exp: -1e300` has expired "on" a date the error message's ISO 8601 trapped on; an `exp`
    /// no date can show is no expiry.
    @Test func aTokenExpiryPastAnyDateIsNoExpiry() {
        for exp in ["-1e300", "1e300", "-9223372036854775808", "18446744073709551616"] {
            #expect(JWTClaims.expiry(Self.token(#"{"exp":\#(exp)}"#)) == nil, "exp \(exp)")
            #expect(EnphaseVendor.expiry(Self.token(#"{"exp":\#(exp)}"#)).map(ISOTime.format) == nil, "exp \(exp)")
        }
        #expect(JWTClaims.expiry(Self.token(#"{"exp":1700000000}"#)) == Date(timeIntervalSince1970: 1_700_000_000))
    }
}
