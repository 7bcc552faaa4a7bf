import CommandParsing
import Cache
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import Logging
import Resilience

/// Commands, from MQTT to the vendor: `/set` and `batch` are parsed against the device's capabilities,
/// admitted into one bounded lane per device (`+Lanes`), stored in the outbox with a cache, sent through
/// the vendor's breaker with at-most-once rules for unknown outcomes (`+Outbox`), grouped into one vendor
/// call for batches (`+Batch`); `/get` and `device/refresh` are coalesced refreshes (`+Refresh`).
@GatewayActor
package final class Commands: GatewayExtension {
    package let hub: GatewayHub
    /// The cache the outbox lives in; nil without `storage:` (commands then live in memory only).
    package let persistence: CacheLink?

    /// One bounded command lane per device (see `+Lanes`).
    package var lanes: [DeviceID: CommandLane] = [:]
    package var commandSequence: UInt64 = 0
    /// Admitted commands waiting for the outbox writer, in arrival order.
    package var storeQueue: [CommandJob] = []
    package var storing = false
    /// `/get` and `device/refresh` requests, coalesced per device (see `refresh`).
    package var refreshes: [String: RefreshState] = [:]
    /// Batch items of one vendor gathering at the front of their device lanes (see `joinBatch`).
    package var batchGroups: [String: BatchGroup] = [:]
    /// Commands waiting for their vendor to get better, by vendor (see `waitForVendor`).
    private var recoveryWaiters: [String: [UUID: CheckedContinuation<Void, Never>]] = [:]
    /// Vendor calls under way (see `sending`).
    private var inFlight = 0
    /// Opened when the last vendor call in flight returns, while `drain` waits.
    private var idle: ReadyGate?
    /// The outbox's one writer (nil without a cache).
    package private(set) var outbox: OutboxWriter?
    /// `/set` and `/get` for devices whose vendor has not listed its devices yet (see `+EarlyCommands`).
    package var awaitingInventory: [EarlyCommand] = []
    /// Commands carried out, and refused before they were queued (`queue_full`, `storage_unavailable`).
    package var executedCount = 0
    package var refusedCount = 0
    /// Vendors whose first inventory was awaited past its grace: their unknown devices fail at once.
    package var inventoryWaitOver: Set<String> = []

    package struct CommandJob: Sendable {
        package var command: DeviceCommand
        package var reply: Reply
        /// Already in the outbox (resumed after a restart).
        package var persisted = false
        /// Told the final outcome (nil = done), for batch requests.
        package var completion: (@Sendable (GatewayError?) -> Void)?
        /// The batch group this command goes out with in one vendor call, if any.
        package var batchGroup: String?
        /// Admission order (see `isSuperseded`).
        package var sequence: UInt64 = 0
        /// The batch request this command came in (items of one request never supersede each other:
        /// the requester ordered them on purpose).
        package var requestTag: String?
        /// Stored in the outbox (or no cache): its lane may run it.
        package var ready = false
        /// Stored as `sending` (it was at the front of its lane): its first attempt needs no second commit.
        package var storedSending = false
        /// Set when the command is sent while its outbox row is being committed (see `+Overlap`): the commit's
        /// outcome, which the command waits for before anything about it is reported or marked.
        package var overlappedCommit: OutboxCommit?
    }

    package init(hub: GatewayHub, persistence: CacheLink?) {
        self.hub = hub
        self.persistence = persistence
        outbox = persistence.map { persistence in
            OutboxWriter(persistence: persistence, clock: hub.clock, spawn: { hub.tasks.spawn($0) }, report: { [weak self] failure, count in
                self?.outboxWritten(failure, changes: count)
            })
        }
    }

    /// Storage health follows every outbox transaction.
    private func outboxWritten(_ failure: (any Error)?, changes: Int) {
        guard let failure else { return storageSucceeded() }
        _ = storageFailed(failure, doing: "update the outbox (\(changes) change(s))")
        rateLimitedLog("outbox-write", .error, "outbox write failed: \(failure)")
    }

    package func shutdown() async {
        await outbox?.flush()
    }

    package var subscriptions: [String] {
        let base = hub.topics.base
        return ["\(base)/device/+/set", "\(base)/device/+/set/+", "\(base)/device/+/get"]
    }

    package var requestNames: [String] { ["device/refresh", "batch"] }

    package func receive(_ route: Topics.Inbound, _ message: InboundMessage) -> Bool {
        switch route {
        case .set(let rawID, let key): handleSet(message, rawID: rawID, key: key)
        case .get(let rawID): handleGet(message, rawID: rawID)
        default: return false
        }
        return true
    }

    package func request(_ name: String, body: [String: JSONValue], reply: Reply, context: JSON) {
        switch name {
        case "device/refresh":
            guard case .string(let raw)? = body["id"] ?? body["device"] else {
                return fail(.invalidPayload("device/refresh needs {\"id\":\"<device_id>\"}"), device: nil, context: context, reply: reply)
            }
            guard let id = DeviceID(validating: raw), hub.devices[id] != nil else {
                return fail(.unknownDevice(raw), device: nil, context: context, reply: reply)
            }
            refresh(id, reply: reply)
        default:
            batch(body, reply: reply, context: context)
        }
    }

    package func handle(_ event: HubEvent) {
        // Commands waiting for a vendor go as soon as it is better, not at their next backoff tick.
        if case .vendorHealthChanged(let health, let previous) = event, let previous, health.state.rank < previous.state.rank {
            vendorRecovered(health.vendorID)
        }
        if case .inventoryApplied(let vendorID, _) = event { releaseEarlyCommands(of: vendorID) }
    }

    package func report(into report: inout BridgeReport) {
        let depths = queueDepths
        let deepest = depths.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }.prefix(10)
        report.queues["commands_waiting"] = .number(Double(depths.values.reduce(0, +)))
        report.queues["devices_with_commands"] = .number(Double(depths.count))
        report.queues["max_per_device"] = .number(Double(hub.config.commands.maxQueuedPerDevice))
        report.queues["deepest"] = .object(Dictionary(uniqueKeysWithValues: deepest.map { ($0.key.rawValue, JSON.number(Double($0.value))) }))
        report.queues["refreshes_waiting"] = .number(Double(refreshes.values.reduce(0) { $0 + $1.waiters.count }))
        report.counters["commands_executed"] = executedCount
        report.counters["commands_refused"] = refusedCount
    }

    /// Runs a vendor call, counted, so shutdown can let it finish (see `drain`).
    package func sending<T>(_ call: () async throws -> T) async rethrows -> T {
        inFlight += 1
        defer {
            inFlight -= 1
            if inFlight == 0, let idle { idle.open() }
        }
        return try await call()
    }

    /// At shutdown, vendor calls in flight get a moment to finish (their outcome is then known and recorded);
    /// commands still waiting are cancelled and run after the restart from their outbox rows.
    package func drain(within limit: Duration) async {
        guard inFlight > 0 else { return }
        let gate = ReadyGate()
        idle = gate
        defer { idle = nil }
        let clock = hub.clock
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await gate.wait() }
            group.addTask { try? await clock.sleep(for: limit) }
            await group.next()
            group.cancelAll()
        }
    }

    /// Wakes the commands waiting for this vendor (see `waitForVendor`).
    package func vendorRecovered(_ vendorID: String) {
        guard let waiting = recoveryWaiters.removeValue(forKey: vendorID), !waiting.isEmpty else { return }
        hub.logger.info("vendor \(vendorID) recovered; \(waiting.count) waiting command(s) go now")
        for continuation in waiting.values { continuation.resume() }
    }

    /// Waits until the vendor's health improves, at most `limit` (the retry backoff or the command's deadline).
    package func waitForVendor(_ vendorID: String, atMost limit: Duration) async {
        let key = UUID.random()
        let clock = hub.clock
        // The timer is a tracked task: shutdown cancels it, which ends this wait too.
        await withCheckedContinuation { continuation in
            recoveryWaiters[vendorID, default: [:]][key] = continuation
            hub.tasks.spawn { [self] in
                try? await clock.sleep(for: limit)
                resumeWaiter(vendorID, key)
            }
        }
    }

    private func resumeWaiter(_ vendorID: String, _ key: UUID) {
        recoveryWaiters[vendorID]?.removeValue(forKey: key)?.resume()
    }

    // MARK: - Reporting, as the core does it

    package func fail(_ error: GatewayError, device: DeviceID?, context: JSON, reply: Reply) {
        hub.fail(error, device: device, context: context, reply: reply)
    }

    package func respond(_ reply: Reply, status: String, data: JSON, error: GatewayError?) {
        hub.respond(reply, status: status, data: data, error: error)
    }

    package func commandContext(_ command: DeviceCommand) -> JSON { GatewayHub.commandContext(command) }

    package func rateLimitedLog(_ key: String, _ level: Logger.Level, _ message: @autoclosure () -> String, every interval: TimeInterval = 10) {
        hub.rateLimitedLog(key, level, message(), every: interval)
    }

    // MARK: - Storage health of the outbox

    /// An outbox failure: storage is reported unhealthy, and the error says what to do.
    package func storageFailed(_ error: any Error, doing what: String) -> GatewayError {
        persistence?.health.recordFailure("cannot \(what): \(error)")
        hub.emit(.storageHealthChanged)
        return storageError(error)
    }

    /// What a sender hears when its command could not be stored.
    package func storageError(_ error: any Error) -> GatewayError {
        GatewayError(
            .storageUnavailable,
            message: "The command was not stored: the cache at \(hub.config.storage?.path ?? "?") cannot be written (\(GatewayError.clip("\(error)"))).",
            suggestion: GatewayError.Code.storageUnavailable.defaultSuggestion
        )
    }

    package func storageSucceeded() {
        guard let persistence, !persistence.health.snapshot.ok else { return }
        persistence.health.recordSuccess()
        hub.emit(.storageHealthChanged)
    }

    // MARK: - /set

    /// `receivedAt`: the arrival of a command that waited for its vendor's inventory (its TTL runs from then).
    package func handleSet(_ message: InboundMessage, rawID: String, key: String?, receivedAt: Date? = nil) {
        let reply = Reply(responseTopic: message.responseTopic, correlationData: message.correlationData)
        let context: JSON = ["topic": .string(message.topic)]
        if let refusal = hub.refusal(of: message) {
            // A retained /set names its device in the event; an oversized payload is not looked into.
            let device = message.retain ? DeviceID(validating: rawID) : nil
            return fail(refusal, device: device, context: context, reply: reply)
        }
        guard let id = DeviceID(validating: rawID), let device = hub.devices[id] else {
            if holdUntilInventory(message, route: .set(device: rawID, key: key)) { return }
            return fail(.unknownDevice(rawID), device: nil, context: context, reply: reply)
        }
        switch CommandParser.parse(payload: message.payload, key: key, device: device, current: hub.states[id] ?? DeviceState()) {
        case .failure(let error):
            fail(error, device: id, context: context, reply: reply)
        case .success(let changes):
            enqueue(CommandJob(command: hub.makeCommand(for: device, changes: changes, receivedAt: receivedAt), reply: reply))
        }
    }

    /// A `/set` from another front end than MQTT (the HomeKit bridge): the same parser, lanes, outbox and vendor
    /// rules (at most once, lock deadlines); `finished` is told nil once the command was carried out, or its error.
    package func submit(device id: DeviceID, set: [String: JSONValue], origin: String, finished: @escaping @Sendable (GatewayError?) -> Void) {
        let context: JSON = ["origin": .string(origin)]
        guard let device = hub.devices[id] else {
            fail(.unknownDevice(id.rawValue), device: nil, context: context, reply: Reply())
            return finished(.unknownDevice(id.rawValue))
        }
        let payload = Array(JSONValue.object(set).render().utf8)
        switch CommandParser.parse(payload: payload, key: nil, device: device, current: hub.states[id] ?? DeviceState()) {
        case .failure(let error):
            fail(error, device: id, context: context, reply: Reply())
            finished(error)
        case .success(let changes):
            var job = CommandJob(command: hub.makeCommand(for: device, changes: changes), reply: Reply())
            job.completion = finished
            enqueue(job)
        }
    }

    // MARK: - /get

    package func handleGet(_ message: InboundMessage, rawID: String) {
        let reply = Reply(responseTopic: message.responseTopic, correlationData: message.correlationData)
        guard let id = DeviceID(validating: rawID), hub.devices[id] != nil else {
            if holdUntilInventory(message, route: .get(device: rawID)) { return }
            return fail(.unknownDevice(rawID), device: nil, context: ["topic": .string(message.topic)], reply: reply)
        }
        refresh(id, reply: reply)
    }
}
