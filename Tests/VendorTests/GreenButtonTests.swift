import FlyingFox
import Foundation
import GatewayModel
import GatewayTesting
import SimulatorKit
import TestTraits
import Testing
import VendorKit
@testable import VendorGreenButton
import VendorTesting

/// `type: green_button` with sample downloads built from the ESPI schema (Tests/Fixtures/green_button).
@Suite(.integration) struct GreenButtonTests {
    static let electricity = Fixtures.path("green_button", "electricity_hourly.xml")
    static let gas = Fixtures.path("green_button", "gas_daily.xml")
    static let start = 1_793_491_200.0 // 2026-11-01T00:00:00Z, the first interval of both files

    func vendor(_ source: GreenButtonOptions.Source, log: EventLog) throws -> GreenButtonVendor {
        try GreenButtonVendor(instanceID: "gb", options: GreenButtonOptions(source: source, pollInterval: .seconds(3600)), sink: log.sink,
                              context: VendorContext(clock: ManualClock()))
    }

    @Test func theFeedIsReadThroughItsLinks() throws {
        let feed = try GreenButtonFeed.parse(Fixtures.data("green_button", "electricity_hourly.xml"))
        let point = try #require(feed.usagePoints.first)
        #expect(feed.usagePoints.count == 1 && point.id == "1" && point.name == "Home electricity" && point.service == .electricity)
        #expect(point.series.map(\.readingType.flowDirection) == [1, 19])
        #expect(point.series.allSatisfy { $0.intervals.count == 24 })
        let gas = try GreenButtonFeed.parse(Fixtures.data("green_button", "gas_daily.xml"))
        #expect(gas.usagePoints.first?.service == .gas && gas.usagePoints.first?.series.first?.readingType.uom == 169)
    }

    /// Found by the vendors fuzz target (Fuzz/corpus/vendors/fuzz-found-xml-name-not-utf8.xml): an element name
    /// that is not UTF-8 trapped inside Foundation's XMLParser; such a file is now refused with a reason.
    @Test func aFileThatIsNotUTF8IsRefusedNotACrash() {
        let bytes = Array("<?xml version='1.0' encoding='UTF-8'?>\n<a><b".utf8) + [0xFF, 0xFF] + Array(">1</b".utf8) + [0xFF, 0xFF] + Array("></a>\n".utf8)
        #expect(throws: GreenButtonFeed.ParseError.self) { try GreenButtonFeed.parse(Data(bytes)) }
        do {
            _ = try GreenButtonFeed.parse(Data(bytes))
        } catch {
            #expect(error.description.contains("not UTF-8"))
        }
    }

    /// The feed's own XML reader (no libxml2): what Atom files contain is read, what is not well-formed is an error
    /// with its line, and no entity is ever expanded.
    @Test func theXMLReaderReadsWhatFeedsContainAndRefusesTheRest() throws {
        func events(_ text: String) throws(XMLReader.Failure) -> [String] {
            var out: [String] = []
            try XMLReader.read(Array(text.utf8)) { event in
                switch event {
                case .start(let name, let attributes): out.append("<\(name)\(attributes.sorted { $0.key < $1.key }.map { " \($0.key)=\($0.value)" }.joined())>")
                case .text(let text): out.append(text)
                case .end(let name): out.append("</\(name)>")
                }
            }
            return out
        }
        let document = """
        \u{FEFF}<?xml version="1.0" encoding="UTF-8"?>
        <!-- a comment -->
        <feed xmlns="http://www.w3.org/2005/Atom" xmlns:espi="http://naesb.org/espi">
        <link rel='self' href="/UsagePoint/1?a=1&amp;b=&#50;"/><espi:value>&lt;5&gt; &#x41;&quot;&apos;</espi:value><![CDATA[<raw&>]]></feed>
        """
        #expect(try events(document).filter { !$0.allSatisfy(\.isWhitespace) } ==
                ["<feed espi=http://naesb.org/espi xmlns=http://www.w3.org/2005/Atom>", "<link href=/UsagePoint/1?a=1&b=2 rel=self>", "</link>",
                 "<value>", "<5> A\"'", "</value>", "<raw&>", "</feed>"])
        let broken: [(String, Int, String)] = [
            ("<a>\n<b></a>", 2, "does not close <b>"),
            ("<a>\n\n", 3, "ends inside <a>"),
            ("<!DOCTYPE a [<!ENTITY x \"boom\">]><a>&x;</a>", 1, "DOCTYPE with declarations"),
            ("<a>&x;</a>", 1, "unknown reference &x;"),
            ("<a b=1/>", 1, "quoted attribute value"),
            ("<a b='1' b='2'/>", 1, "appears twice"),
            ("<a/><b/>", 1, "second document element"),
            ("text", 1, "outside the document element"),
            ("", 1, "no document element"),
            ("<a><!-- open", 1, "unterminated comment"),
        ]
        for (text, line, reason) in broken {
            do {
                _ = try events(text)
                Issue.record("\(text) was read")
            } catch {
                #expect(error.line == line && error.reason.contains(reason), "\(text): line \(error.line), \(error.reason)")
            }
        }
        #expect(throws: GreenButtonFeed.ParseError.self) { try GreenButtonFeed.parse(Data("<feed><entry></feed>".utf8)) }
    }

    @Test func aFolderOfDownloadsGivesOneDevicePerUsagePointWithCountersAndHistoryAtTheFilesTimes() async throws {
        let directory = try TemporaryDirectory()
        try FileManager.default.copyItem(atPath: Self.electricity, toPath: directory.path + "/2026-11-01.xml")
        try FileManager.default.copyItem(atPath: Self.gas, toPath: directory.path + "/gas.xml")
        let log = EventLog()
        let vendor = try vendor(.path(directory.path), log: log)
        try await vendor.poll()
        let devices = try #require(log.inventories.last)
        #expect(devices.map(\.id.rawValue) == ["gb_1", "gb_7"])
        #expect(devices[0].type == .energyMeter && devices[0].keys == ["grid_export_energy", "grid_import_energy"])
        #expect(devices[1].type == .gasMeter && devices[1].keys == ["gas_volume"] && devices[1].name == "Gas meter")
        let electricity = try #require(log.states[devices[0].id])
        #expect(electricity["grid_import_energy"] == .number(13.106) && electricity["grid_export_energy"] == .number(6.49))
        // 17.51 therm at 1,037 BTU/ft³.
        #expect(log.states[devices[1].id]?["gas_volume"] == .number(47.814))
        #expect(log.observedAt(devices[0].id) == Date(timeIntervalSince1970: Self.start + 24 * 3600), "the state is as of the last interval")

        let history = log.all.compactMap { if case .history(let id, let readings) = $0 { (id, readings) } else { nil } }
        let imports = history.first { $0.0 == devices[0].id }?.1.filter { $0.key == "grid_import_energy" } ?? []
        #expect(imports.count == 24)
        #expect(imports.first?.at == Date(timeIntervalSince1970: Self.start + 3600) && imports.first?.value == 0.412, "running totals at each interval's end")
        #expect(imports.last?.value == 13.106)

        // Nothing new: no history again; the same interval in a second download counts once.
        log.clear()
        try FileManager.default.copyItem(atPath: Self.electricity, toPath: directory.path + "/copy.xml")
        try await vendor.poll()
        #expect(!log.all.contains { if case .history = $0 { true } else { false } })
        #expect(log.states[devices[0].id]?["grid_import_energy"] == .number(13.106))
    }

    @Test func unreadableDownloadsAreReportedAndTheVendorRecovers() async throws {
        let directory = try TemporaryDirectory()
        let log = EventLog()
        let vendor = try vendor(.path(directory.path + "/exports"), log: log)
        let missing = await gatewayError { try await vendor.poll() }
        #expect(missing?.code == .notFound && log.health.last?.state == .down)
        try FileManager.default.createDirectory(atPath: directory.path + "/exports", withIntermediateDirectories: true)
        try "date,usage\n2026-11-01,12.3\n".write(toFile: directory.path + "/exports/usage.xml", atomically: true, encoding: .utf8)
        let broken = await gatewayError { try await vendor.poll() }
        #expect(broken?.code == .malformedResponse && broken?.message.contains("line") == true)
        try FileManager.default.removeItem(atPath: directory.path + "/exports/usage.xml")
        try FileManager.default.copyItem(atPath: Self.gas, toPath: directory.path + "/exports/gas.xml")
        try await vendor.poll()
        #expect(log.health.last?.state == .ok && log.health.last?.breaker == nil)
    }

    @Test func greenButtonConnectFetchesTheFeedWithItsBearerToken() async throws {
        let server = SimServer()
        let body = try Fixtures.data("green_button", "electricity_hourly.xml")
        _ = try await server.start { request in
            guard request.headers[.authorization] == "Bearer gbc-token" else {
                return SimResponse.json(#"{"error":"invalid_token"}"#, status: .unauthorized)
            }
            return SimResponse.text(String(decoding: body, as: UTF8.self), status: .ok, contentType: "application/atom+xml")
        }
        defer { Task { await server.stop() } }
        let network = NetworkOptions(url: await server.baseURL + "/espi/1_1/resource/Batch/Subscription/5", timeout: .seconds(5))
        let log = EventLog()
        try await vendor(.connect(network, token: VendorSecret("gbc-token")), log: log).poll()
        #expect(log.states[DeviceID(vendorInstance: "gb", vendorDeviceID: "1")]?["grid_export_energy"] == .number(6.49))
        let refused = await gatewayError { try await self.vendor(.connect(network, token: VendorSecret("stale")), log: EventLog()).poll() }
        #expect(refused?.code == .authFailed && refused?.message.contains("stale") == false)
    }

    /// The gas download with its first reading's start (or duration) set to `text`.
    static func gasWithFirstReading(start: String = "1793491200", duration: String = "86400") throws -> String {
        let original = try String(contentsOfFile: Self.gas, encoding: .utf8)
        let first = "<espi:timePeriod><espi:duration>86400</espi:duration><espi:start>1793491200</espi:start></espi:timePeriod>"
        #expect(original.contains(first))
        return original.replacingOccurrences(
            of: first, with: "<espi:timePeriod><espi:duration>\(duration)</espi:duration><espi:start>\(start)</espi:start></espi:timePeriod>"
        )
    }

    /// `<start>9223372036854775807</start>` trapped in start + duration (SIGILL), and as the file is read
    /// at every start the gateway crash-looped under systemd. Such a file is refused with a reason, like any other
    /// unusable download, and the vendor reads the folder again once it is replaced.
    @Test func anIntervalPastAnyDateRefusesTheFileNotACrash() async throws {
        let directory = try TemporaryDirectory()
        try Self.gasWithFirstReading(start: "9223372036854775807").write(toFile: directory.path + "/gas.xml", atomically: true, encoding: .utf8)
        let log = EventLog()
        let vendor = try vendor(.path(directory.path), log: log)
        let refused = await gatewayError { try await vendor.poll() }
        #expect(refused?.code == .malformedResponse && refused?.message.contains("interval reading's time") == true, "\(String(describing: refused))")
        #expect(log.health.last?.state == .down && log.inventories.isEmpty)
        try FileManager.default.removeItem(atPath: directory.path + "/gas.xml")
        try FileManager.default.copyItem(atPath: Self.gas, toPath: directory.path + "/gas.xml")
        try await vendor.poll()
        #expect(log.health.last?.state == .ok && log.states[DeviceID(vendorInstance: "gb", vendorDeviceID: "7")]?["gas_volume"] == .number(47.814))
    }

    /// The same for the other ends: a start or end past year 9999 (which the publisher cannot write as a date), a
    /// negative duration, and the multiplier 10^400 that made every reading infinite.
    @Test func timesAndMultipliersNoDateOrNumberCanHoldAreRefused() throws {
        let files = [
            try Self.gasWithFirstReading(start: "9223372036854775000", duration: "86400"),
            try Self.gasWithFirstReading(start: "-9223372036854775808", duration: "86400"),
            try Self.gasWithFirstReading(start: "253402300000", duration: "86400"),
            try Self.gasWithFirstReading(duration: "-86400"),
            try String(contentsOfFile: Self.gas, encoding: .utf8).replacingOccurrences(of: "Multiplier>-2<", with: "Multiplier>400<"),
        ]
        for file in files {
            #expect(throws: GreenButtonFeed.ParseError.self) { try GreenButtonFeed.parse(Data(file.utf8)) }
        }
        // A start of 2⁶³−1 fits Int64 and the file's own reader; 2⁶³ does not and the reading is skipped, as before.
        let skipped = try GreenButtonFeed.parse(Data(Self.gasWithFirstReading(start: "9223372036854775808").utf8))
        #expect(skipped.usagePoints.first?.series.first?.intervals.count == 6)
    }

    /// Feeds built in code reach the mapping too: an interval whose end overflows is left out, not a trap.
    @Test func theMappingLeavesOutIntervalsWhoseEndOverflows() {
        // m³ of water: × 1000 to litres, so 1.8e308 m³ overflows.
        let type = GreenButtonFeed.ReadingType(uom: 42, powerOfTenMultiplier: 0, flowDirection: 1, commodity: 4)
        let intervals = [
            GreenButtonFeed.Interval(start: .max, duration: 3600, value: 1),
            GreenButtonFeed.Interval(start: 1_793_491_200, duration: 3600, value: 1.7976931348623157e308),
            GreenButtonFeed.Interval(start: 1_793_491_200 + 3600, duration: 3600, value: 500),
        ]
        let point = GreenButtonFeed.UsagePoint(id: "1", name: nil, service: .water, series: [GreenButtonFeed.Series(readingType: type, intervals: intervals)])
        let series = GreenButtonMapping.series(point)["water_volume"] ?? []
        #expect(series.map(\.end) == [1_793_491_200 + 7200] && series.map(\.value) == [500_000])
    }

    @Test func theEntryTakesAPathOrAURLWithAToken() throws {
        var reader = ConfigReader()
        var file = VendorSettings(type: "green_button", id: "gb", options: .mapping([(key: "path", value: .scalar("exports", line: 1))]))
        file.baseDirectory = "/etc/lbs-gateway"
        guard case .path(let path)? = GreenButtonVendorFactory.parse(file, reader: &reader, environment: [:])?.source else {
            Issue.record("path not read")
            return
        }
        #expect(path == "/etc/lbs-gateway/exports" && reader.problems.isEmpty)
        let both = VendorSettings(type: "green_button", id: "gb", options: .mapping([
            (key: "path", value: .scalar("x.xml", line: 1)), (key: "url", value: .scalar("https://u.example.com/f", line: 2)),
        ]))
        _ = GreenButtonVendorFactory.parse(both, reader: &reader, environment: [:])
        #expect(reader.problems.map(\.path) == ["vendors[0].url"])
        var connect = ConfigReader()
        let url = VendorSettings(type: "green_button", id: "gb", options: .mapping([(key: "url", value: .scalar("https://u.example.com/f", line: 2))]))
        #expect(GreenButtonVendorFactory.parse(url, reader: &connect, environment: [:]) == nil)
        #expect(connect.problems.map(\.path) == ["vendors[0].token_file"])
        #expect(GreenButtonVendorFactory.parse(url, reader: &connect, environment: ["LBS_GB_TOKEN": "t"])?.pollInterval == .seconds(3600))
    }
}
