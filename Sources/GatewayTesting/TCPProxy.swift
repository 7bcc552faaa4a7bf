import GatewayModel
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A loopback TCP forwarder in front of a server (e.g. the test broker) that can cut every
/// connection abruptly: the broker sees the client vanish without DISCONNECT (so it sends the will),
/// and the client sees a lost connection and reconnects through the proxy.
public final class TCPProxy: Sendable {
    /// Port the proxy listens on (127.0.0.1).
    public let port: Int
    /// Port the proxy forwards to (127.0.0.1).
    public let upstreamPort: Int
    private let core: ProxyCore

    /// Listens on a free loopback port and forwards to 127.0.0.1:`upstreamPort`.
    public init(upstreamPort: Int) throws {
        self.upstreamPort = upstreamPort
        let (fd, port) = try openLoopbackListener(backlog: 16, what: "proxy")
        self.port = port
        // The accept thread holds only the core, so dropping the proxy closes it.
        let core = ProxyCore(listener: fd, upstreamPort: upstreamPort)
        self.core = core
        guard spawnThread({ core.acceptLoop() }) else {
            Glibc.close(fd)
            throw TestSupportError("could not start the proxy thread")
        }
    }

    deinit { core.close() }

    /// `mqtt://127.0.0.1:<proxy port>`.
    public var url: String { "mqtt://127.0.0.1:\(port)" }

    /// Number of connections currently forwarded.
    public var connectionCount: Int { core.connectionCount }

    /// Cuts every current connection at once (no MQTT DISCONNECT reaches either side).
    public func dropConnections() { core.dropConnections() }

    /// While false, new connections are accepted and closed at once (the upstream looks down).
    public func setAccepting(_ accepting: Bool) { core.setAccepting(accepting) }

    /// While true, PUBACK packets from the upstream (an MQTT broker) to its clients are dropped, as mosquitto drops
    /// every packet to a client whose queue is past `max_queued_messages`; everything else still flows.
    public func setDroppingAcknowledgements(_ dropping: Bool) { core.droppingAcknowledgements.store(dropping, ordering: .sequentiallyConsistent) }

    /// Holds every PUBACK from the upstream this long before passing it on (a slow broker or link; 0: none).
    public func setAcknowledgementDelay(_ delay: Duration) {
        core.acknowledgementDelayMicroseconds.store(Int(delay.inSeconds * 1_000_000), ordering: .sequentiallyConsistent)
    }

    /// PUBACKs dropped so far.
    public var droppedAcknowledgements: Int { core.droppedAcknowledgements.load(ordering: .sequentiallyConsistent) }

    /// Stops listening and cuts every connection (idempotent).
    public func close() { core.close() }
}

private final class ProxyCore: Sendable {
    let listener: Int32
    let upstreamPort: Int
    let droppingAcknowledgements = Atomic<Bool>(false)
    let droppedAcknowledgements = Atomic<Int>(0)
    let acknowledgementDelayMicroseconds = Atomic<Int>(0)
    private let state = Mutex(State())

    private struct State {
        var connections: [Int32] = []
        var closed = false
        var accepting = true
    }

    init(listener: Int32, upstreamPort: Int) {
        self.listener = listener
        self.upstreamPort = upstreamPort
    }

    var connectionCount: Int { state.withLock { $0.connections.count / 2 } }

    func dropConnections() {
        let fds = state.withLock { $0.connections }
        for fd in fds { _ = shutdown(fd, Int32(SHUT_RDWR)) }
    }

    func setAccepting(_ accepting: Bool) {
        state.withLock { $0.accepting = accepting }
    }

    func close() {
        let wasClosed = state.withLock { state in
            defer { state.closed = true }
            return state.closed
        }
        guard !wasClosed else { return }
        // Wakes the blocking accept(); the accept thread closes the listener.
        _ = shutdown(listener, Int32(SHUT_RDWR))
        dropConnections()
    }

    func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                break
            }
            let (closed, accepting) = state.withLock { ($0.closed, $0.accepting) }
            if closed {
                Glibc.close(client)
                break
            }
            let upstream = accepting ? connectUpstream() : -1
            guard upstream >= 0 else {
                Glibc.close(client)
                continue
            }
            state.withLock { $0.connections += [client, upstream] }
            let pair = PipePair(client: client, upstream: upstream) { [self] in
                state.withLock { $0.connections.removeAll { $0 == client || $0 == upstream } }
            }
            if !spawnThread({ pair.pump(from: client, to: upstream) })
                || !spawnThread({ [self] in pair.pump(from: upstream, to: client, filter: { self.keep($0) }) }) {
                _ = shutdown(client, Int32(SHUT_RDWR))
                _ = shutdown(upstream, Int32(SHUT_RDWR))
            }
        }
        Glibc.close(listener)
    }

    /// Whether one whole MQTT packet from the upstream goes on to the client.
    private func keep(_ packet: ArraySlice<UInt8>) -> Bool {
        guard packet.first.map({ $0 >> 4 }) == 4 else { return true }
        // This pump's own thread: holding it holds everything behind the PUBACK too, as a slow link would.
        let delay = acknowledgementDelayMicroseconds.load(ordering: .sequentiallyConsistent)
        if delay > 0 { usleep(UInt32(delay)) }
        guard droppingAcknowledgements.load(ordering: .sequentiallyConsistent) else { return true }
        droppedAcknowledgements.add(1, ordering: .sequentiallyConsistent)
        return false
    }

    private func connectUpstream() -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return -1 }
        var address = loopbackAddress(port: upstreamPort)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        if connected != 0 {
            Glibc.close(fd)
            return -1
        }
        return fd
    }
}

/// One proxied connection: two pumps; whichever ends first cuts both directions, the last one closes.
private final class PipePair: Sendable {
    let client: Int32
    let upstream: Int32
    let finishedPumps = Atomic<Int>(0)
    let onClose: @Sendable () -> Void

    init(client: Int32, upstream: Int32, onClose: @escaping @Sendable () -> Void) {
        self.client = client
        self.upstream = upstream
        self.onClose = onClose
    }

    /// Copies `source` to `destination`. With `filter`, the stream is cut into MQTT packets (fixed header and
    /// remaining length) and only those `filter` keeps are written.
    func pump(from source: Int32, to destination: Int32, filter: (@Sendable (ArraySlice<UInt8>) -> Bool)? = nil) {
        var buffer = [UInt8](repeating: 0, count: 16_384)
        var pending: [UInt8] = []
        func send(_ bytes: ArraySlice<UInt8>) -> Bool {
            var offset = bytes.startIndex
            while offset < bytes.endIndex {
                let written = bytes.withUnsafeBytes { write(destination, $0.baseAddress.map { $0 + (offset - bytes.startIndex) }, bytes.endIndex - offset) }
                if written < 0, errno == EINTR { continue }
                if written <= 0 { return false }
                offset += written
            }
            return true
        }
        copying: while true {
            let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            if count <= 0 { break }
            guard let filter else {
                if !send(buffer[0 ..< count]) { break copying }
                continue
            }
            pending += buffer[0 ..< count]
            while let length = Self.packetLength(pending) {
                let packet = pending[0 ..< length]
                if filter(packet), !send(packet) { break copying }
                pending.removeFirst(length)
            }
        }
        _ = shutdown(client, Int32(SHUT_RDWR))
        _ = shutdown(upstream, Int32(SHUT_RDWR))
        if finishedPumps.add(1, ordering: .sequentiallyConsistent).newValue == 2 {
            onClose()
            Glibc.close(client)
            Glibc.close(upstream)
        }
    }
}

extension PipePair {
    /// The length of the first whole MQTT packet in `bytes` (fixed header, remaining length as a varint), or nil.
    static func packetLength(_ bytes: [UInt8]) -> Int? {
        var remaining = 0
        var multiplier = 1
        var index = 1
        while index < bytes.count, index <= 4 {
            let byte = Int(bytes[index])
            remaining += (byte & 0x7F) * multiplier
            index += 1
            if byte & 0x80 == 0 {
                let total = index + remaining
                return bytes.count >= total ? total : nil
            }
            multiplier *= 128
        }
        return nil
    }
}

/// Starts a detached pthread running `body`.
func spawnThread(_ body: @escaping @Sendable () -> Void) -> Bool {
    final class Box: Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    let context = Unmanaged.passRetained(Box(body)).toOpaque()
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    var thread = pthread_t()
    let rc = pthread_create(&thread, &attributes, { raw in
        guard let raw else { return nil }
        Unmanaged<Box>.fromOpaque(raw).takeRetainedValue().body()
        return nil
    }, context)
    if rc != 0 { Unmanaged<Box>.fromOpaque(context).release() }
    return rc == 0
}
