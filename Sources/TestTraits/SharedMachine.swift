#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import Testing

/// Suites that start real brokers, gateways, simulators or long real-time waits share the machine: with
/// `.integration`, at most `SharedMachine.width` of them run at once, so `swift test` in parallel on two cores
/// does not start dozens of processes together and time them all out. Unit suites run unlimited beside them.
///
/// The slot is taken around the whole suite (not each test): a test's time limit then never counts the wait
/// for a slot, and the suite's own tests still run in parallel with each other.
public struct SharedMachine: SuiteTrait, TestScoping {
    /// Suites holding a slot at once: one more than the machine's cores (at least 3), or `LBS_TEST_SUITES`.
    public static let width: Int = {
        if let text = getenv("LBS_TEST_SUITES").map({ String(cString: $0) }), let width = Int(text), width > 0 { return width }
        return max(3, sysconf(Int32(_SC_NPROCESSORS_ONLN)) + 1)
    }()

    public var isRecursive: Bool { false }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        await Slots.shared.acquire()
        defer { Slots.shared.release() }
        try await function()
    }
}

extension Trait where Self == SharedMachine {
    /// Runs the suite in one of the machine's few integration slots (see `SharedMachine`).
    public static var integration: Self { SharedMachine() }
}

/// A counting semaphore whose waiters are served in arrival order.
final class Slots: Sendable {
    static let shared = Slots(count: SharedMachine.width)

    private struct State {
        var free: Int
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    private let state: Mutex<State>

    init(count: Int) { state = Mutex(State(free: count)) }

    func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let granted = state.withLock { state -> Bool in
                if state.free > 0 {
                    state.free -= 1
                    return true
                }
                state.waiting.append(continuation)
                return false
            }
            if granted { continuation.resume() }
        }
    }

    func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiting.isEmpty {
                state.free += 1
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }
}
