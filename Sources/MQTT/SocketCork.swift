import CMosquitto
import Synchronization

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
final class SocketCork: Sendable {
    private let burstEnded = MonotonicCondition()
    private let bursts = Atomic<Int>(0)
    /// The longest the network thread holds back for one burst (it then goes on, as if the burst had ended).
    static let longestWait: Duration = .milliseconds(20)

    // MARK: publishing threads

    func beginBurst() {
        bursts.add(1, ordering: .sequentiallyConsistent)
    }

    func endBurst() {
        guard bursts.subtract(1, ordering: .sequentiallyConsistent).newValue == 0 else { return }
        // Under the condition's mutex, so the network thread cannot miss the wake between its check and its wait.
        burstEnded.broadcast()
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
        burstEnded.wait(for: Self.longestWait) { bursts.load(ordering: .sequentiallyConsistent) > 0 }
        return true
    }
}
