#if canImport(Glibc)
import Glibc
#endif
import GatewayModel
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// sd_notify(3) without linking libsystemd: state lines (`READY=1`, `WATCHDOG=1`, `STATUS=…`, `STOPPING=1`) sent
/// as one datagram to the AF_UNIX socket systemd names in `NOTIFY_SOCKET` (a path, or `@name` for the abstract
/// namespace). Without `NOTIFY_SOCKET` (not started by systemd with `Type=notify`) it does nothing.
public struct SystemdNotifier: Sendable {
    /// The socket address, nil when not under systemd.
    public let socketPath: String?
    /// Half of `WATCHDOG_USEC` (systemd's advice), when the unit has `WatchdogSec=` and it is meant for this process.
    public let watchdogInterval: Duration?

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        let path = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        socketPath = path.flatMap { $0.hasPrefix("/") || $0.hasPrefix("@") ? $0 : nil }
        var interval: Duration?
        if let text = environment["WATCHDOG_USEC"], let micros = UInt64(text), micros > 0 {
            // WATCHDOG_PID, when set, names the process the watchdog is for.
            let forUs = environment["WATCHDOG_PID"].flatMap { Int32($0) }.map { $0 == getpid() } ?? true
            if forUs { interval = .microseconds(Int64(min(micros / 2, UInt64(Int64.max)))) }
        }
        watchdogInterval = interval
    }

    public var isEnabled: Bool { socketPath != nil }

    /// Sends `lines` (e.g. `["READY=1", "STATUS=12 devices"]`) in one datagram; false when it could not be sent.
    @discardableResult
    public func notify(_ lines: [String]) -> Bool {
        guard let socketPath else { return false }
        // A status line never carries a newline of its own into the protocol.
        let message = lines.map { $0.replacing("\n", with: " ") }.joined(separator: "\n")
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(socketPath.utf8)
        let abstract = bytes.first == UInt8(ascii: "@")
        if abstract { bytes[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count < capacity else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
        }
        // An abstract name is exactly its bytes; a path is terminated by the zero the struct already holds.
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (abstract ? 0 : 1))
        let sent = message.utf8CString.withUnsafeBufferPointer { text in
            withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                    sendto(descriptor, text.baseAddress, text.count - 1, Int32(MSG_NOSIGNAL), socketAddress, length)
                }
            }
        }
        return sent == message.utf8.count
    }
}
