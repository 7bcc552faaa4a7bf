import CMosquitto
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A pthread mutex and condition on CLOCK_MONOTONIC: waits with a deadline that a change of the wall clock cannot
/// move. The state a waiter checks is changed under the mutex (`change`), so no wake-up can fall between a check and
/// the wait.
final class MonotonicCondition: @unchecked Sendable {
    // @unchecked: the pthread objects are only touched through pthread calls, which synchronize.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

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

    /// Waits while `blocked` holds (asked under the mutex), at most `duration`.
    func wait(for duration: Duration, while blocked: () -> Bool) {
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let total = Int64(deadline.tv_nsec) + max(0, duration.totalNanoseconds)
        deadline.tv_sec += Int(total / 1_000_000_000)
        deadline.tv_nsec = Int(total % 1_000_000_000)
        pthread_mutex_lock(mutex)
        while blocked() {
            if pthread_cond_timedwait(condition, mutex, &deadline) == ETIMEDOUT { break }
        }
        pthread_mutex_unlock(mutex)
    }

    /// Runs `change` under the mutex and wakes every waiter.
    func broadcast(after change: () -> Void = {}) {
        pthread_mutex_lock(mutex)
        change()
        pthread_cond_broadcast(condition)
        pthread_mutex_unlock(mutex)
    }
}

/// A sleep that another thread can cut short.
final class InterruptibleSleep: @unchecked Sendable {
    // @unchecked: `interrupted` is only touched under the condition's mutex.
    private let condition = MonotonicCondition()
    private var interrupted = false

    /// Sleeps up to `duration`; returns early (and keeps returning at once) after `interrupt()`.
    func sleep(for duration: Duration) {
        condition.wait(for: duration) { !interrupted }
    }

    /// Wakes the sleeper now and makes later sleeps return at once.
    func interrupt() {
        condition.broadcast { interrupted = true }
    }
}

/// Starts a detached pthread running `body`. Nobody joins it: it signals its own end instead,
/// so no thread can ever wait for itself.
func startDetachedThread(_ body: @escaping @Sendable () -> Void) -> Bool {
    final class Context: Sendable {
        let body: @Sendable () -> Void
        init(body: @escaping @Sendable () -> Void) { self.body = body }
    }
    let context = Unmanaged.passRetained(Context(body: body)).toOpaque()
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    defer { pthread_attr_destroy(&attributes) }
    var thread = pthread_t()
    let rc = pthread_create(&thread, &attributes, { raw in
        guard let raw else { return nil }
        let context = Unmanaged<Context>.fromOpaque(raw).takeRetainedValue()
        context.body()
        return nil
    }, context)
    if rc != 0 {
        Unmanaged<Context>.fromOpaque(context).release()
        return false
    }
    return true
}
