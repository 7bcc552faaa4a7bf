import CMosquitto
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Lets a batch of publishes leave as a few TCP segments and a few network-loop passes instead of one of each per
/// message.
///
/// libmosquitto's network loop, woken by a byte per publish, writes each packet with a system call of its own and,
/// with Nagle off (the client's setting, so that answers never wait for a delayed ACK), as a segment of its own:
/// measured, that was most of the network thread's time on a busy gateway, and it made the broker read message by
/// message too. So while a burst runs (`MQTTClient.coalescingWrites`), the network thread waits after its pass
/// instead of waking for every packet; when the burst ends, it corks the socket, writes everything queued in one
/// pass, and uncorks it once libmosquitto's queue is empty, which sends it all as few segments. A burst is short (one
/// slice of vendor states, a millisecond or two), and the wait is bounded regardless. Outside bursts nothing
/// changes: a lone packet leaves at once. (A socket corked all the time and uncorked after every pass gained little:
/// without the wait, the network thread still ran a pass per packet.)
final class SocketCork: @unchecked Sendable {
    // @unchecked: `waiting` is only touched under `mutex`, and the pthread objects only through pthread calls.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private let bursts = Atomic<Int>(0)
    /// The longest the network thread holds back for one burst (it then goes on, as if the burst had ended).
    static let longestWait: Duration = .milliseconds(20)

    init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        #if !canImport(Darwin)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        #endif
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    // MARK: publishing threads

    func beginBurst() {
        bursts.add(1, ordering: .sequentiallyConsistent)
    }

    func endBurst() {
        guard bursts.subtract(1, ordering: .sequentiallyConsistent).newValue == 0 else { return }
        // Under the mutex, so the network thread cannot miss the wake between its check and its wait.
        pthread_mutex_lock(mutex)
        pthread_cond_broadcast(condition)
        pthread_mutex_unlock(mutex)
    }

    // MARK: network thread

    /// Holds what is written to `socket` until `uncork`. False when the socket cannot be corked (not TCP).
    static func cork(_ socket: Int32) -> Bool {
        socket >= 0 && lbs_tcp_cork(socket, 1) == 0
    }

    /// Sends what the socket holds; later writes leave at once again.
    static func uncork(_ socket: Int32) {
        if socket >= 0 { _ = lbs_tcp_cork(socket, 0) }
    }

    /// Returns when no burst runs, or after `longestWait`; true when a burst ran.
    func waitWhileBursting() -> Bool {
        guard bursts.load(ordering: .sequentiallyConsistent) > 0 else { return false }
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let total = Int64(deadline.tv_nsec) + Self.longestWait.totalNanoseconds
        deadline.tv_sec += Int(total / 1_000_000_000)
        deadline.tv_nsec = Int(total % 1_000_000_000)
        pthread_mutex_lock(mutex)
        while bursts.load(ordering: .sequentiallyConsistent) > 0 {
            if pthread_cond_timedwait(condition, mutex, &deadline) == ETIMEDOUT { break }
        }
        pthread_mutex_unlock(mutex)
        return true
    }
}
