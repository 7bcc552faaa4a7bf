#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayCore
import GatewayModel
import HAP
import Logging
import Synchronization

/// What the bridge's HAP server and its gateway extension share: the stored identity and pairings, and a way
/// into the extension (on the gateway's actor) for the database, reads and writes.
final class BridgeRuntime: Sendable {
    let settings: HomeKitBridgeSettings
    let store: BridgeStore
    let logger: Logger
    private let state = Mutex(State())

    private struct State {
        var snapshot: BridgeStore.Snapshot?
        weak var bridge: BridgeExtension?
        var server: HAPAccessoryServer?
        var advertiser: BridgeAdvertiser?
        var loadWaiters: [CheckedContinuation<Void, Never>] = []
    }

    init(settings: HomeKitBridgeSettings, store: BridgeStore, logger: Logger) {
        self.settings = settings
        self.store = store
        self.logger = logger
    }

    func attach(_ bridge: BridgeExtension) { state.withLock { $0.bridge = bridge } }
    func attach(server: HAPAccessoryServer?, advertiser: BridgeAdvertiser?) {
        state.withLock {
            $0.server = server
            $0.advertiser = advertiser
        }
    }

    var server: HAPAccessoryServer? { state.withLock { $0.server } }
    var snapshot: BridgeStore.Snapshot? { state.withLock { $0.snapshot } }
    private var bridge: BridgeExtension? { state.withLock { $0.bridge } }

    /// Loads the stored identity and pairings once; everyone who asks waits for it.
    func load() async throws -> BridgeStore.Snapshot {
        if let snapshot { return snapshot }
        let loaded = try await store.load()
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            if state.snapshot == nil { state.snapshot = loaded }
            defer { state.loadWaiters = [] }
            return state.loadWaiters
        }
        for waiter in waiters { waiter.resume() }
        return snapshot ?? loaded
    }

    /// Waits until `load` ran (the extension needs the stored aids before it numbers devices).
    func loaded() async -> BridgeStore.Snapshot {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Bool in
                if state.snapshot != nil { return true }
                state.loadWaiters.append(continuation)
                return false
            }
            if ready { continuation.resume() }
        }
        return snapshot ?? BridgeStore.Snapshot(identity: .generate(), pairings: [], aids: [:], configNumber: 1, digest: "", failedAttempts: 0)
    }

    /// Changes the stored snapshot at once (everyone sees the change), then persists what changed; the mDNS record
    /// follows (`sf`, `c#`). Returns what `change` returned.
    func update<T: Sendable>(_ change: @Sendable (inout BridgeStore.Snapshot) -> T) async -> T? {
        guard let (before, after, result) = mutate(change) else { return nil }
        await persist(before: before, after: after)
        return result
    }

    private func mutate<T>(_ change: (inout BridgeStore.Snapshot) -> T) -> (BridgeStore.Snapshot, BridgeStore.Snapshot, T)? {
        state.withLock { state in
            guard var snapshot = state.snapshot else { return nil }
            let before = snapshot
            let result = change(&snapshot)
            state.snapshot = snapshot
            return (before, snapshot, result)
        }
    }

    private func persist(before: BridgeStore.Snapshot, after: BridgeStore.Snapshot) async {
        do {
            if before.pairings != after.pairings { try await store.save(pairings: after.pairings) }
            if before.aids != after.aids { try await store.save(aids: after.aids) }
            if before.configNumber != after.configNumber || before.digest != after.digest || before.failedAttempts != after.failedAttempts {
                try await store.save(configNumber: after.configNumber, digest: after.digest, failedAttempts: after.failedAttempts)
            }
        } catch {
            logger.error("homekit bridge: could not store its state in the cache: \(error)")
        }
        if before.pairings.isEmpty != after.pairings.isEmpty || before.configNumber != after.configNumber {
            await state.withLock { $0.advertiser }?.update(configNumber: after.configNumber, paired: !after.pairings.isEmpty)
        }
    }

    // MARK: Calls into the gateway

    func accessoriesJSON() async -> [UInt8] {
        guard let bridge else { return Array(#"{"accessories":[]}"#.utf8) }
        return await bridge.accessoriesJSON()
    }

    func read(_ ids: [(aid: Int, iid: Int)]) async -> [CharacteristicValue] {
        guard let bridge else { return ids.map { CharacteristicValue(aid: $0.aid, iid: $0.iid, status: HAPStatus.communicationFailure) } }
        return await bridge.read(ids)
    }

    func write(_ items: [CharacteristicValue], session: UInt64) async -> [CharacteristicValue] {
        guard let bridge else { return items.map { CharacteristicValue(aid: $0.aid, iid: $0.iid, status: HAPStatus.communicationFailure) } }
        return await bridge.write(items, session: session)
    }

    func notifies(aid: Int, iid: Int) async -> Bool? {
        await bridge?.notifies(aid: aid, iid: iid)
    }

    func describe(aid: Int, iid: Int) async -> [String: JSONValue]? {
        await bridge?.describe(aid: aid, iid: iid)
    }
}

/// The server's view of the bridge (`HAPAccessoryDelegate`), once its identity is loaded.
struct BridgeDelegate: HAPAccessoryDelegate {
    let runtime: BridgeRuntime
    let identity: AccessoryIdentity
    let setupCode: String
    /// HomeKit keeps at most 16 pairings per accessory.
    static let maxPairings = 16

    func pairings() async -> [ControllerPairing] { runtime.snapshot?.pairings ?? [] }

    func addPairing(_ pairing: ControllerPairing) async -> Bool {
        await runtime.update { snapshot -> Bool in
            if let index = snapshot.pairings.firstIndex(where: { $0.pairingID == pairing.pairingID }) {
                snapshot.pairings[index] = pairing
                return true
            }
            guard snapshot.pairings.count < Self.maxPairings else { return false }
            snapshot.pairings.append(pairing)
            return true
        } ?? false
    }

    /// Removing the last admin unpairs the bridge: every pairing goes (as HAP-NodeJS and HomeKitADK do).
    func removePairing(_ id: String) async {
        await runtime.update { snapshot in
            snapshot.pairings.removeAll { $0.pairingID == id }
            if !snapshot.pairings.contains(where: \.isAdmin) { snapshot.pairings = [] }
        }
    }

    func failedPairSetup() async -> Int {
        await runtime.update { snapshot -> Int in
            snapshot.failedAttempts += 1
            return snapshot.failedAttempts
        } ?? 0
    }

    func failedPairSetups() async -> Int { runtime.snapshot?.failedAttempts ?? 0 }
    func accessoriesJSON() async -> [UInt8] { await runtime.accessoriesJSON() }
    func read(_ ids: [(aid: Int, iid: Int)]) async -> [CharacteristicValue] { await runtime.read(ids) }
    func write(_ items: [CharacteristicValue], session: UInt64) async -> [CharacteristicValue] { await runtime.write(items, session: session) }
    func notifies(aid: Int, iid: Int) async -> Bool? { await runtime.notifies(aid: aid, iid: iid) }
    func describe(aid: Int, iid: Int) async -> [String: JSONValue]? { await runtime.describe(aid: aid, iid: iid) }
    func identify() async { runtime.logger.notice("homekit bridge: identify") }
}
