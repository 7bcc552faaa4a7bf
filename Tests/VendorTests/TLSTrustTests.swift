import ConsciousnessSimulator
import CurlHTTP
import Foundation
import GatewayModel
import GatewayTesting
import Resilience
import TestTraits
import Testing
import VendorConsciousness
import VendorKit
import VendorTesting

/// The consciousness simulator behind a real TLS front (socat), and a vendor on an injected clock.
private struct TLSRig {
    let simulator: ConsciousnessSimulator
    let front: TLSFront
    let vendor: ConsciousnessVendor
    let store: InMemoryTLSPinStore
    let log: EventLog

    /// `tls` picks the policy once the front (and so its key) exists.
    static func start(
        store: InMemoryTLSPinStore = InMemoryTLSPinStore(), tls: (TLSFront) -> TLSPolicy
    ) async throws -> TLSRig {
        let password = "pw-\(UUID().uuidString)"
        let simulator = ConsciousnessSimulator(configuration: .init(password: password))
        let simulatorPort = try await simulator.start()
        let front = try await TLSFront.started(targetPort: Int(simulatorPort))
        let log = EventLog()
        let options = ConsciousnessOptions(
            url: front.url, username: "admin", password: VendorSecret(password), timeout: .seconds(5),
            breaker: CircuitBreaker.Settings(window: .seconds(60), minimumCalls: 20, failureRatio: 0.5, openDuration: .seconds(30)),
            retry: .none, tls: tls(front)
        )
        let vendor = try ConsciousnessVendor(instanceID: "consciousness", options: options, sink: log.sink, clock: ManualClock(), pinStore: store)
        return TLSRig(simulator: simulator, front: front, vendor: vendor, store: store, log: log)
    }

    func stop() async {
        vendor.http.client.shutdown()
        await front.stop()
        await simulator.stop()
    }
}

@Suite(.integration) struct TLSPolicyTests {
    @Test func pinsAreAcceptedBareOrInCurlFormAndMustBe32Bytes() {
        let digest = Data((0..<32).map { UInt8($0) }).base64EncodedString()
        #expect(TLSPolicy.normalizedPin(digest) == digest)
        #expect(TLSPolicy.normalizedPin("sha256//\(digest)") == digest)
        #expect(TLSPolicy.normalizedPin("  SHA256//\(digest)\n") == digest)
        #expect(TLSPolicy.normalizedPin(Data(repeating: 1, count: 31).base64EncodedString()) == nil)
        #expect(TLSPolicy.normalizedPin(Data(repeating: 1, count: 33).base64EncodedString()) == nil)
        #expect(TLSPolicy.normalizedPin("not base64 at all!") == nil)
        #expect(TLSPolicy.normalizedPin("sha256//") == nil)
        #expect(TLSPolicy.normalizedPin("") == nil)
    }

    @Test func pinsAreKeyedByHostAndPortWithSchemeDefaults() {
        #expect(TLSTrustResolver.hostPort(of: "https://192.168.1.20:8443/api/v1") == "192.168.1.20:8443")
        #expect(TLSTrustResolver.hostPort(of: "https://Powerwall.Local") == "powerwall.local:443")
        #expect(TLSTrustResolver.hostPort(of: "HTTPS://envoy.local/?x=1") == "envoy.local:443")
        #expect(TLSTrustResolver.hostPort(of: "http://house.local") == "house.local:80")
        #expect(TLSTrustResolver.hostPort(of: "https://[fe80::1]:8443/x") == "[fe80::1]:8443")
        #expect(TLSTrustResolver.hostPort(of: "https://[::1]") == "[::1]:443")
        #expect(TLSTrustResolver.hostPort(of: "ftp://host") == nil)
        #expect(TLSTrustResolver.hostPort(of: "https://:443") == nil)
        #expect(TLSTrustResolver.hostPort(of: "https://host:0") == nil)
        #expect(TLSTrustResolver.hostPort(of: "https://host:99999") == nil)
        #expect(TLSTrustResolver.hostPort(of: "https://host:https") == nil)
        #expect(TLSTrustResolver.hostPort(of: "https://fe80::1/") == nil)
    }
}

@Suite(.integration, .enabled(if: TLSFront.isAvailable), .timeLimit(.minutes(2)))
struct TLSTrustTests {
    @Test func firstUsePinsTheKeyAndAChangedKeyIsRefusedUntilThePinIsForgotten() async throws {
        let rig = try await TLSRig.start { _ in .firstUse }
        defer { Task { await rig.stop() } }
        let firstKey = rig.front.pin

        try await rig.vendor.poll()
        #expect(rig.store.all == [rig.front.hostPort: firstKey])
        #expect(rig.log.inventories.last?.isEmpty == false)
        #expect(try await TLSTrustResolver.presentedPin(url: rig.front.url, vendorID: "consciousness") == firstKey)

        // The device comes back with another key: nothing is accepted and the pin stays.
        try await rig.front.restart(newKey: true)
        #expect(rig.front.pin != firstKey)
        rig.log.clear()
        let requests = rig.simulator.counters.requests
        let refused = await gatewayError { try await rig.vendor.poll() }
        #expect(refused?.code == .tlsPinMismatch)
        #expect(refused?.suggestion.contains("lbs-gateway tls-pin --vendor consciousness --forget") == true)
        #expect(rig.vendor.http.health.lastError?.code == .tlsPinMismatch)
        #expect(rig.simulator.counters.requests == requests, "a request reached the server behind a changed key")
        #expect(rig.log.states.isEmpty)
        let again = await gatewayError { try await rig.vendor.poll() }
        #expect(again?.code == .tlsPinMismatch)
        #expect(rig.store.all == [rig.front.hostPort: firstKey])

        // The operator accepts the new key: the next attempt pins it, without a restart.
        #expect(rig.store.forgetPin(for: rig.front.hostPort) == firstKey)
        try await rig.vendor.poll()
        #expect(rig.store.all == [rig.front.hostPort: rig.front.pin])
        #expect(rig.vendor.http.health.state == .ok || rig.vendor.http.health.state == .degraded)
        #expect(rig.log.states.isEmpty == false)
    }

    @Test func aStoredPinIsUsedInsteadOfTheKeyPresentedNow() async throws {
        let wrong = Data(repeating: 7, count: 32).base64EncodedString()
        let store = InMemoryTLSPinStore()
        let rig = try await TLSRig.start(store: store) { _ in .firstUse }
        defer { Task { await rig.stop() } }
        _ = try await store.savePinIfAbsent(wrong, for: rig.front.hostPort)
        let refused = await gatewayError { try await rig.vendor.poll() }
        #expect(refused?.code == .tlsPinMismatch)
        #expect(store.all == [rig.front.hostPort: wrong])
    }

    @Test func configuredPinIsEnforced() async throws {
        let exact = try await TLSRig.start { .pinned($0.pin) }
        defer { Task { await exact.stop() } }
        try await exact.vendor.poll()
        #expect(exact.log.inventories.last?.isEmpty == false)
        #expect(exact.store.all.isEmpty)

        let wrong = try await TLSRig.start { _ in .pinned(Data(repeating: 7, count: 32).base64EncodedString()) }
        defer { Task { await wrong.stop() } }
        let refused = await gatewayError { try await wrong.vendor.poll() }
        #expect(refused?.code == .tlsPinMismatch)
        #expect(refused?.suggestion.contains("tls.pin") == true)
        #expect(wrong.simulator.counters.requests == 0)
        #expect(wrong.log.inventories.isEmpty)
    }

    @Test func systemTrustRefusesASelfSignedServerWithAHint() async throws {
        let rig = try await TLSRig.start { _ in .system }
        defer { Task { await rig.stop() } }
        let refused = await gatewayError { try await rig.vendor.poll() }
        #expect(refused?.code == .tlsError)
        #expect(refused?.suggestion.contains("first_use") == true)
        #expect(rig.simulator.counters.requests == 0)
        #expect(rig.log.inventories.isEmpty)
        #expect(rig.store.all.isEmpty)
    }

    @Test func aFrontThatIsDownIsAnOrdinaryConnectFailure() async throws {
        let rig = try await TLSRig.start { _ in .firstUse }
        defer { Task { await rig.stop() } }
        await rig.front.stop()
        let refused = await gatewayError { try await rig.vendor.poll() }
        #expect(refused?.code == .vendorUnreachable)
        #expect(refused?.countsAgainstVendor == true)
        #expect(rig.store.all.isEmpty)
        #expect(rig.vendor.http.breaker.snapshot.failuresInWindow == 1)
        // Back up: the first connection pins it.
        try await rig.front.restart(newKey: false)
        try await rig.vendor.poll()
        #expect(rig.store.all == [rig.front.hostPort: rig.front.pin])
    }
}

/// A loopback listener that never accepts: connections complete in the kernel and then hang, like a device
/// stuck before its TLS handshake.
private final class SilentListener: Sendable {
    let fd: Int32
    let port: Int

    init() throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let fd = fd
        let listening = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && listen(fd, 4) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard fd >= 0, listening else { throw TestSupportError("silent listener: \(String(cString: strerror(errno)))") }
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(fd) }

    /// True once a client connected (its connection waits in the backlog).
    var hasPendingConnection: Bool {
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, 0) == 1
    }
}

@Suite(.integration) struct TLSFirstUseCancellationTests {
    @Test func cancellingACallDuringTheFirstUseFetchEndsItAtOnce() async throws {
        let silent = try SilentListener()
        let client = try HTTPClient()
        defer { client.shutdown() }
        let store = InMemoryTLSPinStore()
        let http = VendorHTTP(
            vendorID: "device", client: client, settings: .init(retry: .none, tls: .firstUse), sink: EventLog().sink,
            time: TimeSource(ManualClock()), pinStore: store
        )
        // The fetch may take the whole connect timeout (30 s) unless cancellation reaches it.
        let request = HTTPClientRequest(url: "https://127.0.0.1:\(silent.port)/", connectTimeout: .seconds(30), timeout: .seconds(30))
        let started = ContinuousClock.now
        let call = Task { await gatewayError { _ = try await http.send(request, use: .poll) } }
        try await waitUntil("the first-use fetch connected", timeout: .seconds(10)) { silent.hasPendingConnection }
        call.cancel()
        let error = await call.value
        #expect(error?.code == .interrupted)
        #expect(ContinuousClock.now - started < .seconds(20))
        #expect(store.all.isEmpty)
        #expect(http.breaker.snapshot.failuresInWindow == 0)
    }
}
