#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import HAP
import NIOCore
import NIOPosix
import Resilience
import Synchronization

/// One TCP connection to an accessory: HTTP/1.1 requests one at a time (HAP has no request ids, so answers come
/// in order and a request that times out ends the connection), plaintext until pair-verify, then encrypted
/// frames; `EVENT/1.0` messages go to `onEvent`, never to a waiting request.
final class HAPConnection: Sendable {
    private struct State {
        /// Decrypts (after pair-verify) and splits what arrives.
        var inbound = HAPInbound()
        /// Encrypts what leaves: the same keys, its own counter.
        var cipher: SecureChannel?
        var waiting: CheckedContinuation<HAPMessage, any Error>?
        var answered: Result<HAPMessage, any Error>?
        var closed: GatewayError?
    }

    let label: String
    private let hostHeader: String
    private let outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>
    private let channel: any Channel
    private let state = Mutex(State())
    private let turn = Turnstile()
    private let time: TimeSource
    private let onEvent: @Sendable ([CharacteristicValue]) -> Void

    init(label: String, hostHeader: String, outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>, channel: any Channel, time: TimeSource,
         onEvent: @escaping @Sendable ([CharacteristicValue]) -> Void) {
        self.label = label
        self.hostHeader = hostHeader
        self.outbound = outbound
        self.channel = channel
        self.time = time
        self.onEvent = onEvent
    }

    /// Opens a TCP connection and runs `body` with it; the connection is closed when `body` returns or throws.
    static func withConnection<T: Sendable>(
        host: String, port: Int, label: String, connectTimeout: Duration, time: TimeSource,
        onEvent: @escaping @Sendable ([CharacteristicValue]) -> Void,
        _ body: @Sendable @escaping (HAPConnection) async throws -> T
    ) async throws -> T {
        let socket: NIOAsyncChannel<ByteBuffer, ByteBuffer>
        do {
            socket = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connectTimeout(.milliseconds(connectTimeout.components.seconds * 1000))
                .connect(host: host, port: port) { channel in
                    channel.eventLoop.makeCompletedFuture { try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel) }
                }
        } catch {
            throw GatewayError(.vendorUnreachable, message: "Cannot connect to the HomeKit accessory '\(label)' at \(host):\(port): \(error)",
                               suggestion: "Check that the accessory is powered and on the network, and its address (or that mDNS finds it).")
        }
        let hostHeader = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        return try await socket.executeThenClose { inbound, outbound in
            let connection = HAPConnection(label: label, hostHeader: hostHeader, outbound: outbound, channel: socket.channel, time: time, onEvent: onEvent)
            return try await withThrowingTaskGroup(of: T?.self) { group in
                group.addTask {
                    do {
                        for try await buffer in inbound {
                            if let failure = connection.receive(Array(buffer.readableBytesView)) {
                                connection.close(failure)
                                throw failure
                            }
                        }
                    } catch let error as GatewayError {
                        connection.close(error)
                        throw error
                    } catch is CancellationError {
                        throw CancellationError()
                    } catch {
                        let failure = GatewayError(.vendorUnreachable, message: "The connection to '\(label)' failed: \(error)")
                        connection.close(failure)
                        throw failure
                    }
                    let closed = GatewayError(.vendorUnreachable, message: "The HomeKit accessory '\(label)' closed the connection.")
                    connection.close(closed)
                    throw closed
                }
                group.addTask { try await body(connection) }
                defer { group.cancelAll() }
                while let result = try await group.next() {
                    if let result { return result }
                }
                throw GatewayError(.vendorUnreachable, message: "The connection to '\(label)' ended.")
            }
        }
    }

    /// From pair-verify on, every byte both ways is encrypted.
    func startEncryption(_ cipher: SecureChannel) {
        state.withLock {
            $0.cipher = cipher
            $0.inbound.cipher = cipher
        }
    }

    var isEncrypted: Bool { state.withLock { $0.cipher != nil } }

    /// Bytes from the socket; a returned error ends the connection.
    private func receive(_ bytes: [UInt8]) -> GatewayError? {
        let result: Result<[HAPMessage], HAPError> = state.withLock { state in
            do throws(HAPError) { return .success(try state.inbound.receive(bytes)) } catch { return .failure(error) }
        }
        switch result {
        case .failure(let error):
            return GatewayError(.malformedResponse, message: "The HomeKit accessory '\(label)' sent something that is not HAP: \(error)")
        case .success(let messages):
            for message in messages {
                if message.kind == .event {
                    // An event that does not parse is dropped, not fatal: the next poll or event corrects the state.
                    if let values = try? CharacteristicValue.parseList(message.body) { onEvent(values) }
                    continue
                }
                let waiter = state.withLock { state -> CheckedContinuation<HAPMessage, any Error>? in
                    defer { state.waiting = nil }
                    if state.waiting == nil { state.answered = .success(message) }
                    return state.waiting
                }
                waiter?.resume(returning: message)
            }
            return nil
        }
    }

    /// Sends one request and waits for its answer. A timeout after sending ends the connection (later answers
    /// could not be told apart) and is `outcomeUnknown`: the accessory may have carried the request out.
    func request(_ method: String, _ target: String, contentType: String? = nil, body: [UInt8] = [], timeout: Duration) async throws -> HAPMessage {
        try await turn.enter()
        defer { turn.leave() }
        let plain = HAPMessage.request(method, target, host: hostHeader, contentType: contentType, body: body)
        let sealed: Result<[UInt8], GatewayError> = state.withLock { state in
            if let closed = state.closed { return .failure(closed) }
            state.answered = nil
            guard var cipher = state.cipher else { return .success(plain) }
            do throws(HAPError) {
                let bytes = try cipher.seal(plain)
                state.cipher = cipher
                return .success(bytes)
            } catch {
                return .failure(GatewayError(.internal, message: "Could not encrypt a request to '\(label)': \(error)"))
            }
        }
        let bytes = try sealed.get()
        do {
            try await outbound.write(ByteBuffer(bytes: bytes))
        } catch {
            let failure = GatewayError(.vendorUnreachable, message: "The connection to '\(label)' failed while sending \(method) \(target): \(error)")
            close(failure)
            throw failure
        }
        let timer = Task { [time, label] in
            try await time.sleep(for: timeout)
            var late = GatewayError(.vendorTimeout, message: "The HomeKit accessory '\(label)' did not answer \(method) \(target.prefix(60)) within \(Int(timeout.inSeconds)) s.")
            late.outcomeUnknown = true
            self.close(late)
        }
        defer { timer.cancel() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let ready = state.withLock { state -> Result<HAPMessage, any Error>? in
                    if let answered = state.answered {
                        state.answered = nil
                        return answered
                    }
                    if let closed = state.closed { return .failure(closed) }
                    state.waiting = continuation
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            self.close(GatewayError(.interrupted, message: "The request to '\(label)' was cancelled."))
        }
    }

    /// Ends the connection: a waiting request fails (its outcome unknown: it may have run), the socket closes.
    func close(_ reason: GatewayError) {
        let waiter = state.withLock { state -> CheckedContinuation<HAPMessage, any Error>? in
            if state.closed == nil { state.closed = reason }
            defer { state.waiting = nil }
            return state.waiting
        }
        var unknown = reason
        unknown.outcomeUnknown = true
        waiter?.resume(throwing: unknown)
        channel.close(promise: nil)
    }
}

/// A first-in, first-out async lock: one request on the connection at a time.
final class Turnstile: Sendable {
    private struct State {
        var busy = false
        var queue: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    func enter() async throws {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> Bool in
                if !state.busy {
                    state.busy = true
                    return true
                }
                state.queue.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
        try Task.checkCancellation()
    }

    func leave() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.queue.isEmpty {
                state.busy = false
                return nil
            }
            return state.queue.removeFirst()
        }
        next?.resume()
    }
}
