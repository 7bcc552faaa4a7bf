import GatewayCore
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif
import GatewayModel
import Logging
import MQTT
import ServiceLifecycle
import Synchronization
import Resilience

/// The active/standby pair (`high_availability:`), elected through the broker.
///
/// - The lease is the retained `<base>/bridge/lease`: `{"node","claim","since"}` of the active node. The active
///   holds it on a connection of its own (short keepalive) whose Last Will is an empty retained message, so
///   the broker clears the lease within 1.5 × `lease_keepalive` of the active's death.
/// - A node whose observer sees the lease free claims it, waits until its own claim comes back and then
///   `settle` longer: when two claim at once, the broker orders the claims and every node sees the same
///   last one, which wins. The loser disconnects cleanly (no will), leaving the winner's lease in place.
/// - Only the active runs the gateway. It takes over the previous active's MQTT 5 session (same client id,
///   no clean start): the QoS 1 commands queued during the takeover are delivered to it, and the session
///   takeover drops the old active's delayed `bridge/state` will, so Home Assistant never sees the pair offline.
/// - An active that loses its lease (its lease connection dropped, or another claim appeared) stops at once:
///   carrying on could run commands beside the new active. systemd starts it again, as a standby.
/// - The active re-publishes its lease (same claim, `renewed` time) every `lease_keepalive`; a standby that sees
///   no renewal of the held lease for 3 × `lease_keepalive` takes it as free, so a forged (or orphaned) retained
///   lease cannot hold it back for ever. With `nodes` set, lease messages of other nodes are ignored.
public final class LeaseElector: Sendable {
    public enum Failure: Error, CustomStringConvertible {
        case observerFailed(String)
        public var description: String {
            switch self {
            case .observerFailed(let reason): "the lease observer could not start: \(reason)"
            }
        }
    }

    private struct State {
        /// The claim id of the newest lease message (nil: the lease is free), and its node.
        package var claim: String?
        package var node: String?
        /// When the current claim was last published (first seen or renewed), by this node's clock.
        package var heardAt: ContinuousClock.Instant?
        /// The last ignored lease (node and claim), so a forged one is logged once, not at every renewal.
        package var ignored: String?
        /// When the lease topic was subscribed (the retained lease, if any, arrives right after).
        package var subscribedAt: ContinuousClock.Instant?
        package var observerConnected = false
    }

    package let settings: HighAvailabilitySettings
    package let topic: String
    private let logger: Logger
    private let base: MQTTConfiguration
    private let state = Mutex(State())
    private let observer: MQTTClient
    private let leaseClient = Mutex<MQTTClient?>(nil)
    private let ownClaim = Mutex<String?>(nil)
    private let renewal = Mutex<Task<Void, Never>?>(nil)
    /// The tasks following the observer's and the lease connection's messages and events, ended by `release`.
    private let followers = Mutex<[Task<Void, Never>]>([])
    /// Wakes the election whenever what it decides on changes (a lease message, a connection up or down).
    private let changes = ChangeSignal()
    private let notifier: SystemdNotifier
    /// Every wait goes through it (the settle time, the renewals, the timeouts).
    private let clock: any Clock<Duration>

    public init(config: GatewayConfig, settings: HighAvailabilitySettings, logger: Logger, notifier: SystemdNotifier = SystemdNotifier(),
                clock: any Clock<Duration> = ContinuousClock()) throws {
        self.settings = settings
        self.clock = clock
        self.logger = logger
        self.notifier = notifier
        topic = Topics(base: config.mqtt.baseTopic, discoveryPrefix: config.homeAssistant.discoveryPrefix, haStatus: config.homeAssistant.statusTopic).bridgeLease
        var base = try MQTTTransport.configuration(for: config)
        base.will = nil
        base.cleanStart = true
        base.sessionExpiry = nil
        self.base = base
        var observing = base
        observing.clientID = config.mqtt.clientID + "-observer-" + settings.nodeID
        if settings.perConnectionUsernames, let user = base.username { observing.username = user + "-observer-" + settings.nodeID }
        observer = try MQTTClient(configuration: observing)
    }

    /// Returns once this node holds the lease; a standby waits here (nothing else of the gateway runs). It wakes
    /// on every change of the lease or of the observer's connection, and otherwise only when a deadline is due
    /// (the retained lease's arrival, a held lease going stale, the watchdog's ping).
    public func waitUntilActive() async throws {
        startObserver()
        var reportedHolder: String?
        var lastPing = ContinuousClock.now
        notifier.notify(["READY=1", "STATUS=standby: looking for the active node"])
        while !Task.isCancelled {
            let seen = changes.version
            var wake = Duration.seconds(60)
            if let interval = notifier.watchdogInterval {
                if ContinuousClock.now - lastPing >= interval {
                    notifier.notify(["WATCHDOG=1"])
                    lastPing = .now
                }
                wake = min(wake, interval - (ContinuousClock.now - lastPing))
            }
            let snapshot = state.withLock { $0 }
            // The retained lease (if any) arrives right after the subscription: wait a moment before deciding.
            guard snapshot.observerConnected, let subscribed = snapshot.subscribedAt else {
                await changes.wait(after: seen, timeout: wake, clock: clock)
                continue
            }
            let sinceSubscribed = ContinuousClock.now - subscribed
            if sinceSubscribed < Self.retainedGrace {
                await changes.wait(after: seen, timeout: min(wake, Self.retainedGrace - sinceSubscribed), clock: clock)
                continue
            }
            if let holder = snapshot.node, holder != settings.nodeID {
                // Nobody renews it: a forged lease, or an active that died without its will reaching the broker.
                let silent = snapshot.heardAt.map { ContinuousClock.now - $0 } ?? .zero
                if snapshot.heardAt != nil, silent >= settings.staleAfter {
                    logger.warning("standby: the lease of node \(holder) was not renewed for \(settings.staleAfter); taking it as free")
                    if try await claim() {
                        logger.notice("active: this node (\(settings.nodeID)) holds the lease; starting the gateway")
                        return
                    }
                    reportedHolder = nil
                    continue
                }
                if reportedHolder != holder {
                    logger.notice("standby: node \(holder) holds the lease (\(topic)); this node (\(settings.nodeID)) waits and takes over when it goes")
                    notifier.notify(["STATUS=standby: \(holder) is active"])
                    reportedHolder = holder
                }
                let stale = snapshot.heardAt == nil ? wake : settings.staleAfter - silent
                await changes.wait(after: seen, timeout: min(wake, stale), clock: clock)
                continue
            }
            // Free, or a lease of this node's previous run (its lease connection is taken over by the claim).
            if try await claim() {
                logger.notice("active: this node (\(settings.nodeID)) holds the lease; starting the gateway")
                return
            }
            reportedHolder = nil
        }
        throw CancellationError()
    }

    /// How long after subscribing the retained lease is waited for before the lease counts as free.
    static let retainedGrace = Duration.milliseconds(300)

    /// Until the lease is lost (returns why) or `stop()` is called (returns nil). Wakes on every change of the
    /// lease and of both connections.
    package func watch() async -> String? {
        while !Task.isCancelled {
            let seen = changes.version
            guard let own = ownClaim.withLock({ $0 }) else { return nil }
            let snapshot = state.withLock { $0 }
            if leaseClient.withLock({ $0?.isConnected }) != true { return "the lease connection to the broker was lost" }
            if !snapshot.observerConnected { return "the lease observer's connection to the broker was lost" }
            if snapshot.claim != own {
                return snapshot.node.map { "node \($0) took the lease" } ?? "the lease was cleared (the broker lost this node's lease connection)"
            }
            await changes.wait(after: seen, timeout: .seconds(3600), clock: clock)
        }
        return nil
    }

    /// Closes the lease connection without its will (the lease now belongs to someone else).
    package func abandon() async {
        renewal.withLock { task in task?.cancel(); task = nil }
        endFollowers()
        let client = leaseClient.withLock { client in defer { client = nil }; return client }
        await client?.shutdown()
    }

    /// Gives the lease up on a clean stop (the standby takes over at once) and closes both connections.
    package func release() async {
        renewal.withLock { task in task?.cancel(); task = nil }
        let client = leaseClient.withLock { client in defer { client = nil } ; return client }
        let own = ownClaim.withLock { own in defer { own = nil }; return own }
        if let client {
            if own != nil, state.withLock({ $0.claim }) == own {
                _ = try? await client.publishAndWait(topic, [UInt8](), qos: .atLeastOnce, retain: true, timeout: .seconds(2))
            }
            await client.shutdown()
        }
        await observer.shutdown()
        endFollowers()
    }

    private func endFollowers() {
        let tasks = followers.withLock { tasks in defer { tasks = [] }; return tasks }
        for task in tasks { task.cancel() }
    }

    /// A task that lives as long as the elector (ended by `release`/`abandon`).
    private func follow(_ operation: @escaping @Sendable () async -> Void) {
        let task = Task { await operation() }
        followers.withLock { $0.append(task) }
    }

    // MARK: - Internals

    private func startObserver() {
        follow { [self] in
            for await message in observer.messages where message.topic == topic {
                note(message.payload)
                changes.signal()
            }
        }
        follow { [self] in
            for await event in observer.connectionEvents {
                switch event {
                case .connected:
                    state.withLock { $0.observerConnected = true; $0.subscribedAt = nil }
                    changes.signal()
                    do {
                        try await observer.subscribeAndWait([topic], qos: .atLeastOnce)
                        state.withLock { $0.subscribedAt = .now }
                    } catch {
                        logger.warning("lease observer: subscribing to \(topic) failed: \(error)")
                    }
                case .disconnected, .connectFailed:
                    state.withLock { $0.observerConnected = false; $0.subscribedAt = nil }
                }
                changes.signal()
            }
        }
        observer.start()
    }

    /// A lease message: empty is a free lease; one of a node outside `nodes`, or one that is not a lease, is
    /// ignored (whoever may write the topic must not be able to stop the active or hold the standby).
    private func note(_ payload: [UInt8]) {
        if payload.isEmpty {
            state.withLock { $0.claim = nil; $0.node = nil; $0.heardAt = nil }
            return
        }
        guard let lease = Self.parse(payload), settings.knows(lease.node) else {
            let text = String(decoding: payload.prefix(200), as: UTF8.self)
            let first = state.withLock { state in
                defer { state.ignored = text }
                return state.ignored != text
            }
            if first {
                logger.warning("lease: ignoring a lease message that is not from a node of the pair (\(settings.nodes.joined(separator: ", "))) on \(topic): \(text)")
            }
            return
        }
        state.withLock { $0.claim = lease.claim; $0.node = lease.node; $0.heardAt = .now }
    }

    private func leasePayload(claim: String, since: String) -> String {
        #"{"node":"\#(settings.nodeID)","claim":"\#(claim)","since":"\#(since)","renewed":"\#(ISOTime.format(Date()))"}"#
    }

    /// Re-publishes the held lease every `lease_keepalive`, so a standby can tell a live lease from an orphaned one.
    private func startRenewal(client: MQTTClient, claim: String, since: String) {
        let clock = self.clock
        let task = Task { [self] in
            while !Task.isCancelled {
                try? await clock.sleep(for: settings.renewInterval)
                guard !Task.isCancelled, ownClaim.withLock({ $0 }) == claim else { return }
                // Fire and forget: a lost lease connection is the watcher's to report.
                _ = client.publish(topic, Array(leasePayload(claim: claim, since: since).utf8), qos: .atLeastOnce, retain: true)
            }
        }
        renewal.withLock { $0 = task }
    }

    /// One claim: true when this node won it.
    private func claim() async throws -> Bool {
        var configuration = base
        configuration.clientID = base.clientID + "-lease-" + settings.nodeID
        if settings.perConnectionUsernames, let user = base.username { configuration.username = user + "-lease-" + settings.nodeID }
        configuration.keepAlive = .seconds(settings.leaseKeepAlive)
        configuration.will = MQTTWill(topic: topic, payload: [UInt8](), qos: .atLeastOnce, retain: true)
        configuration.offlineQueueLimit = 1
        let client = try MQTTClient(configuration: configuration)
        // Its events for as long as it lives: the first connect opens `connected`, a loss wakes `watch`.
        let connected = ReadyGate()
        let following = Task { [changes] in
            for await event in client.connectionEvents {
                if case .connected = event { connected.open() }
                changes.signal()
            }
        }
        client.start()
        await withTaskGroup(of: Void.self) { [clock] group in
            group.addTask { await connected.wait() }
            group.addTask { try? await clock.sleep(for: .seconds(10)) }
            await group.next()
            group.cancelAll()
        }
        guard client.isConnected else {
            following.cancel()
            await client.shutdown()
            return false
        }
        let claimID = UUID().uuidString.prefix(8).lowercased()
        let since = ISOTime.format(Date())
        let payload = leasePayload(claim: claimID, since: since)
        do {
            try await client.publishAndWait(topic, payload, qos: .atLeastOnce, retain: true, timeout: .seconds(5))
        } catch {
            following.cancel()
            await client.shutdown()
            return false
        }
        // Our claim comes back through the observer; any claim after it (within `settle`) beats it.
        let echoDeadline = ContinuousClock.now + .seconds(5)
        var echoed = false
        while ContinuousClock.now < echoDeadline {
            let seen = changes.version
            if state.withLock({ $0.claim }) == String(claimID) { echoed = true; break }
            await changes.wait(after: seen, timeout: echoDeadline - ContinuousClock.now, clock: clock)
            try Task.checkCancellation()
        }
        if echoed { try await clock.sleep(for: .seconds(settings.settle)) }
        let (latest, holder) = state.withLock { ($0.claim, $0.node) }
        guard echoed, latest == String(claimID), client.isConnected else {
            logger.notice("lease claim lost to \(holder ?? "nobody"); staying standby")
            following.cancel()
            await client.shutdown()  // a clean disconnect: no will, the winner's lease stays
            return false
        }
        followers.withLock { $0.append(following) }
        leaseClient.withLock { $0 = client }
        ownClaim.withLock { $0 = String(claimID) }
        startRenewal(client: client, claim: claimID, since: since)
        return true
    }

    private static func parse(_ payload: [UInt8]) -> (claim: String, node: String)? {
        guard !payload.isEmpty, case .success(.object(let fields)) = StrictJSON.parse(payload),
              case .string(let node)? = fields["node"], case .string(let claim)? = fields["claim"] else { return nil }
        return (claim, node)
    }
}

/// Runs beside the gateway on the active node: stops the process the moment the lease is lost, and gives the
/// lease up on a clean stop. First in the service group, so it stops last (after the gateway said offline).
public struct LeaseService: NamedService {
    package let elector: LeaseElector
    package let logger: Logger

    public init(elector: LeaseElector, logger: Logger) {
        self.elector = elector
        self.logger = logger
    }

    public func run() async throws {
        let lost = await cancelWhenGracefulShutdown { await elector.watch() }
        if let lost {
            // No graceful stop: it would publish `offline` over the new active's `online` and run the outbox.
            logger.critical("lease lost: \(lost); stopping so the other node is the only active one (systemd starts this one again as standby)")
            // A clean DISCONNECT of the lease connection first: its will would clear the new holder's lease.
            await elector.abandon()
            exit(75)
        }
        await elector.release()
    }
}
