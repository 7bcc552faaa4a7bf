#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel

/// A Green Button (NAESB REQ.21 ESPI) download or Green Button Connect feed, reduced to what the gateway
/// publishes: usage points, each with series of interval readings of one reading type.
struct GreenButtonFeed: Sendable {
    enum Service: String, Sendable {
        case electricity, gas, water, other
    }

    struct Interval: Sendable, Hashable {
        /// Unix seconds, from the file.
        var start: Int64
        var duration: Int64
        /// As written in the file (the reading type gives the unit and the power of ten).
        var value: Double
    }

    struct ReadingType: Sendable, Hashable {
        /// ESPI UnitSymbolKind: 72 Wh, 169 therm, 119 ft³, 42 m³, 128 US gallon.
        var uom: Int?
        var powerOfTenMultiplier: Int = 0
        /// 1 forward (delivered to the customer), 19 reverse (received from the customer).
        var flowDirection: Int?
        /// 1 electricity, 7 natural gas, 4 potable water (ESPI CommodityKind).
        var commodity: Int?
    }

    struct Series: Sendable {
        var readingType: ReadingType
        var intervals: [Interval]
    }

    struct UsagePoint: Sendable {
        var id: String
        var name: String?
        var service: Service
        var series: [Series]
    }

    var usagePoints: [UsagePoint]

    struct ParseError: Error, Sendable, CustomStringConvertible {
        var description: String
    }

    /// Parses an Atom feed; throws with the line of the first XML error, or when no usage data is in it.
    static func parse(_ data: Data) throws(ParseError) -> GreenButtonFeed {
        // Green Button files are UTF-8; other bytes are refused before the reader sees them.
        guard String(validating: data, as: UTF8.self) != nil else {
            throw ParseError(description: "not a Green Button XML file (it is not UTF-8 text)")
        }
        var collector = EntryCollector()
        do {
            try XMLReader.read(Array(data)) { event in
                switch event {
                case .start(let name, let attributes): collector.start(name, attributes: attributes)
                case .text(let text): collector.text += text
                case .end(let name): collector.end(name)
                }
            }
        } catch {
            throw ParseError(description: "not a Green Button XML file (line \(error.line): \(error.reason))")
        }
        if let problem = collector.problem { throw ParseError(description: problem) }
        let feed = resolve(collector.entries)
        guard !feed.usagePoints.isEmpty else {
            throw ParseError(description: "the file has no usage points with interval readings (is it a Green Button download?)")
        }
        return feed
    }

    /// Ties entries together through their links: `…/UsagePoint/<u>/MeterReading/<m>/IntervalBlock/…` and the
    /// MeterReading's related `…/ReadingType/<r>`.
    private static func resolve(_ entries: [Entry]) -> GreenButtonFeed {
        var names: [String: String] = [:]
        var services: [String: Service] = [:]
        var readingTypes: [String: ReadingType] = [:]
        var meterReadingTypes: [String: String] = [:]
        var blocks: [(meterReading: String, usagePoint: String, intervals: [Interval])] = []
        for entry in entries {
            let selfPath = entry.links.first { $0.rel == "self" }?.href ?? entry.links.first?.href ?? ""
            let ids = pathIDs(selfPath)
            switch entry.kind {
            case "UsagePoint":
                guard let usagePoint = ids["UsagePoint"] else { continue }
                names[usagePoint] = entry.title
                services[usagePoint] = switch entry.serviceKind {
                case 0: .electricity
                case 1: .gas
                case 2: .water
                default: .other
                }
            case "ReadingType":
                if let id = ids["ReadingType"] { readingTypes[id] = entry.readingType }
            case "MeterReading":
                guard let usagePoint = ids["UsagePoint"], let meterReading = ids["MeterReading"] else { continue }
                let related = entry.links.compactMap { pathIDs($0.href)["ReadingType"] }.first
                if let related { meterReadingTypes["\(usagePoint)/\(meterReading)"] = related }
            case "IntervalBlock":
                let path = ids["MeterReading"] != nil ? ids : entry.links.map { pathIDs($0.href) }.first { $0["MeterReading"] != nil } ?? ids
                guard let usagePoint = path["UsagePoint"], let meterReading = path["MeterReading"] else { continue }
                blocks.append(("\(usagePoint)/\(meterReading)", usagePoint, entry.intervals))
            default:
                continue
            }
        }
        var points: [String: UsagePoint] = [:]
        var order: [String] = []
        for block in blocks {
            guard let typeID = meterReadingTypes[block.meterReading], let type = readingTypes[typeID] else { continue }
            if points[block.usagePoint] == nil {
                order.append(block.usagePoint)
                let service = services[block.usagePoint] ?? (type.commodity == 7 ? .gas : type.commodity == 4 ? .water : .electricity)
                points[block.usagePoint] = UsagePoint(id: block.usagePoint, name: names[block.usagePoint], service: service, series: [])
            }
            if let index = points[block.usagePoint]?.series.firstIndex(where: { $0.readingType == type }) {
                points[block.usagePoint]?.series[index].intervals += block.intervals
            } else {
                points[block.usagePoint]?.series.append(Series(readingType: type, intervals: block.intervals))
            }
        }
        return GreenButtonFeed(usagePoints: order.compactMap { points[$0] })
    }

    /// `{"UsagePoint": "1", "MeterReading": "2", …}` from an ESPI resource URL.
    static func pathIDs(_ href: String) -> [String: String] {
        let parts = href.split(separator: "/").map(String.init)
        var ids: [String: String] = [:]
        for (index, part) in parts.enumerated() where index + 1 < parts.count {
            if ["UsagePoint", "MeterReading", "ReadingType", "IntervalBlock"].contains(part) { ids[part] = parts[index + 1] }
        }
        return ids
    }
}

/// One Atom entry as far as the gateway reads it.
struct Entry {
    var links: [(rel: String, href: String)] = []
    var title: String?
    /// The element inside `<content>`: UsagePoint, MeterReading, ReadingType, IntervalBlock …
    var kind: String?
    var serviceKind: Int?
    var readingType = GreenButtonFeed.ReadingType()
    var intervals: [GreenButtonFeed.Interval] = []
}

/// One pass over the feed's events (local names, so `espi:value` and `value` read the same).
struct EntryCollector {
    var entries: [Entry] = []
    var text = ""
    /// The first value the gateway cannot use (a time past any date, a power of ten no meter uses): the file is
    /// refused with it rather than read in part.
    var problem: String?
    private var current: Entry?
    private var path: [String] = []
    private var pendingInterval: (start: Int64?, duration: Int64?, value: Double?)?

    mutating func start(_ name: String, attributes: [String: String]) {
        path.append(name)
        text = ""
        switch name {
        case "entry":
            current = Entry()
        case "link" where current != nil:
            current?.links.append((rel: attributes["rel"] ?? "", href: attributes["href"] ?? ""))
        case "IntervalReading":
            pendingInterval = (nil, nil, nil)
        default:
            if path.count >= 2, path[path.count - 2] == "content", current != nil { current?.kind = name }
        }
    }

    static let powersOfTen = -30...30

    static func representable(_ seconds: Int64) -> Bool { ISOTime.representable.contains(Double(seconds)) }

    private mutating func refuse(_ reason: String) {
        if problem == nil { problem = "not a usable Green Button file: \(reason)" }
    }

    mutating func end(_ name: String) {
        defer { _ = path.popLast() }
        let value = text.trimmingWhitespace()
        text = ""
        guard current != nil else { return }
        let parent = path.count >= 2 ? path[path.count - 2] : ""
        switch (name, current?.kind) {
        case ("entry", _):
            if let entry = current { entries.append(entry) }
            current = nil
        case ("title", _) where parent == "entry":
            current?.title = value.isEmpty ? nil : value
        case ("kind", "UsagePoint") where parent == "ServiceCategory":
            current?.serviceKind = Int(value)
        case ("uom", "ReadingType"):
            current?.readingType.uom = Int(value)
        case ("powerOfTenMultiplier", "ReadingType"):
            // ESPI uses -12…12; 10^400 would make every reading infinite.
            guard let power = Int(value.isEmpty ? "0" : value), Self.powersOfTen.contains(power) else {
                refuse("powerOfTenMultiplier '\(GatewayError.clip(value))' is not a whole number from -30 to 30")
                return
            }
            current?.readingType.powerOfTenMultiplier = power
        case ("flowDirection", "ReadingType"):
            current?.readingType.flowDirection = Int(value)
        case ("commodity", "ReadingType"):
            current?.readingType.commodity = Int(value)
        case ("start", "IntervalBlock") where parent == "timePeriod":
            pendingInterval?.start = Int64(value)
        case ("duration", "IntervalBlock") where parent == "timePeriod":
            pendingInterval?.duration = Int64(value)
        case ("value", "IntervalBlock") where parent == "IntervalReading":
            pendingInterval?.value = Double(value)
        case ("IntervalReading", "IntervalBlock"):
            if let reading = pendingInterval, let start = reading.start, let duration = reading.duration, let number = reading.value, number.isFinite {
                // start + duration is computed for every interval (and published as a date): it must not overflow.
                let end = start.addingReportingOverflow(duration)
                if duration < 0 || end.overflow || !Self.representable(start) || !Self.representable(end.partialValue) {
                    refuse("an interval reading's time (start \(start), duration \(duration)) is not a date from year 0 to 9999")
                } else {
                    current?.intervals.append(GreenButtonFeed.Interval(start: start, duration: duration, value: number))
                }
            }
            pendingInterval = nil
        default:
            break
        }
    }
}
