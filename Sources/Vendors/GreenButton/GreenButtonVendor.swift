import CurlHTTP
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import Logging
import Resilience
import Synchronization
import VendorKit

/// Green Button data: one device per usage point with kWh (electricity) or m³ (gas) counters, and every
/// interval reading written to the history at its own time from the file.
///
/// The counters are the sum of every distinct interval the gateway has been given (the same interval in two
/// downloads counts once), so they only grow as new downloads arrive; removing old files lowers them,
/// which Home Assistant takes as a meter reset.
public final class GreenButtonVendor: Vendor {
    public let instanceID: String
    public let typeName = "green_button"
    private let options: GreenButtonOptions
    private let sink: VendorEventSink
    private let time: TimeSource
    private let now: @Sendable () -> Date
    private let http: VendorHTTP?
    private let known = Mutex(Known())

    private struct Known {
        var devices: [Device]?
        /// Per device and key: the end of the newest interval already written to the history.
        var historyUntil: [String: Int64] = [:]
        var health: VendorHealth?
    }

    /// Files larger than this are refused (a year of 15-minute data is about 5 MB).
    static let maxFileBytes = 64 << 20

    public init(instanceID: String, options: GreenButtonOptions, sink: VendorEventSink, context: VendorContext) throws(GatewayError) {
        self.instanceID = instanceID
        self.options = options
        self.sink = sink
        self.time = TimeSource(context.clock)
        self.now = context.now
        if case .connect(let network, let token) = options.source {
            let client = try VendorHTTP.newClient()
            let http = VendorHTTP(
                vendorID: instanceID, client: client, settings: VendorHTTP.Settings(network), sink: sink, time: time, now: context.now,
                pinStore: context.pinStore, logger: context.logger
            )
            http.redactor.set("token", token)
            self.http = http
        } else {
            http = nil
        }
    }

    public var refreshesAllDevices: Bool { true }

    public func run() async throws {
        while !Task.isCancelled {
            // Failures are reported through the vendor's health; the next poll tries again.
            try? await poll()
            try await time.sleep(for: options.pollInterval)
        }
    }

    public func refresh(_ device: DeviceID) async throws {
        try await poll()
    }

    public func execute(_ command: DeviceCommand) async throws -> CommandOutcome {
        throw GatewayError(.vendorRejected, message: "Green Button data is read-only: \(command.device) has nothing to set.")
    }

    /// Reads every source, publishes new devices, new history and the totals.
    public func poll() async throws(GatewayError) {
        let feeds: [GreenButtonFeed]
        do {
            feeds = try await load()
            report(nil)
        } catch {
            report(error)
            throw error
        }
        var points: [String: GreenButtonFeed.UsagePoint] = [:]
        for point in feeds.flatMap(\.usagePoints) {
            if var existing = points[point.id] {
                existing.series += point.series
                existing.name = existing.name ?? point.name
                points[point.id] = existing
            } else {
                points[point.id] = point
            }
        }
        var devices: [Device] = []
        var updates: [(DeviceID, [String: [(end: Int64, value: Double)]])] = []
        for point in points.values.sorted(by: { $0.id < $1.id }) {
            let series = GreenButtonMapping.series(point)
            guard !series.isEmpty else { continue }
            let device = GreenButtonMapping.device(vendorID: instanceID, point: point, keys: Array(series.keys))
            devices.append(device)
            updates.append((device.id, series))
        }
        let inventoryChanged = known.withLock { known -> Bool in
            guard known.devices != devices else { return false }
            known.devices = devices
            return true
        }
        if inventoryChanged { sink.send(.inventory(vendorID: instanceID, devices: devices)) }
        for (id, series) in updates {
            var totals: [String: StateValue] = [:]
            var history: [TimedReading] = []
            var newest: Int64 = 0
            for (key, intervals) in series {
                let already = known.withLock { $0.historyUntil["\(id.rawValue)/\(key)"] } ?? Int64.min
                var total = 0.0
                for interval in intervals {
                    // Each value is finite, their sum need not be: an interval that would make the counter infinite is left out.
                    guard (total + interval.value).isFinite else { continue }
                    total += interval.value
                    if interval.end > already { history.append(TimedReading(key: key, value: Self.rounded(total), at: Date(timeIntervalSince1970: Double(interval.end)))) }
                }
                totals[key] = .number(Self.rounded(total))
                if let last = intervals.last?.end {
                    newest = max(newest, last)
                    known.withLock { $0.historyUntil["\(id.rawValue)/\(key)"] = last }
                }
            }
            if !history.isEmpty { sink.send(.history(id, history)) }
            sink.send(.state(id, totals, observedAt: Date(timeIntervalSince1970: Double(newest))))
        }
    }

    static func rounded(_ value: Double) -> Double { value.rounded(places: 3) }

    // MARK: Sources

    private func load() async throws(GatewayError) -> [GreenButtonFeed] {
        switch options.source {
        case .path(let path):
            return try Self.files(at: path).map { file throws(GatewayError) in try Self.read(file) }
        case .connect(let network, let token):
            guard let http else { throw GatewayError.internal("no HTTP client") }
            var request = HTTPClientRequest(url: network.url, timeout: network.timeout, maxResponseBytes: Self.maxFileBytes)
            request.headers.set(name: "Authorization", value: "Bearer \(token.reveal())")
            request.headers.set(name: "Accept", value: "application/atom+xml")
            let response = try await http.send(request, use: .poll, expectsJSON: false)
            do {
                return [try GreenButtonFeed.parse(response.body)]
            } catch {
                throw http.classifier.unexpectedShape(error.description, context: "Green Button feed")
            }
        }
    }

    /// The file itself, or every `*.xml` in the folder (sorted, so the result does not depend on the order).
    static func files(at path: String) throws(GatewayError) -> [String] {
        var isDirectory = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw GatewayError(.notFound, message: "The Green Button file or folder '\(path)' does not exist.",
                               suggestion: "Save the utility's Green Button download there, or correct path.")
        }
        guard isDirectory else { return [path] }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        let files = names.filter { $0.lowercased().hasSuffix(".xml") }.sorted().map { path + "/" + $0 }
        guard !files.isEmpty else {
            throw GatewayError(.notFound, message: "The folder '\(path)' has no Green Button .xml file yet.",
                               suggestion: "Download your usage (\"Green Button: Download My Data\") from the utility's website into it.")
        }
        return files
    }

    static func read(_ file: String) throws(GatewayError) -> GreenButtonFeed {
        let size = (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? 0
        guard size <= maxFileBytes else {
            throw GatewayError(.malformedResponse, message: "'\(file)' is \(size >> 20) MB, more than a Green Button download can be.")
        }
        guard let data = FileManager.default.contents(atPath: file) else {
            throw GatewayError(.notFound, message: "Cannot read '\(file)'.", suggestion: "Check that the gateway's user may read it.")
        }
        do {
            return try GreenButtonFeed.parse(data)
        } catch {
            throw GatewayError(.malformedResponse, message: "'\(file)': \(error.description).",
                               suggestion: "Use the utility's \"Download My Data\" XML (not CSV), unchanged.")
        }
    }

    /// File sources have no HTTP layer: their health is ok after a read and down while the files cannot be read.
    private func report(_ error: GatewayError?) {
        guard http == nil else { return }
        let date = now()
        let update: VendorHealth? = known.withLock { known in
            let previous = known.health
            let health = error.map { VendorHealth(vendorID: instanceID, state: .down, breaker: nil, lastSuccess: previous?.lastSuccess, lastError: $0) }
                ?? VendorHealth(vendorID: instanceID, state: .ok, breaker: nil, lastSuccess: date)
            if let previous, previous.state == health.state, previous.lastError == health.lastError, previous.lastSuccess != nil || health.lastSuccess == nil {
                return nil
            }
            known.health = health
            return health
        }
        if let update { sink.send(.health(update)) }
    }
}
