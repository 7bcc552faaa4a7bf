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
final class CallbackBox: Sendable {
    let messages: AsyncStream<MQTTMessage>.Continuation
    let events: AsyncStream<MQTTConnectionEvent>.Continuation
    let droppedMessages = Atomic<Int>(0)
    let isConnected = Atomic<Bool>(false)
    /// Set by a successful CONNACK, consumed by the network thread to reset the back-off.
    let connectedSinceLastCheck = Atomic<Bool>(false)
    /// The CONNACK reason of the last refused connect attempt (0 = none).
    let lastRefusal = Atomic<Int32>(0)
    private let completions = Mutex(CompletionTable())

    private struct CompletionTable {
        var waiters: [Int32: CheckedContinuation<Completion, Never>] = [:]
        /// Completions that arrived before their waiter registered (kept only while someone registers).
        var early: [Int32: Completion] = [:]
        var registering = 0
        var closed = false
    }

    init(messages: AsyncStream<MQTTMessage>.Continuation, events: AsyncStream<MQTTConnectionEvent>.Continuation) {
        self.messages = messages
        self.events = events
    }

    // MARK: callbacks (network thread)

    func didConnect(reason: Int32) {
        if reason == 0 {
            isConnected.store(true, ordering: .sequentiallyConsistent)
            connectedSinceLastCheck.store(true, ordering: .sequentiallyConsistent)
            events.yield(.connected)
        } else {
            lastRefusal.store(reason, ordering: .sequentiallyConsistent)
        }
    }

    func didDisconnect(code: Int32) {
        // Only established connections report here; failed attempts are reported by the network thread.
        guard isConnected.exchange(false, ordering: .sequentiallyConsistent) else { return }
        let error: MQTTError = switch code {
        case 0: MQTTError(kind: .library, code: 0, message: "disconnected cleanly")
        case 0x80...: .rejected(code, "broker closed the connection")
        default: .library(code, "connection lost")
        }
        events.yield(.disconnected(error))
    }

    func didReceive(_ message: UnsafePointer<mosquitto_message>, properties: OpaquePointer?) {
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
        if case .dropped = messages.yield(copy) {
            droppedMessages.add(1, ordering: .relaxed)
        }
    }

    func didComplete(mid: Int32, _ completion: Completion) {
        let waiter: CheckedContinuation<Completion, Never>? = completions.withLock { table in
            if let waiter = table.waiters.removeValue(forKey: mid) { return waiter }
            if table.registering > 0, table.early.count < 65_536 { table.early[mid] = completion }
            return nil
        }
        waiter?.resume(returning: completion)
    }

    // MARK: waiting for acknowledgements (any thread)

    /// Announces that a waiter for a not-yet-known mid is about to register; false after close.
    func beginRegistration() -> Bool {
        completions.withLock { table in
            guard !table.closed else { return false }
            table.registering += 1
            return true
        }
    }

    /// Withdraws a `beginRegistration` whose operation never got a mid.
    func abandonRegistration() {
        completions.withLock { table in
            table.registering -= 1
            if table.registering == 0 { table.early.removeAll() }
        }
    }

    /// Waits for the completion of `mid`; task cancellation resumes it with `.failed(cancellationError)`.
    func waitForCompletion(mid: Int32, cancellationError: MQTTError) async -> Completion {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Completion, Never>) in
                let ready: Completion? = completions.withLock { table in
                    table.registering -= 1
                    defer { if table.registering == 0 { table.early.removeAll() } }
                    if let early = table.early.removeValue(forKey: mid) { return early }
                    if table.closed { return .failed(.shutDownError) }
                    table.waiters[mid] = continuation
                    return nil
                }
                if let ready {
                    continuation.resume(returning: ready)
                } else if Task.isCancelled {
                    // The cancel handler may have run before the waiter was stored.
                    cancelWaiter(mid: mid, error: cancellationError)
                }
            }
        } onCancel: {
            cancelWaiter(mid: mid, error: cancellationError)
        }
    }

    private func cancelWaiter(mid: Int32, error: MQTTError) {
        let waiter = completions.withLock { $0.waiters.removeValue(forKey: mid) }
        waiter?.resume(returning: .failed(error))
    }

    /// Ends both streams and fails every waiter; called once libmosquitto can no longer call back.
    func close() {
        let waiters = completions.withLock { table in
            table.closed = true
            table.early.removeAll()
            defer { table.waiters.removeAll() }
            return Array(table.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: .failed(.shutDownError)) }
        isConnected.store(false, ordering: .sequentiallyConsistent)
        messages.finish()
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

/// Installs the v5 callbacks (they work for 3.1.1 clients too, with nil properties).
func installCallbacks(on handle: OpaquePointer) {
    mosquitto_connect_v5_callback_set(handle) { _, userdata, reason, _, _ in
        box(userdata)?.didConnect(reason: reason)
    }
    mosquitto_disconnect_v5_callback_set(handle) { _, userdata, code, _ in
        box(userdata)?.didDisconnect(code: code)
    }
    mosquitto_message_v5_callback_set(handle) { _, userdata, message, properties in
        guard let message else { return }
        box(userdata)?.didReceive(message, properties: properties)
    }
    mosquitto_publish_v5_callback_set(handle) { _, userdata, mid, reason, _ in
        box(userdata)?.didComplete(mid: mid, .published(reason: reason))
    }
    mosquitto_subscribe_v5_callback_set(handle) { _, userdata, mid, count, granted, _ in
        let codes = granted.map { Array(UnsafeBufferPointer(start: $0, count: Int(max(0, count)))) } ?? []
        box(userdata)?.didComplete(mid: mid, .subscribed(granted: codes))
    }
}
