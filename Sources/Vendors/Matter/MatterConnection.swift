#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
import Resilience
import Synchronization
import WSClient

/// One WebSocket connection to the Matter server: requests matched to their results by `message_id` (a string:
/// the server closes the socket on a number), each with a timeout; the server's first frame (`server_info`).
final class MatterConnection: Sendable {
    /// One request's answer: filled by the reader, the timeout or the close, whichever comes first.
    final class Slot<Value: Sendable>: Sendable {
        private struct Content {
            var result: Result<Value, any Error>?
            var waiter: CheckedContinuation<Value, any Error>?
        }

        private let content = Mutex(Content())

        func fill(_ result: Result<Value, any Error>) {
            let waiter = content.withLock { content -> CheckedContinuation<Value, any Error>? in
                guard content.result == nil else { return nil }
                content.result = result
                defer { content.waiter = nil }
                return content.waiter
            }
            waiter?.resume(with: result)
        }

        func wait() async throws -> Value {
            try await withCheckedThrowingContinuation { continuation in
                let ready = content.withLock { content -> Result<Value, any Error>? in
                    if let result = content.result { return result }
                    content.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        }
    }

    private struct State {
        var pending: [String: Slot<MatterValue>] = [:]
        var closed: GatewayError?
    }

    private let outbound: WebSocketOutboundWriter
    private let info = Slot<MatterServerInfo>()
    private let state = Mutex(State())
    private let counter = Atomic<UInt64>(0)
    private let prefix = String(UInt32.random(in: 0...UInt32.max), radix: 36)

    /// Request and server-info timeouts run on the vendor's clock.
    private let time: TimeSource

    init(outbound: WebSocketOutboundWriter, time: TimeSource) {
        self.outbound = outbound
        self.time = time
    }

    /// The server's info, sent first on every connection.
    func serverInfo(timeout: Duration) async throws -> MatterServerInfo {
        let timer = Task { [time] in
            try await time.sleep(for: timeout)
            self.info.fill(.failure(GatewayError(.vendorTimeout, message: "The Matter server sent no server_info within \(Int(timeout.inSeconds)) s.")))
        }
        defer { timer.cancel() }
        return try await info.wait()
    }

    /// Sends `command` and waits for its result. A timeout after sending is `outcomeUnknown` (the server may
    /// have carried it out); an error answer becomes a `GatewayError` in the taxonomy.
    func request(_ command: String, args: [String: MatterValue]? = nil, timeout: Duration) async throws -> MatterValue {
        let id = prefix + "-" + String(counter.add(1, ordering: .relaxed).newValue)
        var message: [String: MatterValue] = ["message_id": .string(id), "command": .string(command)]
        if let args { message["args"] = .object(args) }
        let text = MatterValue.object(message).render()
        // The slot exists before the request is written, so an answer that comes at once is never lost.
        let slot = Slot<MatterValue>()
        let closed: GatewayError? = state.withLock { state in
            if let closed = state.closed { return closed }
            state.pending[id] = slot
            return nil
        }
        if let closed { throw closed }
        do {
            try await outbound.write(.text(text))
        } catch {
            fail(id, GatewayError(.vendorUnreachable, message: "The Matter server connection failed while sending \(command): \(error)"))
        }
        let timer = Task { [time] in
            try await time.sleep(for: timeout)
            var late = GatewayError(.vendorTimeout, message: "The Matter server did not answer \(command) within \(Int(timeout.inSeconds)) s.")
            late.outcomeUnknown = true
            self.fail(id, late)
        }
        defer { timer.cancel() }
        return try await slot.wait()
    }

    private func fail(_ id: String, _ error: GatewayError) {
        state.withLock { $0.pending.removeValue(forKey: id) }?.fill(.failure(error))
    }

    /// A result or error for one of our requests; false when it was no answer to a request.
    @discardableResult
    func deliver(_ message: MatterIncoming) -> Bool {
        guard let id = message.message_id else { return false }
        guard let slot = state.withLock({ $0.pending.removeValue(forKey: id) }) else { return true }
        if let code = message.error_code {
            slot.fill(.failure(Self.error(code: code, details: message.details ?? "")))
        } else {
            slot.fill(.success(message.result ?? .null))
        }
        return true
    }

    func deliver(serverInfo: MatterServerInfo) { info.fill(.success(serverInfo)) }

    /// The connection ended: every request still waiting fails (its outcome unknown: it may have run).
    func close(_ reason: GatewayError) {
        let waiters = state.withLock { state in
            state.closed = reason
            defer { state.pending = [:] }
            return Array(state.pending.values)
        }
        var unknown = reason
        unknown.outcomeUnknown = true
        for slot in waiters { slot.fill(.failure(unknown)) }
        info.fill(.failure(reason))
    }

    /// python-matter-server's error codes (`common/errors.py`) in the gateway's taxonomy.
    static func error(code: Int, details: String) -> GatewayError {
        let detail = details.isEmpty ? "" : ": \(GatewayError.clip(details))"
        switch code {
        case 3:
            // The node is not reachable now: the device, not the server, is unwell.
            return GatewayError(.vendorUnavailable, message: "The Matter node is not available\(detail).",
                                suggestion: "Check that the device has power and network; the server reconnects to it on its own.",
                                countsAgainstVendor: false)
        case 4:
            return GatewayError(.vendorUnreachable, message: "The Matter server cannot resolve the node on the network\(detail).", countsAgainstVendor: false)
        case 5:
            return GatewayError(.notFound, message: "The Matter server does not know this node\(detail).")
        case 8, 9:
            return GatewayError(.badRequest, message: "The Matter server refused the request (code \(code))\(detail).")
        case 6:
            return GatewayError(.badRequest, message: "The Matter server reports a version mismatch\(detail).",
                                suggestion: "Run a python-matter-server (or matterjs-server) with schema 11 or newer.")
        default:
            // 0 (unknown, and SDK errors without their own code) and 7 (SDK stack error): the device or the
            // SDK refused the command.
            return GatewayError(.vendorRejected, message: "The Matter server could not carry out the request (code \(code))\(detail).",
                                suggestion: "Check the device's log in the Matter server; the command may not fit the device.")
        }
    }
}
