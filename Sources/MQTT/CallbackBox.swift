import CMosquitto
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How an acknowledged operation ended.
enum Completion: Sendable {
    case published(reason: Int32)
    case subscribed(granted: [Int32])
    case failed(MQTTError)
}

/// The userdata behind libmosquitto's callbacks. Callbacks only copy data and hand it over:
/// no I/O, no calls back into libmosquitto, only short locks that never wrap a libmosquitto call.
///
/// Acknowledgement waiters are keyed by a token (one per `publishAndWait`/`subscribeAndWait`), because a
/// message waiting in the offline queue has no libmosquitto mid yet: the network thread links the mid to the
/// token when it hands the message over (`link(token:mid:)`), before it can read that message's PUBACK.
final class CallbackBox: Sendable {
    let messages: AsyncStream<MQTTMessage>.Continuation
    /// Messages outside `priorityFilters` when any are set (`MQTTClient.bulkMessages`); nil: all go to `messages`.
    let bulk: AsyncStream<MQTTMessage>.Continuation?
    let priorityFilters: [String]
    let events: AsyncStream<MQTTConnectionEvent>.Continuation
    let droppedMessages = Atomic<Int>(0)
    /// Publishes handed to libmosquitto and not yet written (QoS 0) or acknowledged (QoS 1/2): libmosquitto
    /// calls the publish callback for QoS 0 once the packet is written to the socket, for QoS 1 on PUBACK.
    let outgoing = Atomic<Int>(0)
    /// QoS 1/2 messages handed to libmosquitto and not yet acknowledged, and since when the broker owes an
    /// acknowledgement: the network thread's sign that the broker still acknowledges (see `acknowledgementTimeout`).
    let inFlight = Mutex(InFlight())

    struct InFlight {
        /// QoS 1/2 messages awaiting their acknowledgement: mid → their place in the order of hand-overs.
        var awaitingAck: [Int32: UInt64] = [:]
        var awaitingWrite: Set<Int32> = []
        /// Completed before their hand-over was noted (the network thread can be that fast).
        var completedEarly: Set<Int32> = []
        /// The last acknowledgement, or the hand-over of a message when none was waiting: a stall is a message
        /// waiting that long with no acknowledgement meanwhile, not a quiet time before a message is published.
        var waitingSince = ContinuousClock.now
        /// QoS 1/2 messages handed over on this client so far, and how many of the first of them were all
        /// acknowledged (`MQTTClient.acknowledgementMarks`).
        var handedOver: UInt64 = 0
        var acknowledgedThrough: UInt64 = 0
        /// Acknowledged ahead of an earlier one still waiting (a broker may acknowledge out of order).
        var acknowledgedAhead: Set<UInt64> = []
        /// What the last connection left unacknowledged: libmosquitto sends it again and its acknowledgements
        /// arrive on the new connection. They must not count as a new message's (mids wrap after 65,535).
        var leftOver: Set<Int32> = []

        mutating func acknowledge(_ place: UInt64) {
            guard place == acknowledgedThrough + 1 else {
                acknowledgedAhead.insert(place)
                return
            }
            acknowledgedThrough = place
            while acknowledgedAhead.remove(acknowledgedThrough + 1) != nil { acknowledgedThrough += 1 }
        }

        /// A new connection: what the last one left unacknowledged is sent again by libmosquitto (or let go) and
        /// no longer counted; the publishers republish everything after a connect anyway.
        mutating func restart() {
            leftOver = Set(awaitingAck.keys)
            awaitingAck.removeAll()
            awaitingWrite.removeAll()
            completedEarly.removeAll()
            acknowledgedAhead.removeAll()
            acknowledgedThrough = handedOver
            waitingSince = .now
        }
    }

    /// A publish libmosquitto took, with the message id it gave it.
    func noteHandedOver(mid: Int32, qos: MQTTQoS) {
        inFlight.withLock { table in
            if qos != .atMostOnce { table.handedOver += 1 }
            if table.completedEarly.remove(mid) != nil {
                if qos != .atMostOnce {
                    table.waitingSince = .now
                    table.acknowledge(table.handedOver)
                }
                return
            }
            if qos == .atMostOnce {
                table.awaitingWrite.insert(mid)
            } else {
                // Nothing was owed until now: the clock starts with this message, not with the last acknowledgement.
                if table.awaitingAck.isEmpty { table.waitingSince = .now }
                table.awaitingAck[mid] = table.handedOver
            }
        }
    }

    /// The publish callback: QoS 0 written, QoS 1 acknowledged.
    func noteCompleted(mid: Int32) {
        inFlight.withLock { table in
            if let place = table.awaitingAck.removeValue(forKey: mid) {
                packetsArrived.store(true, ordering: .relaxed)
                table.waitingSince = .now
                table.acknowledge(place)
            } else if table.awaitingWrite.remove(mid) == nil, table.leftOver.remove(mid) == nil {
                // Maybe an acknowledgement that overtook its hand-over's note.
                packetsArrived.store(true, ordering: .relaxed)
                table.completedEarly.insert(mid)
            }
        }
    }
    /// Why the network thread ended a connection itself (a stalled one), for the `disconnected` event.
    let ownDisconnectReason = Mutex<String?>(nil)
    /// Set when a packet arrived (a message, an acknowledgement, CONNACK); the network thread then acknowledges
    /// at once (`TCP_QUICKACK`, see `ClientCore.runNetworkLoop`).
    let packetsArrived = Atomic<Bool>(false)
    /// From the broker's CONNACK (MQTT 5; 3.1.1 brokers say nothing): whether it keeps retained messages, and its
    /// largest packet (0: no limit). The QoS 0 publishes the client encodes itself obey them, as libmosquitto does.
    let retainAvailable = Atomic<Bool>(true)
    let maximumPacketSize = Atomic<Int>(0)
    let isConnected = Atomic<Bool>(false)
    /// `ClientCore.mayPublish`: the client hands publishes to libmosquitto only while this is true.
    let gateOpen = Atomic<Bool>(false)
    /// Set by a successful CONNACK; the network thread opens the gate and announces `.connected`.
    let connackReceived = Atomic<Bool>(false)
    /// Set when `.connected` was announced, consumed by the network thread to reset the back-off.
    let connectedSinceLastCheck = Atomic<Bool>(false)
    /// The CONNACK reason of the last refused connect attempt (0 = none).
    let lastRefusal = Atomic<Int32>(0)
    /// What the last TLS handshake found wrong (from libmosquitto's log lines), reset per attempt.
    let tlsFailure = Mutex<MQTTTLSFailure?>(nil)
    private let completions = Mutex(CompletionTable())

    private struct Waiter {
        var continuation: CheckedContinuation<Completion, Never>
        var mid: Int32?
    }

    private struct CompletionTable {
        var waiters: [UInt64: Waiter] = [:]
        /// The waiting token per in-flight mid.
        var tokenForMid: [Int32: UInt64] = [:]
        /// While someone registers: completions (by mid) and failures (by token) that came first,
        /// and mids linked to tokens whose waiter is not stored yet.
        var earlyByMid: [Int32: Completion] = [:]
        var earlyByToken: [UInt64: Completion] = [:]
        var linkedMid: [UInt64: Int32] = [:]
        var registering = 0
        var nextToken: UInt64 = 0
        var closed = false

        mutating func endRegistration() {
            registering -= 1
            if registering == 0 {
                earlyByMid.removeAll()
                earlyByToken.removeAll()
                linkedMid.removeAll()
            }
        }
    }

    init(messages: AsyncStream<MQTTMessage>.Continuation, bulk: AsyncStream<MQTTMessage>.Continuation?, priorityFilters: [String],
         events: AsyncStream<MQTTConnectionEvent>.Continuation) {
        self.messages = messages
        self.bulk = bulk
        self.priorityFilters = priorityFilters
        self.events = events
    }

    /// The stream `topic` goes to: `messages` when no priority filters are set or one matches it.
    private func lane(for topic: String) -> AsyncStream<MQTTMessage>.Continuation {
        guard let bulk else { return messages }
        for filter in priorityFilters {
            var matches = false
            if mosquitto_topic_matches_sub(filter, topic, &matches) == .mosqSuccess, matches { return messages }
        }
        return bulk
    }

    // MARK: callbacks (network thread)

    func didConnect(reason: Int32) {
        // libmosquitto discards unsent QoS 0 packets of the old connection without callbacks: start counting anew.
        outgoing.store(0, ordering: .relaxed)
        // The stall check starts anew with each connection: what libmosquitto sends again (or let go without a
        // callback) is not waited for; a connection that acknowledges nothing shows in the messages published on it.
        inFlight.withLock { $0.restart() }
        if reason == 0 {
            // `.connected` follows once the network thread has flushed the offline queue.
            connackReceived.store(true, ordering: .sequentiallyConsistent)
        } else {
            lastRefusal.store(reason, ordering: .sequentiallyConsistent)
        }
    }

    /// Called by the network thread after the offline queue went out.
    func announceConnected() {
        isConnected.store(true, ordering: .sequentiallyConsistent)
        connectedSinceLastCheck.store(true, ordering: .sequentiallyConsistent)
        events.yield(.connected)
    }

    func didDisconnect(code: Int32) {
        // Closed before `isConnected` turns false: whoever sees "disconnected" publishes into the offline queue.
        gateOpen.store(false, ordering: .sequentiallyConsistent)
        // Only established connections report here; failed attempts are reported by the network thread.
        guard isConnected.exchange(false, ordering: .sequentiallyConsistent) else { return }
        let own = ownDisconnectReason.withLock { reason in
            defer { reason = nil }
            return reason
        }
        let error: MQTTError = switch code {
        case 0 where own != nil: MQTTError(kind: .library, code: 0, message: own ?? "")
        case 0: MQTTError(kind: .library, code: 0, message: "disconnected cleanly")
        case 0x80...: .rejected(code, "broker closed the connection")
        default: .library(code, "connection lost")
        }
        events.yield(.disconnected(error))
    }

    /// libmosquitto's error lines during a TLS handshake: keep the most specific reason.
    func didLog(_ mosq: OpaquePointer?, level: Int32, text: String) {
        guard level == Int32(MOSQ_LOG_ERR) else { return }
        var found: MQTTTLSFailure?
        if text.contains("host name verification failed") {
            found = .hostnameMismatch
        } else if text.contains("Unable to load CA certificates") {
            found = .caUnreadable
        } else if text.hasPrefix("OpenSSL Error") {
            let verify = mosq.map { lbs_mosquitto_tls_verify_result($0) } ?? -1
            found = Self.failure(verifyResult: verify, openSSLText: text)
        }
        guard let found else { return }
        tlsFailure.withLock { current in
            // The first specific reason wins: OpenSSL's generic lines follow libmosquitto's own.
            switch current {
            case nil, .handshakeFailed?: current = found
            default: break
            }
        }
    }

    static func failure(verifyResult: Int, openSSLText: String) -> MQTTTLSFailure {
        switch Int32(truncatingIfNeeded: verifyResult) {
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY,
             X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT, X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN,
             X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
            return .unknownCA
        case X509_V_ERR_CERT_HAS_EXPIRED: return .expiredCertificate
        case X509_V_ERR_CERT_NOT_YET_VALID: return .certificateNotYetValid
        case X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH: return .hostnameMismatch
        case X509_V_OK, -1:
            // Not a certificate problem: OpenSSL's reason, e.g. "wrong version number" (no TLS on that port).
            // "OpenSSL Error[0]: error:0A00010B:SSL routines::wrong version number": the text after the last colon.
            let reason = openSSLText.split(separator: ":").last.map { String($0.drop(while: { $0 == " " })) } ?? ""
            return .handshakeFailed(reason.isEmpty ? openSSLText : reason)
        case let code:
            return .verificationFailed(String(cString: lbs_tls_verify_error_string(Int(code))))
        }
    }

    func didReceive(_ message: UnsafePointer<mosquitto_message>, properties: OpaquePointer?) {
        packetsArrived.store(true, ordering: .relaxed)
        let raw = message.pointee
        let topic = raw.topic.map { String(cString: $0) } ?? ""
        let payload: [UInt8] = if let bytes = raw.payload, raw.payloadlen > 0 {
            Array(UnsafeRawBufferPointer(start: bytes, count: Int(raw.payloadlen)))
        } else {
            []
        }
        var responseTopic: String?
        var correlationData: [UInt8]?
        if let properties {
            var text: UnsafeMutablePointer<CChar>?
            if mosquitto_property_read_string(properties, Int32(MQTT_PROP_RESPONSE_TOPIC.rawValue), &text, false) != nil,
               let text {
                responseTopic = String(cString: text)
                free(text)
            }
            var data: UnsafeMutableRawPointer?
            var length: UInt16 = 0
            if mosquitto_property_read_binary(properties, Int32(MQTT_PROP_CORRELATION_DATA.rawValue), &data, &length, false) != nil {
                correlationData = data.map { Array(UnsafeRawBufferPointer(start: $0, count: Int(length))) } ?? []
                free(data)
            }
        }
        let copy = MQTTMessage(topic: topic, payload: payload, qos: MQTTQoS(rawValue: raw.qos) ?? .atMostOnce,
                               retain: raw.retain, responseTopic: responseTopic, correlationData: correlationData)
        if case .dropped = lane(for: topic).yield(copy) {
            droppedMessages.add(1, ordering: .relaxed)
        }
    }

    func didComplete(mid: Int32, _ completion: Completion) {
        let continuation: CheckedContinuation<Completion, Never>? = completions.withLock { table in
            if let token = table.tokenForMid.removeValue(forKey: mid),
               let waiter = table.waiters.removeValue(forKey: token) {
                return waiter.continuation
            }
            if table.registering > 0, table.earlyByMid.count < 65_536 { table.earlyByMid[mid] = completion }
            return nil
        }
        continuation?.resume(returning: completion)
    }

    // MARK: waiting for acknowledgements (any thread)

    /// Announces a waiter that registers after its operation started; nil after close.
    func beginRegistration() -> UInt64? {
        completions.withLock { table in
            guard !table.closed else { return nil }
            table.registering += 1
            table.nextToken += 1
            return table.nextToken
        }
    }

    /// Withdraws a `beginRegistration` whose operation never started.
    func abandonRegistration() {
        completions.withLock { $0.endRegistration() }
    }

    /// The network thread handed `token`'s queued message to libmosquitto as `mid` (before reading its PUBACK).
    func link(token: UInt64, mid: Int32) {
        completions.withLock { table in
            if table.waiters[token] != nil {
                table.waiters[token]?.mid = mid
                table.tokenForMid[mid] = token
            } else if table.registering > 0 {
                table.linkedMid[token] = mid
            }
        }
    }

    /// Ends `token`'s wait with `completion` (a queued message that was dropped or could not be sent).
    func complete(token: UInt64, _ completion: Completion) {
        let continuation: CheckedContinuation<Completion, Never>? = completions.withLock { table in
            if let waiter = table.waiters.removeValue(forKey: token) {
                if let mid = waiter.mid { table.tokenForMid[mid] = nil }
                return waiter.continuation
            }
            if table.registering > 0 { table.earlyByToken[token] = completion }
            return nil
        }
        continuation?.resume(returning: completion)
    }

    /// Waits for the completion of `token` (sent as `mid`, or still queued when `mid` is nil);
    /// task cancellation resumes it with `.failed(cancellationError)`.
    func waitForCompletion(token: UInt64, mid: Int32?, cancellationError: MQTTError) async -> Completion {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Completion, Never>) in
                let ready: Completion? = completions.withLock { table in
                    defer { table.endRegistration() }
                    let mid = mid ?? table.linkedMid.removeValue(forKey: token)
                    if let early = table.earlyByToken.removeValue(forKey: token) { return early }
                    if let mid, let early = table.earlyByMid.removeValue(forKey: mid) { return early }
                    if table.closed { return .failed(.shutDownError) }
                    table.waiters[token] = Waiter(continuation: continuation, mid: mid)
                    if let mid { table.tokenForMid[mid] = token }
                    return nil
                }
                if let ready {
                    continuation.resume(returning: ready)
                } else if Task.isCancelled {
                    // The cancel handler may have run before the waiter was stored.
                    complete(token: token, .failed(cancellationError))
                }
            }
        } onCancel: {
            cancelWaiter(token: token, error: cancellationError)
        }
    }

    private func cancelWaiter(token: UInt64, error: MQTTError) {
        let continuation: CheckedContinuation<Completion, Never>? = completions.withLock { table in
            guard let waiter = table.waiters.removeValue(forKey: token) else { return nil }
            if let mid = waiter.mid { table.tokenForMid[mid] = nil }
            return waiter.continuation
        }
        continuation?.resume(returning: .failed(error))
    }

    /// Ends both streams and fails every waiter; called once libmosquitto can no longer call back.
    func close() {
        let waiters = completions.withLock { table in
            table.closed = true
            table.earlyByMid.removeAll()
            table.earlyByToken.removeAll()
            table.linkedMid.removeAll()
            table.tokenForMid.removeAll()
            defer { table.waiters.removeAll() }
            return table.waiters.values.map(\.continuation)
        }
        for waiter in waiters { waiter.resume(returning: .failed(.shutDownError)) }
        isConnected.store(false, ordering: .sequentiallyConsistent)
        messages.finish()
        bulk?.finish()
        events.finish()
    }
}

extension MQTTError {
    static let shutDownError = MQTTError(kind: .shutDown, message: "the MQTT client was shut down")
}

// MARK: C trampolines (no captures allowed; recover the box from userdata)

private func box(_ userdata: UnsafeMutableRawPointer?) -> CallbackBox? {
    userdata.map { Unmanaged<CallbackBox>.fromOpaque($0).takeUnretainedValue() }
}

/// Installs the v5 callbacks (they work for 3.1.1 clients too, with nil properties). The log callback
/// (only for TLS: it makes libmosquitto format every log line) captures why a handshake failed.
func installCallbacks(on handle: OpaquePointer, tls: Bool) {
    mosquitto_connect_v5_callback_set(handle) { _, userdata, reason, _, properties in
        guard let box = box(userdata) else { return }
        // What the broker allows, for the QoS 0 publishes the client encodes itself (`DirectPublishes`).
        var retain: UInt8 = 1
        _ = mosquitto_property_read_byte(properties, Int32(MQTT_PROP_RETAIN_AVAILABLE.rawValue), &retain, false)
        var largest: UInt32 = 0
        _ = mosquitto_property_read_int32(properties, Int32(MQTT_PROP_MAXIMUM_PACKET_SIZE.rawValue), &largest, false)
        box.retainAvailable.store(retain != 0, ordering: .relaxed)
        box.maximumPacketSize.store(Int(largest), ordering: .relaxed)
        box.didConnect(reason: reason)
    }
    mosquitto_disconnect_v5_callback_set(handle) { _, userdata, code, _ in
        box(userdata)?.didDisconnect(code: code)
    }
    mosquitto_message_v5_callback_set(handle) { _, userdata, message, properties in
        guard let message else { return }
        box(userdata)?.didReceive(message, properties: properties)
    }
    mosquitto_publish_v5_callback_set(handle) { _, userdata, mid, reason, _ in
        guard let box = box(userdata) else { return }
        // Never below zero: QoS 1 messages of an earlier connection may complete after the count restarted.
        if box.outgoing.subtract(1, ordering: .relaxed).newValue < 0 { box.outgoing.store(0, ordering: .relaxed) }
        box.noteCompleted(mid: mid)
        box.didComplete(mid: mid, .published(reason: reason))
    }
    if tls {
        mosquitto_log_callback_set(handle) { mosq, userdata, level, text in
            guard level == Int32(MOSQ_LOG_ERR), let text else { return }
            box(userdata)?.didLog(mosq, level: level, text: String(cString: text))
        }
    }
    mosquitto_subscribe_v5_callback_set(handle) { _, userdata, mid, count, granted, _ in
        box(userdata)?.packetsArrived.store(true, ordering: .relaxed)
        let codes = granted.map { Array(UnsafeBufferPointer(start: $0, count: Int(max(0, count)))) } ?? []
        box(userdata)?.didComplete(mid: mid, .subscribed(granted: codes))
    }
}
