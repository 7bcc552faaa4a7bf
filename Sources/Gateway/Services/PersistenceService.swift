import Cache
import Foundation
import Logging
import ServiceLifecycle

/// Owns the cache writer and the retention job. It sits before `GatewayService` in the group,
/// so on shutdown it stops last, after the gateway handed over its final batch.
public struct PersistenceService: Service {
    let persistence: Persistence
    let retentionInterval: Duration
    let retentionMaxRows: Int

    public init(persistence: Persistence, retentionInterval: Duration = .seconds(600), retentionMaxRows: Int = 20_000) {
        self.persistence = persistence
        self.retentionInterval = retentionInterval
        self.retentionMaxRows = retentionMaxRows
    }

    public func run() async throws {
        let persistence = self.persistence
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await persistence.run() }
                group.addTask {
                    await persistence.runRetention(every: retentionInterval, maxRows: retentionMaxRows, clock: ContinuousClock())
                }
                // The writer ends when `finish()` is called; then stop the retention loop too.
                await group.next()
                group.cancelAll()
            }
        } onGracefulShutdown: {
            persistence.finish()
        }
        try? persistence.store.checkpoint()
    }
}
