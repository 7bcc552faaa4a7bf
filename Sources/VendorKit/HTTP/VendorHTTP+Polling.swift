import CurlHTTP
import GatewayModel
import Resilience
import Synchronization

extension VendorHTTP {
    /// The layer of a vendor built from its context: its own libcurl client, the context's clocks, TLS pin
    /// store and logger.
    public convenience init(vendorID: String, settings: Settings, sink: VendorEventSink, context: VendorContext) throws(GatewayError) {
        self.init(
            vendorID: vendorID, client: try VendorHTTP.newClient(), settings: settings, sink: sink, time: TimeSource(context.clock),
            now: context.now, pinStore: context.pinStore, logger: context.logger
        )
    }

    /// A polling vendor's `run()`: its health first, then `poll` every `interval()` until cancelled. A failed
    /// poll is already in the vendor's health (this layer reported it); the next one comes on time.
    public func runPolling(every interval: @Sendable () -> Duration, _ poll: @Sendable () async throws -> Void) async throws {
        publishHealth()
        while !Task.isCancelled {
            try? await poll()
            try await time.sleep(for: interval())
        }
    }
}

/// The device list a polling vendor announced last: `.inventory` goes out only when the list changed.
public final class InventoryTracker: Sendable {
    private let last = Mutex<[Device]?>(nil)

    public init() {}

    /// True once an inventory went out.
    public var hasAnnounced: Bool { last.withLock { $0 != nil } }

    /// Sends `devices` as the vendor's inventory unless they are exactly what was sent last.
    public func announce(_ devices: [Device], vendorID: String, sink: VendorEventSink) {
        let changed = last.withLock { last -> Bool in
            guard last != devices else { return false }
            last = devices
            return true
        }
        if changed { sink.send(.inventory(vendorID: vendorID, devices: devices)) }
    }
}
