import CMosquitto
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `mosquitto_lib_init` runs once per process: Swift initializes globals exactly once, thread-safely.
private let libraryInitResult: Int32 = mosquitto_lib_init()

/// A thin MQTT client over libmosquitto with its own network thread and reconnect loop.
///
/// - `start()` connects in the background and reconnects forever with jittered back-off.
/// - Every (re)connect yields `.connected` on `connectionEvents`. Subscriptions are NOT kept across
///   reconnects (clean session): subscribe again, and re-publish retained state, on each `.connected`.
/// - Nothing is handed to libmosquitto between a connect attempt and its CONNACK, so no packet can reach the
///   socket before CONNECT. Publishes made while not connected wait in the client's own bounded queue
///   (`MQTTConfiguration.offlineQueueLimit`; retained coalesced per topic, non-retained QoS 0 dropped) and go
///   out in order right after CONNACK, before `.connected` is yielded.
/// - `messages` is bounded (`inboundBufferSize`); messages arriving while it is full are dropped and
///   counted in `droppedInboundMessages`. Each stream supports one consumer. With `priorityFilters` set, only
///   messages matching them go to `messages`; the rest go to `bulkMessages`, bounded on their own, so a flood
///   of those (a client subscribed to what it publishes itself) never drops a command.
/// - `shutdown()` disconnects cleanly (so the broker does not publish the will), stops the thread,
///   destroys the libmosquitto handle and finishes both streams. Dropping the client without
///   `shutdown()` does the same in the background.
public final class MQTTClient: Sendable {
    /// The configuration this client was built with.
    public let configuration: MQTTConfiguration
    /// Inbound messages for subscribed filters (bounded; single consumer).
    public let messages: AsyncStream<MQTTMessage>
    /// Inbound messages outside `MQTTConfiguration.priorityFilters` (bounded; single consumer); finishes at once
    /// when no priority filters are set (everything then goes to `messages`).
    public let bulkMessages: AsyncStream<MQTTMessage>
    /// Connection state changes, in order (single consumer).
    public let connectionEvents: AsyncStream<MQTTConnectionEvent>
    private let core: ClientCore

    /// Creates the libmosquitto handle and applies the configuration; does not connect yet.
    public init(configuration: MQTTConfiguration) throws(MQTTError) {
        try configuration.validate()
        guard libraryInitResult == .mosqSuccess else { throw .library(libraryInitResult, "mosquitto_lib_init failed") }
        self.configuration = configuration
        let (messages, messageContinuation) = AsyncStream.makeStream(
            of: MQTTMessage.self, bufferingPolicy: .bufferingOldest(configuration.inboundBufferSize))
        let (bulkMessages, bulkContinuation) = AsyncStream.makeStream(
            of: MQTTMessage.self, bufferingPolicy: .bufferingOldest(configuration.inboundBufferSize))
        let split = !configuration.priorityFilters.isEmpty
        if !split { bulkContinuation.finish() }
        self.bulkMessages = bulkMessages
        // Connection events are rare (bounded by the back-off) and must not be lost: keep the newest 256.
        let (events, eventContinuation) = AsyncStream.makeStream(
            of: MQTTConnectionEvent.self, bufferingPolicy: .bufferingNewest(256))
        self.messages = messages
        self.connectionEvents = events
        let box = CallbackBox(messages: messageContinuation, bulk: split ? bulkContinuation : nil,
                              priorityFilters: configuration.priorityFilters, events: eventContinuation)
        self.core = try ClientCore(configuration: configuration, box: box)
    }

    deinit {
        core.requestStop()
    }

    /// Starts the network thread, which connects and keeps reconnecting until `shutdown()`. Idempotent.
    public func start() {
        core.start()
    }

    /// True between a successful CONNACK and the next disconnect.
    public var isConnected: Bool { core.box.isConnected.load(ordering: .relaxed) }

    /// Inbound messages dropped because the consumer fell behind.
    public var droppedInboundMessages: Int { core.box.droppedMessages.load(ordering: .relaxed) }

    /// Outgoing messages dropped while not connected: non-retained QoS 0, and the oldest queued messages
    /// when the offline queue was full. (Retained messages replaced by a newer value are not counted.)
    public var droppedOfflineMessages: Int { core.droppedOffline.load(ordering: .relaxed) }

    /// Messages waiting in the offline queue now.
    public var offlineQueueDepth: Int { core.queueDepth.load(ordering: .relaxed) }

    /// Publishes handed to libmosquitto and not yet on the wire (QoS 0) or not yet acknowledged (QoS 1):
    /// libmosquitto's own outgoing queue has no bound, so publishers that can wait (telemetry) hold back
    /// while this is high, and commands' replies do not queue behind them.
    public var outgoingBacklog: Int { max(0, core.box.outgoing.load(ordering: .relaxed)) }

    /// QoS 1/2 publishes handed to libmosquitto so far (`handedOver`), and how many of the first of them the broker
    /// has all acknowledged. A publish can only overtake an earlier one while that one is unacknowledged: QoS 0
    /// goes to the socket at once, QoS 1 waits its turn in the in-flight window. A publisher notes `handedOver`
    /// after a QoS 1 publish; once `acknowledged` reached it, the broker has that message and all before it.
    public var acknowledgementMarks: (handedOver: UInt64, acknowledged: UInt64) {
        core.box.inFlight.withLock { ($0.handedOver, $0.acknowledgedThrough) }
    }

    /// Publishes without waiting; safe from any thread. While not connected, retained messages and QoS 1/2
    /// wait in the offline queue and go out after CONNACK (`.queued`: do not publish it again); non-retained
    /// QoS 0 is dropped (`.droppedNotConnected`).
    @discardableResult
    public func publish(_ topic: String, _ payload: [UInt8], qos: MQTTQoS = .atMostOnce, retain: Bool = false,
                        properties: MQTTPublishProperties = .init()) -> MQTTPublishResult {
        payload.withUnsafeBytes { bytes in
            core.publish(topic, bytes, qos: qos, retain: retain, properties: properties, mid: nil, token: nil).result
        }
    }

    /// TCP segments this connection sent so far (Linux's count, pure ACKs included); nil while not connected.
    /// Shows whether publishes leave together (`coalescingWrites`).
    package var segmentsSent: Int? { core.segmentsSent }

    /// QoS 0 messages this client encoded and sent itself instead of through libmosquitto (see `DirectPublishes`).
    package var directlySent: Int { core.directlySent.load(ordering: .relaxed) }

    /// Runs `body`, whose publishes leave together when it ends: the network thread writes them in one pass and the
    /// socket sends them as few TCP segments, instead of a pass and a segment per message (see `SocketCork`). For a
    /// batch of publishes made at once (a slice of vendor states); a single publish needs none of this. Publishes
    /// from other threads meanwhile wait for the burst's end too (at most `SocketCork.longestWait`): keep it short.
    public func coalescingWrites<T>(_ body: () throws -> T) rethrows -> T {
        core.cork.beginBurst()
        defer { core.cork.endBurst() }
        return try body()
    }

    /// Publishes a UTF-8 payload without copying it; see `publish(_:_:qos:retain:properties:)`.
    @discardableResult
    public func publish(_ topic: String, _ payload: String, qos: MQTTQoS = .atMostOnce, retain: Bool = false,
                        properties: MQTTPublishProperties = .init()) -> MQTTPublishResult {
        var payload = payload
        return payload.withUTF8 { utf8 in
            core.publish(topic, UnsafeRawBufferPointer(utf8), qos: qos, retain: retain, properties: properties,
                         mid: nil, token: nil).result
        }
    }

    /// Publishes and waits until the broker acknowledges it (PUBACK/PUBCOMP; for QoS 0: written to the socket).
    /// A message waiting in the offline queue is acknowledged only once it was sent and acknowledged; it fails
    /// with `.dropped` if the queue drops it or a newer retained value for its topic replaces it.
    /// Throws `.timeout` if that does not happen in time (a queued message stays queued).
    public func publishAndWait(_ topic: String, _ payload: [UInt8], qos: MQTTQoS = .atLeastOnce, retain: Bool = false,
                               properties: MQTTPublishProperties = .init(), timeout: Duration) async throws(MQTTError) {
        let completion = await core.awaitAcknowledgement(timeout: timeout) { token, mid in
            payload.withUnsafeBytes { bytes in
                core.publish(topic, bytes, qos: qos, retain: retain, properties: properties, mid: mid, token: token)
            }
        }
        switch completion {
        case .published(let reason) where reason >= 0x80: throw .rejected(reason, "broker rejected publish to \(topic)")
        case .published, .subscribed: return
        case .failed(let error): throw error
        }
    }

    /// Publishes a UTF-8 payload and waits for the acknowledgement; see the `[UInt8]` variant.
    public func publishAndWait(_ topic: String, _ payload: String, qos: MQTTQoS = .atLeastOnce, retain: Bool = false,
                               properties: MQTTPublishProperties = .init(), timeout: Duration) async throws(MQTTError) {
        try await publishAndWait(topic, Array(payload.utf8), qos: qos, retain: retain, properties: properties,
                                 timeout: timeout)
    }

    /// Sends SUBSCRIBE without waiting for SUBACK; throws `.notConnected` while disconnected.
    public func subscribe(_ filters: [String], qos: MQTTQoS = .atLeastOnce) throws(MQTTError) {
        if let error = core.subscribe(filters, qos: qos, mid: nil) { throw error }
    }

    /// Subscribes and waits for SUBACK; returns the granted QoS per filter, throws `.rejected` if any was refused.
    @discardableResult
    public func subscribeAndWait(_ filters: [String], qos: MQTTQoS = .atLeastOnce,
                                 timeout: Duration = .seconds(5)) async throws(MQTTError) -> [MQTTQoS] {
        let completion = await core.awaitAcknowledgement(timeout: timeout) { _, mid in
            if let error = core.subscribe(filters, qos: qos, mid: mid) { return .failed(error) }
            return .handedOver
        }
        switch completion {
        case .subscribed(let granted):
            if let refused = granted.first(where: { $0 >= 0x80 }) {
                throw .rejected(refused, "broker refused subscription to \(filters.joined(separator: ", "))")
            }
            return granted.map { MQTTQoS(rawValue: $0) ?? .atMostOnce }
        case .published: return []
        case .failed(let error): throw error
        }
    }

    /// Sends UNSUBSCRIBE without waiting; throws `.notConnected` while disconnected.
    public func unsubscribe(_ filters: [String]) throws(MQTTError) {
        if let error = core.unsubscribe(filters) { throw error }
    }

    /// Disconnects cleanly (no will), stops the network thread, frees libmosquitto and finishes the streams.
    /// Idempotent; waits at most `disconnectTimeout` + 2 s (a thread stuck in a blocking connect cleans up later).
    public func shutdown() async {
        core.requestStop()
        await core.waitUntilFinished(timeout: configuration.disconnectTimeout + .seconds(2))
    }
}

/// Owns the libmosquitto handle. The handle lives in `state`; publishers hold that lock during the
/// (non-blocking, threaded-mode) libmosquitto call, so `mosquitto_destroy` can never race with them.
final class ClientCore: Sendable {
    let configuration: MQTTConfiguration
    let box: CallbackBox
    private let state: Mutex<State>
    private let stopRequested = Atomic<Bool>(false)
    private let sleeper = InterruptibleSleep()
    let cork = SocketCork()
    private let finished = Mutex<FinishState>(FinishState())
    private let isV5: Bool
    /// Whether QoS 0 publishes may bypass libmosquitto's queue (`DirectPublishes`): plain TCP only.
    private let directWrites: Bool
    /// Messages sent that way (for tests and diagnostics).
    let directlySent = Atomic<Int>(0)
    /// Messages dropped while not connected (see `MQTTClient.droppedOfflineMessages`).
    let droppedOffline = Atomic<Int>(0)
    /// `state.queue.count`, readable without the lock.
    let queueDepth = Atomic<Int>(0)
    /// The gate: true only between a successful CONNACK (after the offline queue went out) and the end of that
    /// connection. Publishers read it under `state`'s lock; the network thread opens it under that lock (after
    /// the flush) and closes it under that lock before every connect attempt, so no publisher can queue a
    /// packet that libmosquitto would write before CONNECT. The disconnect callback also clears it (without
    /// the lock) so that publishes after a lost connection go to the offline queue at once.
    var mayPublish: Bool { box.gateOpen.load(ordering: .sequentiallyConsistent) }

    /// The libmosquitto handle; Sendable because every use is under `state`'s lock or on the network thread.
    private struct Handle: @unchecked Sendable {
        let pointer: OpaquePointer
    }

    private struct State {
        var handle: Handle?
        var userdata: Unmanaged<CallbackBox>?
        var started = false
        var queue: OfflineQueue
        /// QoS 0 publishes the network thread sends itself (see `DirectPublishes`).
        var direct = DirectPublishes()
    }

    /// What `publish` did, with the detail `publishAndWait` needs.
    enum PublishOutcome {
        /// Handed to libmosquitto while connected; `mid` is set.
        case handedOver
        /// QoS 1/2 handed over as the connection dropped: libmosquitto keeps it for the reconnect; `mid` is set.
        case heldByLibrary
        /// Waiting in the offline queue (no mid yet).
        case queued
        /// Non-retained QoS 0 while not connected.
        case dropped
        case failed(MQTTError)

        var result: MQTTPublishResult {
            switch self {
            case .handedOver: .sent
            case .heldByLibrary, .queued: .queued
            case .dropped: .droppedNotConnected
            case .failed(let error): .failed(error)
            }
        }
    }

    private struct FinishState {
        var done = false
        var nextID = 0
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
    }

    /// Network-loop select timeout: only bounds how fast a stop is noticed when nothing else wakes the loop.
    private static let loopTimeoutMilliseconds: Int32 = 500

    init(configuration: MQTTConfiguration, box: CallbackBox) throws(MQTTError) {
        self.configuration = configuration
        self.box = box
        self.isV5 = configuration.protocolVersion == .v5
        self.directWrites = !configuration.broker.usesTLS
        let userdata = Unmanaged.passRetained(box)
        guard let handle = mosquitto_new(configuration.clientID, configuration.cleanStart, userdata.toOpaque()) else {
            userdata.release()
            throw MQTTError(kind: .library, code: errno, message: "mosquitto_new failed: \(String(cString: strerror(errno)))")
        }
        do {
            try Self.configure(handle, configuration)
        } catch {
            mosquitto_destroy(handle)
            userdata.release()
            throw error
        }
        installCallbacks(on: handle, tls: configuration.broker.usesTLS)
        state = Mutex(State(handle: Handle(pointer: handle), userdata: userdata,
                            queue: OfflineQueue(limit: configuration.offlineQueueLimit)))
    }

    private static func configure(_ handle: OpaquePointer, _ configuration: MQTTConfiguration) throws(MQTTError) {
        func check(_ rc: Int32, _ what: String) throws(MQTTError) {
            if rc != .mosqSuccess { throw .library(rc, what) }
        }
        let version = configuration.protocolVersion == .v5 ? MQTT_PROTOCOL_V5 : MQTT_PROTOCOL_V311
        try check(mosquitto_int_option(handle, MOSQ_OPT_PROTOCOL_VERSION, version), "setting protocol version")
        try check(mosquitto_int_option(handle, MOSQ_OPT_SEND_MAXIMUM, Int32(configuration.maxInflight)), "setting max in-flight")
        // No Nagle: a PUBACK followed by a small PUBLISH would otherwise wait for the broker's delayed ACK (~40 ms).
        try check(mosquitto_int_option(handle, MOSQ_OPT_TCP_NODELAY, 1), "disabling Nagle's algorithm")
        // Publishes from other threads are queued and wake our loop instead of writing to the socket.
        try check(mosquitto_threaded_set(handle, true), "enabling threaded mode")
        if let username = configuration.username {
            // The password goes straight to libmosquitto; it is never part of any message we build.
            try check(mosquitto_username_pw_set(handle, username, configuration.password), "setting credentials")
        }
        if configuration.broker.usesTLS {
            let tls = configuration.tls ?? MQTTTLSOptions()
            // Always a CA file or directory: with MOSQ_OPT_TLS_USE_OS_CERTS alone, libmosquitto 2.0.11 connects
            // once and then fails every reconnect with MOSQ_ERR_INVAL (its reused SSL_CTX "needs a cafile,
            // capath or psk"). Without a CA file the OS CA directory is the default.
            let caPath = tls.caPath ?? (tls.caFile == nil ? MQTTTLSOptions.defaultCADirectory : nil)
            if tls.caFile == nil, tls.caPath == nil {
                // OpenSSL's default bundle as well (other distributions' layouts).
                try check(mosquitto_int_option(handle, MOSQ_OPT_TLS_USE_OS_CERTS, 1), "enabling OS CA certificates")
            }
            try check(mosquitto_tls_set(handle, tls.caFile, caPath, tls.certificateFile, tls.keyFile, nil),
                      "configuring TLS certificates")
        }
        if let will = configuration.will {
            var properties: OpaquePointer?
            if let delay = will.delay, configuration.protocolVersion == .v5 {
                try check(mosquitto_property_add_int32(&properties, Int32(MQTT_PROP_WILL_DELAY_INTERVAL.rawValue), UInt32(clamping: delay.wholeSeconds)),
                          "setting the will delay")
            }
            // libmosquitto takes the property list over when the call succeeds.
            let rc = will.payload.withUnsafeBytes { bytes in
                mosquitto_will_set_v5(handle, will.topic, Int32(bytes.count), bytes.baseAddress, will.qos.rawValue,
                                      will.retain, properties)
            }
            if rc != .mosqSuccess, properties != nil { mosquitto_property_free_all(&properties) }
            try check(rc, "setting the will")
        }
    }

    // MARK: lifecycle

    func start() {
        let shouldStart = state.withLock { state in
            guard !state.started, state.handle != nil, !stopRequested.load(ordering: .sequentiallyConsistent) else {
                return false
            }
            state.started = true
            return true
        }
        guard shouldStart else { return }
        if !startDetachedThread({ self.runNetworkLoop() }) {
            box.events.yield(.connectFailed(MQTTError(kind: .library, message: "could not start the network thread"),
                                            retryIn: .zero))
            destroy()
        }
    }

    /// Asks the network thread to disconnect cleanly and end; destroys at once if it never started.
    func requestStop() {
        stopRequested.store(true, ordering: .sequentiallyConsistent)
        let neverStarted = state.withLock { state in
            // The DISCONNECT also wakes the loop's select() at once.
            if let handle = state.handle, state.started {
                spillDirect(&state, handle.pointer)
                _ = mosquitto_disconnect_v5(handle.pointer, 0, nil)
            }
            return !state.started
        }
        sleeper.interrupt()
        if neverStarted { destroy() }
    }

    func waitUntilFinished(timeout: Duration) async {
        let id: Int? = finished.withLock { finish in
            guard !finish.done else { return nil }
            finish.nextID += 1
            return finish.nextID
        }
        guard let id else { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withTaskCancellationHandler {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        let resumeNow = self.finished.withLock { finish in
                            if finish.done || Task.isCancelled { return true }
                            finish.waiters[id] = continuation
                            return false
                        }
                        if resumeNow { continuation.resume() }
                    }
                } onCancel: {
                    self.finished.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
                }
            }
            group.addTask { try? await Task.sleep(for: timeout) }
            await group.next()
            group.cancelAll()
        }
    }

    /// Frees libmosquitto (no callbacks can follow), then ends the streams and releases the userdata.
    private func destroy() {
        let taken: (OpaquePointer, Unmanaged<CallbackBox>?)? = state.withLock { state in
            guard let handle = state.handle else { return nil }
            defer {
                state.handle = nil
                state.userdata = nil
            }
            return (handle.pointer, state.userdata)
        }
        guard let (handle, userdata) = taken else { return }
        mosquitto_destroy(handle)
        box.close()
        userdata?.release()
        let waiters = finished.withLock { finish in
            finish.done = true
            defer { finish.waiters.removeAll() }
            return Array(finish.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    // MARK: network thread

    private func runNetworkLoop() {
        // Only this thread calls connect/loop; other threads only queue work through libmosquitto.
        guard let handle = state.withLock({ $0.handle })?.pointer else { return }
        var backoff = ReconnectBackoff(policy: configuration.reconnect)
        var connectParametersStored = false
        let broker = configuration.broker
        let keepAlive = Int32(configuration.keepAlive.wholeSeconds)

        connection: while !stopRequested.load(ordering: .sequentiallyConsistent) {
            box.lastRefusal.store(0, ordering: .sequentiallyConsistent)
            box.tlsFailure.withLock { $0 = nil }
            closeGate()
            var rc: Int32
            if let expiry = configuration.sessionExpiry, isV5 {
                // The session expiry goes with every CONNECT, so a reconnect resumes the same session.
                var properties: OpaquePointer?
                _ = mosquitto_property_add_int32(&properties, Int32(MQTT_PROP_SESSION_EXPIRY_INTERVAL.rawValue), UInt32(clamping: expiry.wholeSeconds))
                rc = mosquitto_connect_bind_v5(handle, broker.host, Int32(broker.port), keepAlive, nil, properties)
                mosquitto_property_free_all(&properties)
            } else {
                rc = connectParametersStored
                    ? mosquitto_reconnect(handle)
                    : mosquitto_connect_bind_v5(handle, broker.host, Int32(broker.port), keepAlive, nil, nil)
            }
            let connectFailure: MQTTError? = rc == .mosqSuccess
                ? nil : .library(rc, "connecting to \(broker) failed")
            connectParametersStored = connectParametersStored || rc != .mosqInvalid

            if rc == .mosqSuccess {
                var disconnectDeadline: ContinuousClock.Instant?
                // Whether the broker still acknowledges on this connection (see `acknowledgementTimeout`).
                var established = false
                var stallDeadline: ContinuousClock.Instant?
                // Only this thread writes to the socket (threaded mode) and libmosquitto closes it only here.
                var corked = false
                // Direct QoS 0 publishes taken and not yet all sent (see `DirectPublishes`).
                var batch = DirectBatch()
                while true {
                    // While a batch is half sent, libmosquitto's queue (newer) waits: only read meanwhile.
                    rc = batch.isEmpty ? mosquitto_loop(handle, Self.loopTimeoutMilliseconds, 1) : readUntilWritable(handle)
                    if rc == .mosqSuccess {
                        // A broker with Nagle on (mosquitto's default) holds its next packet to us until we
                        // acknowledge the last one, and Linux delays that ACK up to 40 ms when we have nothing to
                        // send: a `/set` waited behind the PUBACK of our QoS 1 state in 2-12 % of round trips.
                        if box.packetsArrived.exchange(false, ordering: .relaxed) { _ = lbs_tcp_quickack(mosquitto_socket(handle)) }
                        // A burst of publishes is written in one pass after it ends, and sent as few segments.
                        if cork.waitWhileBursting() { corked = SocketCork.cork(mosquitto_socket(handle)) || corked }
                        sendDirect(handle, &batch)
                        if corked, batch.isEmpty, !mosquitto_want_write(handle) {
                            SocketCork.uncork(mosquitto_socket(handle))
                            corked = false
                        }
                    }
                    if box.connackReceived.exchange(false, ordering: .sequentiallyConsistent), rc == .mosqSuccess,
                       !stopRequested.load(ordering: .sequentiallyConsistent) {
                        // The offline queue goes out first, so the gateway's republish on `.connected` follows it.
                        openGate(handle)
                        box.announceConnected()
                        established = true
                    }
                    let (waiting, waitingSince) = box.inFlight.withLock { ($0.awaitingAck.count, $0.waitingSince) }
                    if established, stallDeadline == nil, waiting > 0,
                       ContinuousClock.now - waitingSince > configuration.acknowledgementTimeout {
                        box.ownDisconnectReason.withLock {
                            $0 = "nothing acknowledged by the broker for \(configuration.acknowledgementTimeout.wholeSeconds) s with \(waiting) "
                                + "message(s) waiting (a broker that drops packets to a client whose queue is full, e.g. mosquitto past "
                                + "max_queued_messages); reconnecting to send them again"
                        }
                        state.withLock { spillDirect(&$0, handle) }
                        _ = mosquitto_disconnect_v5(handle, 0, nil)
                        stallDeadline = .now + configuration.disconnectTimeout
                    }
                    // The DISCONNECT is written (the loop then ends), or the connection is closed anyway.
                    if let stallDeadline, rc != .mosqSuccess || ContinuousClock.now >= stallDeadline { break }
                    if stopRequested.load(ordering: .sequentiallyConsistent) {
                        if disconnectDeadline == nil {
                            // Covers a stop that raced with connect; a second DISCONNECT is harmless.
                            state.withLock { spillDirect(&$0, handle) }
                            _ = mosquitto_disconnect_v5(handle, 0, nil)
                            disconnectDeadline = .now + configuration.disconnectTimeout
                        }
                        if rc != .mosqSuccess || disconnectDeadline.map({ .now >= $0 }) == true { break connection }
                    }
                    if rc != .mosqSuccess { break }
                }
                box.outgoing.subtract(batch.messages, ordering: .relaxed)
            }
            // From here until the next CONNACK, publishes wait in the offline queue.
            closeGate()
            box.connackReceived.store(false, ordering: .sequentiallyConsistent)
            if stopRequested.load(ordering: .sequentiallyConsistent) { break }

            let wasConnected = box.connectedSinceLastCheck.exchange(false, ordering: .sequentiallyConsistent)
            if wasConnected { backoff.reset() }
            let delay = backoff.nextDelay()
            if !wasConnected {
                let refusal = box.lastRefusal.load(ordering: .sequentiallyConsistent)
                let tlsFailure = box.tlsFailure.withLock { $0 }
                let error: MQTTError = if refusal != 0 {
                    .rejected(refusal, "broker \(broker) refused the connection")
                } else if let tlsFailure {
                    MQTTError(kind: .tls, code: rc, message: "TLS connection to \(broker) failed: \(tlsFailure.reason)",
                              tlsFailure: tlsFailure)
                } else {
                    connectFailure ?? .library(rc, "connection to \(broker) closed before CONNACK")
                }
                box.events.yield(.connectFailed(error, retryIn: delay))
            }
            sleeper.sleep(for: delay)
        }
        destroy()
    }

    /// Sends the direct QoS 0 publishes (see `DirectPublishes`) until none wait or the socket is full. Takes the
    /// waiting ones only while libmosquitto has nothing queued: what it holds is older.
    private func sendDirect(_ handle: OpaquePointer, _ batch: inout DirectBatch) {
        guard directWrites else { return }
        let socket = mosquitto_socket(handle)
        guard socket >= 0 else { return }
        while true {
            if batch.isEmpty {
                box.outgoing.subtract(batch.messages, ordering: .relaxed)
                if !batch.dropped { directlySent.add(batch.messages, ordering: .relaxed) }
                batch.reset()
                let took = state.withLock { state -> Bool in
                    guard !mosquitto_want_write(handle) else { return false }
                    // From here a publish waits in the buffer only after a hand-over to libmosquitto woke us.
                    state.direct.drainPending = false
                    guard !state.direct.isEmpty else { return false }
                    batch.messages = state.direct.take(into: &batch.bytes)
                    return true
                }
                guard took else { return }
            }
            guard batch.write(to: socket) else { return }
        }
    }

    /// Waits (at most the loop timeout) until the socket can take more of a half-sent batch, reading meanwhile, as
    /// `mosquitto_loop` would, but without letting libmosquitto write.
    private func readUntilWritable(_ handle: OpaquePointer) -> Int32 {
        var descriptor = pollfd(fd: mosquitto_socket(handle), events: Int16(POLLIN | POLLOUT), revents: 0)
        guard descriptor.fd >= 0 else { return MOSQ_ERR_NO_CONN.rawValue }
        if poll(&descriptor, 1, Self.loopTimeoutMilliseconds) < 0, errno != EINTR { return MOSQ_ERR_ERRNO.rawValue }
        if descriptor.revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 {
            let rc = mosquitto_loop_read(handle, 1)
            if rc != .mosqSuccess { return rc }
        }
        return mosquitto_loop_misc(handle)
    }

    // MARK: operations (any thread)

    var segmentsSent: Int? {
        state.withLock { state in
            guard let handle = state.handle else { return nil }
            let socket = mosquitto_socket(handle.pointer)
            guard socket >= 0 else { return nil }
            let count = lbs_tcp_segments_sent(socket)
            return count >= 0 ? count : nil
        }
    }

    func publish(_ topic: String, _ payload: UnsafeRawBufferPointer, qos: MQTTQoS, retain: Bool,
                 properties: MQTTPublishProperties, mid: UnsafeMutablePointer<Int32>?, token: UInt64?) -> PublishOutcome {
        guard payload.count <= 268_435_455 else {
            return .failed(MQTTError(kind: .invalidConfiguration, code: Int32(MOSQ_ERR_PAYLOAD_SIZE.rawValue),
                                     message: "payload of \(payload.count) bytes exceeds the MQTT maximum"))
        }
        var displaced = OfflineQueue.Displaced()
        let outcome = state.withLock { state -> PublishOutcome in
            guard let handle = state.handle, !stopRequested.load(ordering: .relaxed) else {
                return .failed(.shutDownError)
            }
            func hold() -> PublishOutcome {
                guard retain || qos != .atMostOnce else { return .dropped }
                // Refuse what libmosquitto would refuse now, not after the reconnect (wildcards, bad UTF-8).
                let check = mosquitto_pub_topic_check2(topic, topic.utf8.count)
                guard check == .mosqSuccess else { return .failed(.library(check, "publish to \(topic) failed")) }
                let message = OfflineMessage(topic: topic, payload: Array(payload), qos: qos, retain: retain,
                                             properties: properties, token: token)
                displaced = state.queue.enqueue(message)
                queueDepth.store(state.queue.count, ordering: .relaxed)
                return .queued
            }
            guard mayPublish else { return hold() }
            if qos == .atMostOnce, mid == nil, properties.isEmpty, queueDirectly(topic, payload, retain: retain, &state) {
                box.outgoing.add(1, ordering: .relaxed)
                return .handedOver
            }
            spillDirect(&state, handle.pointer)
            // Counted before the hand-over: the network thread may write the packet and run its publish callback
            // (which subtracts) before this thread returns, and a subtraction ahead of its addition was lost to the
            // clamp at zero, leaving the backlog stuck above zero.
            box.outgoing.add(1, ordering: .relaxed)
            var ownMid: Int32 = 0
            let (rc, propertyError) = withUnsafeMutablePointer(to: &ownMid) { own in
                Self.handOver(handle.pointer, topic, payload, qos: qos, retain: retain, properties: properties, isV5: isV5, mid: mid ?? own)
            }
            if rc != .mosqSuccess || propertyError != nil { box.outgoing.subtract(1, ordering: .relaxed) }
            if rc == .mosqSuccess, propertyError == nil {
                box.noteHandedOver(mid: mid?.pointee ?? ownMid, qos: qos)
                // Its wake-up byte makes the network thread look at the direct buffer again.
                state.direct.drainPending = true
            }
            if let propertyError { return .failed(propertyError) }
            switch rc {
            case .mosqSuccess:
                return .handedOver
            // The connection dropped and the network thread has not closed the gate yet.
            case .mosqNoConnection: return qos == .atMostOnce ? hold() : .heldByLibrary
            default: return .failed(.library(rc, "publish to \(topic) failed"))
            }
        }
        settle(displaced)
        if case .dropped = outcome { droppedOffline.add(1, ordering: .relaxed) }
        return outcome
    }

    /// Adds a QoS 0 publish to the direct buffer when it may go that way (see `DirectPublishes`); false: hand it to
    /// libmosquitto. The caller holds `state`'s lock and has checked the gate.
    private func queueDirectly(_ topic: String, _ payload: UnsafeRawBufferPointer, retain: Bool,
                               _ state: inout State) -> Bool {
        guard directWrites, state.direct.drainPending, !retain || box.retainAvailable.load(ordering: .relaxed) else {
            return false
        }
        var topic = topic
        return topic.withUTF8 { utf8 in
            guard let size = DirectPublishes.packetSize(topicCount: utf8.count, payloadCount: payload.count, isV5: isV5),
                  state.direct.bytes.count + size <= DirectPublishes.capacity else { return false }
            let limit = box.maximumPacketSize.load(ordering: .relaxed)
            guard limit == 0 || size <= limit else { return false }
            // What libmosquitto checks before it takes a topic: no wildcards, valid UTF-8 without control characters.
            let valid = utf8.withMemoryRebound(to: CChar.self) { chars in
                mosquitto_pub_topic_check2(chars.baseAddress, chars.count) == .mosqSuccess
                    && mosquitto_validate_utf8(chars.baseAddress, Int32(chars.count)) == .mosqSuccess
            }
            guard valid else { return false }
            state.direct.append(topic: UnsafeRawBufferPointer(utf8), payload: payload, retain: retain, isV5: isV5)
            return true
        }
    }

    /// Hands what waits in the direct buffer to libmosquitto, in order, before anything else goes to libmosquitto:
    /// the network thread sends libmosquitto's queue first, and an older message must not follow a newer one.
    /// The caller holds `state`'s lock.
    private func spillDirect(_ state: inout State, _ handle: OpaquePointer) {
        guard !state.direct.isEmpty else { return }
        let bytes = state.direct.bytes
        let entries = state.direct.entries
        _ = state.direct.removeAll()
        bytes.withUnsafeBytes { raw in
            for entry in entries {
                var mid: Int32 = 0
                let rc: Int32 = raw.baseAddress.map { base in
                    let topic = String(decoding: UnsafeRawBufferPointer(start: base + entry.topicStart, count: entry.topicCount),
                                       as: UTF8.self)
                    return mosquitto_publish_v5(handle, &mid, topic, Int32(entry.payloadCount), base + entry.payloadStart,
                                                0, entry.retain, nil)
                } ?? MOSQ_ERR_INVAL.rawValue
                // Counted when it was queued here; libmosquitto's publish callback subtracts it once written.
                if rc == .mosqSuccess { box.noteHandedOver(mid: mid, qos: .atMostOnce) } else { box.outgoing.subtract(1, ordering: .relaxed) }
            }
        }
        state.direct.drainPending = true
    }

    /// Counts messages the offline queue dropped and ends the waits of dropped or replaced ones.
    private func settle(_ displaced: OfflineQueue.Displaced) {
        if let token = displaced.replaced?.token {
            box.complete(token: token, .failed(MQTTError(
                kind: .dropped, message: "replaced in the offline queue by a newer retained value for the same topic")))
        }
        guard !displaced.dropped.isEmpty else { return }
        droppedOffline.add(displaced.dropped.count, ordering: .relaxed)
        for token in displaced.dropped.compactMap(\.token) {
            box.complete(token: token, .failed(MQTTError(kind: .dropped, message: "dropped: the offline queue was full")))
        }
    }

    /// One `mosquitto_publish_v5` call (the caller holds `state`'s lock).
    private static func handOver(_ handle: OpaquePointer, _ topic: String, _ payload: UnsafeRawBufferPointer,
                                 qos: MQTTQoS, retain: Bool, properties: MQTTPublishProperties, isV5: Bool,
                                 mid: UnsafeMutablePointer<Int32>?) -> (Int32, MQTTError?) {
        var propertyList: OpaquePointer?
        defer { if propertyList != nil { mosquitto_property_free_all(&propertyList) } }
        if isV5, !properties.isEmpty, let error = build(properties, into: &propertyList) {
            return (.mosqInvalid, error)
        }
        return (mosquitto_publish_v5(handle, mid, topic, Int32(payload.count), payload.baseAddress, qos.rawValue,
                                     retain, propertyList), nil)
    }

    // MARK: the gate (network thread)

    /// Stops handing publishes to libmosquitto until the next CONNACK.
    private func closeGate() {
        state.withLock { state in
            box.gateOpen.store(false, ordering: .sequentiallyConsistent)
            // Lost with the connection, as libmosquitto's unsent QoS 0 packets are.
            box.outgoing.subtract(state.direct.removeAll(), ordering: .relaxed)
            state.direct.drainPending = false
        }
    }

    /// After CONNACK: sends the offline queue in order, then lets publishers through. Under `state`'s lock,
    /// so a publish racing with this lands after the queued messages, never before.
    private func openGate(_ handle: OpaquePointer) {
        var failed: [(UInt64, MQTTError)] = []
        var lost = 0
        state.withLock { state in
            for message in state.queue.drain() {
                var mid: Int32 = 0
                box.outgoing.add(1, ordering: .relaxed)  // before the hand-over, as in `publish`
                let (rc, _) = message.payload.withUnsafeBytes { bytes in
                    Self.handOver(handle, message.topic, bytes, qos: message.qos, retain: message.retain,
                                  properties: message.properties, isV5: isV5, mid: &mid)
                }
                if rc != .mosqSuccess { box.outgoing.subtract(1, ordering: .relaxed) }
                if rc == .mosqSuccess { box.noteHandedOver(mid: mid, qos: message.qos) }
                if rc == .mosqSuccess || (rc == .mosqNoConnection && message.qos != .atMostOnce) {
                    // Linked before this thread can read the PUBACK.
                    if let token = message.token { box.link(token: token, mid: mid) }
                } else {
                    lost += 1
                    if let token = message.token {
                        failed.append((token, .library(rc, "publish to \(message.topic) failed after reconnect")))
                    }
                }
            }
            queueDepth.store(0, ordering: .relaxed)
            box.gateOpen.store(true, ordering: .sequentiallyConsistent)
        }
        if lost > 0 { droppedOffline.add(lost, ordering: .relaxed) }
        for (token, error) in failed { box.complete(token: token, .failed(error)) }
    }

    private static func build(_ properties: MQTTPublishProperties, into list: inout OpaquePointer?) -> MQTTError? {
        var rc = Int32.mosqSuccess
        if let responseTopic = properties.responseTopic {
            rc = mosquitto_property_add_string(&list, Int32(MQTT_PROP_RESPONSE_TOPIC.rawValue), responseTopic)
        }
        if rc == .mosqSuccess, let data = properties.correlationData {
            guard data.count <= Int(UInt16.max) else {
                return MQTTError(kind: .invalidConfiguration, message: "correlation data longer than 65535 bytes")
            }
            rc = data.withUnsafeBytes { bytes in
                mosquitto_property_add_binary(&list, Int32(MQTT_PROP_CORRELATION_DATA.rawValue), bytes.baseAddress,
                                              UInt16(bytes.count))
            }
        }
        if rc == .mosqSuccess, let expiry = properties.messageExpiryInterval {
            rc = mosquitto_property_add_int32(&list, Int32(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL.rawValue), expiry)
        }
        return rc == .mosqSuccess ? nil : .library(rc, "building publish properties")
    }

    func subscribe(_ filters: [String], qos: MQTTQoS, mid: UnsafeMutablePointer<Int32>?) -> MQTTError? {
        guard !filters.isEmpty else { return MQTTError(kind: .invalidConfiguration, message: "no topic filter given") }
        return withCStrings(filters) { pointers in
            state.withLock { state -> MQTTError? in
                guard let handle = state.handle, !stopRequested.load(ordering: .relaxed) else { return .shutDownError }
                guard mayPublish else { return Self.notConnected("subscribe to \(filters.joined(separator: ", "))") }
                spillDirect(&state, handle.pointer)
                let rc = mosquitto_subscribe_multiple(handle.pointer, mid, Int32(pointers.count), pointers.baseAddress,
                                                      qos.rawValue, 0, nil)
                return Self.operationError(rc, "subscribe to \(filters.joined(separator: ", "))")
            }
        }
    }

    func unsubscribe(_ filters: [String]) -> MQTTError? {
        guard !filters.isEmpty else { return MQTTError(kind: .invalidConfiguration, message: "no topic filter given") }
        return withCStrings(filters) { pointers in
            state.withLock { state -> MQTTError? in
                guard let handle = state.handle, !stopRequested.load(ordering: .relaxed) else { return .shutDownError }
                guard mayPublish else { return Self.notConnected("unsubscribe from \(filters.joined(separator: ", "))") }
                spillDirect(&state, handle.pointer)
                let rc = mosquitto_unsubscribe_multiple(handle.pointer, nil, Int32(pointers.count), pointers.baseAddress, nil)
                return Self.operationError(rc, "unsubscribe from \(filters.joined(separator: ", "))")
            }
        }
    }

    private static func notConnected(_ what: String) -> MQTTError {
        MQTTError(kind: .notConnected, code: .mosqNoConnection, message: "\(what): not connected")
    }

    private static func operationError(_ rc: Int32, _ what: String) -> MQTTError? {
        switch rc {
        case .mosqSuccess: nil
        case .mosqNoConnection: MQTTError(kind: .notConnected, code: rc, message: "\(what): not connected")
        default: .library(rc, what)
        }
    }

    /// Runs `start` (given the waiter's token; it stores the mid unless the message was queued) and waits for
    /// its acknowledgement or `timeout`.
    func awaitAcknowledgement(timeout: Duration,
                              _ start: (UInt64, UnsafeMutablePointer<Int32>) -> PublishOutcome) async -> Completion {
        guard let token = box.beginRegistration() else { return .failed(.shutDownError) }
        var mid: Int32 = 0
        let knownMid: Int32?
        switch start(token, &mid) {
        case .handedOver, .heldByLibrary: knownMid = mid
        case .queued: knownMid = nil
        case .dropped:
            box.abandonRegistration()
            return .failed(MQTTError(kind: .notConnected, code: .mosqNoConnection,
                                     message: "QoS 0 publish dropped: not connected"))
        case .failed(let error):
            box.abandonRegistration()
            return .failed(error)
        }
        let timeoutError = MQTTError(kind: .timeout, message: "no acknowledgement within \(timeout)")
        let box = self.box
        return await withTaskGroup(of: Completion?.self) { group in
            group.addTask { await box.waitForCompletion(token: token, mid: knownMid, cancellationError: timeoutError) }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            var result: Completion = .failed(timeoutError)
            if let first = await group.next(), let completion = first {
                result = completion
            }
            group.cancelAll()
            // When the timer won, the waiter resumes with the timeout error after cancellation.
            if case .failed = result, let second = await group.next(), let completion = second {
                result = completion
            }
            return result
        }
    }
}

/// Calls `body` with a C array of C strings that stay valid for its duration.
private func withCStrings<Result>(_ strings: [String],
                                  _ body: (UnsafeBufferPointer<UnsafeMutablePointer<CChar>?>) -> Result) -> Result {
    let pointers = strings.map { strdup($0) }
    defer { pointers.forEach { free($0) } }
    return pointers.withUnsafeBufferPointer(body)
}
