import Dispatch

extension CacheStore {
    /// Runs synchronous store calls off Swift's cooperative threads and awaits their result.
    ///
    /// Every store method blocks while SQLite works, and with `synchronous = FULL` a commit waits for
    /// an fsync. Calling them from an actor or task directly would hold one of the (few) cooperative
    /// threads for that time; this hands the work to a Dispatch thread instead.
    ///
    ///     let inserted = try await store.run { try $0.enqueue(entry) }
    public func run<T: Sendable>(
        _ body: @escaping @Sendable (CacheStore) throws -> T
    ) async throws(CacheError) -> T {
        let result: Result<T, CacheError> = await withCheckedContinuation { continuation in
            DispatchQueue.global(qos: .utility).async {
                do {
                    continuation.resume(returning: .success(try body(self)))
                } catch {
                    continuation.resume(returning: .failure(CacheError.wrap(error, "store call failed")))
                }
            }
        }
        return try result.get()
    }
}
