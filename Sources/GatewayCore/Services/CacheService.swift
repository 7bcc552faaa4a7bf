import Cache
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import ServiceLifecycle

/// Owns the cache writer and the retention job. It sits before `GatewayService` in the group,
/// so on shutdown it stops last, after the gateway handed over its final batch.
public struct CacheService: NamedService {
    package let persistence: CacheLink
    package let retention: RetentionSettings

    public init(persistence: CacheLink, retention: RetentionSettings = .init()) {
        self.persistence = persistence
        self.retention = retention
    }

    public func run() async throws {
        let persistence = self.persistence
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await persistence.run() }
                let retention = self.retention
                group.addTask {
                    await persistence.runRetention(
                        every: .milliseconds(Int64(retention.interval * 1000)), maxRows: retention.maxRowsPerRun,
                        policy: retention.policy, clock: ContinuousClock()
                    )
                }
                // The writer ends when `finish()` is called; then stop the retention loop too.
                await group.next()
                group.cancelAll()
            }
        } onGracefulShutdown: {
            persistence.finish()
        }
        try? persistence.store.checkpoint()
        // After the gateway's last outbox commit (it stops first): what the journal holds is in the database.
        persistence.journal?.shutdown()
    }
}
