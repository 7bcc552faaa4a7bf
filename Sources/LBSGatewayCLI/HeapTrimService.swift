import CMalloc
import GatewayCore
import ServiceLifecycle

/// Returns the heap's free pages to the kernel a few seconds after start and then every minute. The start-up
/// burst (every device's discovery and state queued at once: up to ~6 MB at 1,000 devices, depending on how
/// fast the broker reads) is freed within seconds, but glibc keeps freed memory that sits below live
/// allocations; without this the process's resident size depends on how that burst happened to go.
struct HeapTrimService<C: Clock>: NamedService where C.Duration == Duration {
    var clock: C
    var first: Duration = .seconds(5)
    var every: Duration = .seconds(60)

    func run() async throws {
        var wait = first
        // Ends at the group's graceful shutdown (or cancellation): the sleep is cut short and nothing is trimmed.
        while await sleep(wait) {
            _ = lbs_malloc_trim()
            wait = every
        }
    }

    private func sleep(_ duration: Duration) async -> Bool {
        let slept: Bool? = try? await cancelWhenGracefulShutdown { [clock] in
            try await clock.sleep(for: duration)
            return true
        }
        return slept == true && !Task.isCancelled
    }
}
