/// The short-lived tasks of the core and its extensions (coalescing timers, command lanes, requests),
/// tracked so shutdown can cancel and await them: nothing runs untracked past the gateway's life.
@GatewayActor
package final class TaskSet {
    private var tasks: [UInt64: Task<Void, Never>] = [:]
    private var nextID: UInt64 = 0
    package private(set) var closed = false

    /// Starts `operation` on the gateway's executor; ignored once the set is closed (shutting down).
    package func spawn(_ operation: @escaping @GatewayActor () async -> Void) {
        guard !closed else { return }
        nextID += 1
        let id = nextID
        tasks[id] = Task { @GatewayActor in
            await operation()
            self.tasks[id] = nil
        }
    }

    package var count: Int { tasks.count }

    /// Refuses new tasks and cancels the running ones (they end on their own; nothing waits for them).
    package func cancelAll() {
        closed = true
        for task in tasks.values { task.cancel() }
    }

    /// Refuses new tasks, cancels the running ones and waits for them to end.
    package func cancelAndWait() async {
        closed = true
        // All first: a task may be waiting for another one (a command for its timer).
        for task in tasks.values { task.cancel() }
        while let (id, task) = tasks.first {
            await task.value
            tasks[id] = nil
        }
    }
}
