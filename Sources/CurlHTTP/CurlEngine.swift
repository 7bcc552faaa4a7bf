import CCurl
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs one libcurl multi handle on a dedicated thread.
///
/// Callers hand transfers over through a locked queue and `curl_multi_wakeup`, which libcurl allows from
/// any thread; everything else about the multi handle and its easy handles happens on the engine thread.
final class CurlEngine: Sendable {
    private struct Inbox {
        var submitted: [Transfer] = []
        var cancelled: [Transfer] = []
        var stopping = false
    }

    /// The multi handle pointer; only the engine thread uses it, except for the thread-safe `curl_multi_wakeup`.
    private struct MultiHandle: @unchecked Sendable {
        let pointer: UnsafeMutableRawPointer
    }

    private let inbox = Mutex(Inbox())
    private let multi: MultiHandle

    init() throws(HTTPError) {
        try CurlGlobal.initialize()
        guard let pointer = lbs_curl_multi_init() else {
            throw HTTPError(kind: .other(Int(CURLE_FAILED_INIT.rawValue)), message: "curl_multi_init failed")
        }
        multi = MultiHandle(pointer: pointer)
        try startThread()
    }

    /// Queues a configured transfer; returns false when the engine is shutting down.
    func submit(_ transfer: Transfer, continuation: CheckedContinuation<TransferOutcome, any Error>) -> Bool {
        let accepted = inbox.withLock { inbox in
            guard !inbox.stopping else { return false }
            transfer.continuation = continuation
            inbox.submitted.append(transfer)
            return true
        }
        if accepted {
            lbs_curl_multi_wakeup(multi.pointer)
        }
        return accepted
    }

    /// Aborts a transfer from any thread; it resumes with `.cancelled` unless it already finished.
    func cancel(_ transfer: Transfer) {
        transfer.requestCancel()
        let accepted = inbox.withLock { inbox in
            guard !inbox.stopping else { return false }
            inbox.cancelled.append(transfer)
            return true
        }
        if accepted {
            lbs_curl_multi_wakeup(multi.pointer)
        }
    }

    /// Stops the engine thread; in-flight transfers resume with `.cancelled`.
    func stop() {
        let wasRunning = inbox.withLock { inbox in
            defer { inbox.stopping = true }
            return !inbox.stopping
        }
        if wasRunning {
            lbs_curl_multi_wakeup(multi.pointer)
        }
    }

    private func startThread() throws(HTTPError) {
        // The thread owns a strong reference until its loop ends, so the multi handle outlives every transfer.
        let context = Unmanaged.passRetained(self).toOpaque()
        var thread = pthread_t()
        let status = pthread_create(&thread, nil, { context in
            guard let context else { return nil }
            let engine = Unmanaged<CurlEngine>.fromOpaque(context).takeRetainedValue()
            engine.runLoop()
            return nil
        }, context)
        guard status == 0 else {
            Unmanaged<CurlEngine>.fromOpaque(context).release()
            lbs_curl_multi_cleanup(multi.pointer)
            throw HTTPError(kind: .other(Int(CURLE_FAILED_INIT.rawValue)), message: "could not start the HTTP thread (errno \(status))")
        }
        pthread_detach(thread)
    }

    private func runLoop() {
        let multi = multi.pointer
        var active: [UnsafeMutableRawPointer: Transfer] = [:]
        var running: Int32 = 0
        var remaining: Int32 = 0

        while true {
            let (submitted, cancelled, stopping) = inbox.withLock { inbox in
                defer {
                    inbox.submitted.removeAll()
                    inbox.cancelled.removeAll()
                }
                return (inbox.submitted, inbox.cancelled, inbox.stopping)
            }

            for transfer in submitted {
                if stopping || transfer.isCancelRequested {
                    transfer.fail(Self.cancelledError(stopping: stopping))
                    continue
                }
                let result = lbs_curl_multi_add_handle(multi, transfer.easy)
                guard result == CURLM_OK else {
                    let text = lbs_curl_multi_strerror(result).map { String(cString: $0) } ?? "curl multi error"
                    transfer.fail(HTTPError(kind: .other(Int(result.rawValue)), message: "could not start transfer: \(text)"))
                    continue
                }
                active[transfer.easy] = transfer
            }

            for transfer in cancelled {
                // Identity check: a finished transfer's handle address could belong to a newer one.
                guard let current = active[transfer.easy], current === transfer else { continue }
                active[transfer.easy] = nil
                lbs_curl_multi_remove_handle(multi, transfer.easy)
                transfer.fail(Self.cancelledError(stopping: false))
            }

            if stopping {
                for (easy, transfer) in active {
                    lbs_curl_multi_remove_handle(multi, easy)
                    transfer.fail(Self.cancelledError(stopping: true))
                }
                active.removeAll()
                break
            }

            _ = lbs_curl_multi_perform(multi, &running)

            while let message = lbs_curl_multi_info_read(multi, &remaining) {
                guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
                // Read the result before removing the handle: the message belongs to the handle.
                let code = lbs_curlmsg_result(message)
                guard let transfer = active.removeValue(forKey: easy) else { continue }
                lbs_curl_multi_remove_handle(multi, easy)
                transfer.complete(with: code)
            }

            // Sleeps until socket activity, curl's next timer, a wakeup, or at most a second.
            _ = lbs_curl_multi_poll(multi, nil, 0, 1000, nil)
        }

        lbs_curl_multi_cleanup(multi)
    }

    private static func cancelledError(stopping: Bool) -> HTTPError {
        HTTPError(kind: .cancelled, message: stopping ? "the HTTP client was shut down" : "the request was cancelled")
    }
}

/// Loads libcurl and runs `curl_global_init`, once per process, before the first handle.
enum CurlGlobal {
    private static let result: CURLcode = lbs_curl_global_init()

    static func initialize() throws(HTTPError) {
        let code = result
        guard code == CURLE_OK else {
            let reason = lbs_curl_load_error().map { String(cString: $0) } ?? "curl_global_init failed"
            throw HTTPError(kind: .other(Int(code.rawValue)), message: reason)
        }
    }
}
