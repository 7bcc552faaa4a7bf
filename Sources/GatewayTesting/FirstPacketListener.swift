import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A raw TCP listener on loopback that records the first byte each connection sends (the MQTT packet type of
/// the first packet: 0x10 is CONNECT, 0x30…0x3F PUBLISH) and then closes it, so an MQTT client keeps reconnecting.
/// It never answers, so a client under test never gets a CONNACK.
public final class FirstPacketListener: Sendable {
    /// The loopback port.
    public let port: Int
    private let core: ListenerCore

    /// Listens on a free loopback port.
    public init() throws {
        let (fd, port) = try openLoopbackListener(backlog: 64, what: "first-packet listener")
        self.port = port
        let core = ListenerCore(listener: fd)
        self.core = core
        guard spawnThread({ core.acceptLoop() }) else {
            close(fd)
            throw TestSupportError("could not start the listener thread")
        }
    }

    deinit { core.stop() }

    /// `mqtt://127.0.0.1:<port>`.
    public var url: String { "mqtt://127.0.0.1:\(port)" }

    /// The first byte of every connection so far, in accept order (connections that sent nothing are left out).
    public var firstBytes: [UInt8] { core.firstBytes }

    /// Stops listening (idempotent).
    public func stop() { core.stop() }
}

private final class ListenerCore: Sendable {
    let listener: Int32
    private let state = Mutex(State())

    private struct State {
        var firstBytes: [UInt8] = []
        var stopped = false
    }

    init(listener: Int32) {
        self.listener = listener
    }

    var firstBytes: [UInt8] { state.withLock { $0.firstBytes } }

    func stop() {
        let wasStopped = state.withLock { state in
            defer { state.stopped = true }
            return state.stopped
        }
        // Wakes the blocking accept(); the accept thread closes the listener.
        if !wasStopped { _ = shutdown(listener, Int32(SHUT_RDWR)) }
    }

    func acceptLoop() {
        while true {
            let connection = accept(listener, nil, nil)
            if connection < 0 {
                if errno == EINTR { continue }
                break
            }
            if state.withLock({ $0.stopped }) {
                close(connection)
                break
            }
            // A client sends its first packet at once; 2 s bounds a client that sends nothing.
            var timeout = timeval(tv_sec: 2, tv_usec: 0)
            _ = setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var byte: UInt8 = 0
            if recv(connection, &byte, 1, 0) == 1 {
                state.withLock { $0.firstBytes.append(byte) }
            }
            close(connection)
        }
        close(listener)
    }
}
