#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A bounded wait in a test helper ran out.
public struct TestTimeoutError: Error, Sendable, CustomStringConvertible {
    /// What was being waited for.
    public let message: String

    /// Creates the error.
    public init(_ message: String) { self.message = message }

    public var description: String { "timed out: \(message)" }
}

/// Polls `condition` every 10 ms until it is true; throws `TestTimeoutError` after `timeout`.
public func waitUntil(_ what: @autoclosure () -> String, timeout: Duration = .seconds(5),
                      _ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + timeout
    while try await !condition() {
        guard ContinuousClock.now < deadline else { throw TestTimeoutError(what()) }
        try await Task.sleep(for: .milliseconds(10))
    }
}

/// A negative check's window: lets `duration` of real time pass so that what must NOT happen (a second copy, a late
/// vendor call, a flap) would have happened by then. Nothing marks "nothing happened"; every other wait in the tests
/// awaits an event (`waitUntil`, a message) or moves a `ManualClock`.
public func quietPeriod(_ duration: Duration) async throws {
    try await Task.sleep(for: duration)
}

/// Keeps a scenario's condition for a span of real time: a broker or backend down for a while, commands paced
/// while a process is killed among them. The span is the scenario, not a wait for something to happen.
public func hold(for duration: Duration) async throws {
    try await Task.sleep(for: duration)
}

/// A loopback TCP port that was free a moment ago; callers retry on a race.
///
/// Chosen at random from 20000–32767, below the kernel's ephemeral range (32768–60999): servers
/// that bind port 0 (simulators) get ephemeral ports, so a broker started here can never take over
/// the port a stopped simulator just freed while a test still expects it to refuse connections.
public func freeLoopbackPort() throws -> Int {
    for _ in 0..<200 {
        let port = Int.random(in: 20_000...32_767)
        if let fd = try boundLoopbackSocket(port: port) {
            close(fd)
            return port
        }
    }
    throw TestSupportError("no free loopback port found in 20000–32767")
}

/// A TCP socket bound to 127.0.0.1:`port` (without SO_REUSEADDR, not listening), or nil when the port is taken.
/// Throws only when no socket can be made at all.
func boundLoopbackSocket(port: Int) throws -> Int32? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestSupportError("socket() failed: \(String(cString: strerror(errno)))") }
    var address = loopbackAddress(port: port)
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    if bound == 0 { return fd }
    close(fd)
    return nil
}

/// True if something accepts TCP connections on 127.0.0.1:`port` right now.
public func loopbackPortAcceptsConnections(_ port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = loopbackAddress(port: port)
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    return connected == 0
}

func loopbackAddress(port: Int) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(truncatingIfNeeded: port).bigEndian
    address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
    return address
}

/// A listening TCP socket on a free loopback port: its descriptor and the port. `what` names it in errors.
func openLoopbackListener(backlog: Int32, what: String) throws -> (fd: Int32, port: Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestSupportError("socket() failed: \(String(cString: strerror(errno)))") }
    var address = loopbackAddress(port: 0)
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, length) == 0 && listen(fd, backlog) == 0 && getsockname(fd, $0, &length) == 0
        }
    }
    guard ok else {
        close(fd)
        throw TestSupportError("\(what) listen failed: \(String(cString: strerror(errno)))")
    }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}

/// A test-support failure with a readable message.
public struct TestSupportError: Error, Sendable, CustomStringConvertible {
    /// What went wrong.
    public let message: String

    /// Creates the error.
    public init(_ message: String) { self.message = message }

    public var description: String { message }
}

/// A fresh directory under the system temp dir, removed by `remove()` or on deinit.
public final class TemporaryDirectory: Sendable {
    /// Absolute path of the directory.
    public let path: String

    /// Creates `<tmp>/<prefix>-XXXXXX`.
    public init(prefix: String = "lbs-test") throws {
        let base = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
        var template = Array("\(base)/\(prefix)-XXXXXX".utf8CString)
        guard let created = template.withUnsafeMutableBufferPointer({ $0.baseAddress.flatMap(mkdtemp) }) else {
            throw TestSupportError("mkdtemp failed: \(String(cString: strerror(errno)))")
        }
        path = String(cString: created)
    }

    deinit { remove() }

    /// `path/name`.
    public func file(_ name: String) -> String { "\(path)/\(name)" }

    /// Deletes the directory and its contents (idempotent).
    public func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// Test fixtures in `Tests/Fixtures/<vendor>/` of the package: recorded data copied unchanged, with its
/// origin in `Tests/Fixtures/SOURCES.md`, so a plain clone runs every test.
public enum Fixtures {
    /// The package root: the nearest ancestor of this source file containing Package.swift.
    public static func packageRoot(filePath: String = #filePath) -> String? {
        var directory = filePath
        while let slash = directory.lastIndex(of: "/"), slash != directory.startIndex {
            directory = String(directory[..<slash])
            if access("\(directory)/Package.swift", F_OK) == 0 { return directory }
        }
        return nil
    }

    /// `<package root>/Tests/Fixtures`.
    public static var directory: String {
        let root = packageRoot() ?? FileManager.default.currentDirectoryPath
        return "\(root)/Tests/Fixtures"
    }

    /// Path of `file` in the `vendor` fixture folder.
    public static func path(_ vendor: String, _ file: String) -> String {
        "\(directory)/\(vendor)/\(file)"
    }

    /// Contents of a fixture file.
    public static func data(_ vendor: String, _ file: String) throws -> Data {
        let path = path(vendor, file)
        guard let data = FileManager.default.contents(atPath: path) else {
            throw TestSupportError("fixture not found: \(path)")
        }
        return data
    }
}

/// Waits until `process` accepts connections on loopback `port`; false if it exited or `timeout` passed first.
///
/// The listener must be the process's own: two parallel tests can draw the same free port, and the one whose server
/// lost the race to bind it would otherwise see the other's listener, call its server started, and later find the
/// port refusing connections once the other test stopped its server.
public func waitForListener(_ process: ProcessRunner, port: Int, timeout: Duration) async throws -> Bool {
    let deadline = ContinuousClock.now + timeout
    while process.isRunning, ContinuousClock.now < deadline {
        if loopbackPortAcceptsConnections(port), processTreeOwnsListener(root: process.pid, port: port) { return true }
        try await Task.sleep(for: .milliseconds(20))
    }
    return false
}

/// True when a TCP socket listening on `port` (IPv4 or IPv6) is open in process `root` or one of its children.
/// Reads /proc: the listening sockets' inodes from /proc/net/tcp{,6}, then the processes' descriptors (the children
/// only when `root` holds none, as a wrapper that forks its server would).
func processTreeOwnsListener(root: Int32, port: Int) -> Bool {
    let inodes = listeningSocketInodes(port: port)
    guard !inodes.isEmpty else { return false }
    func holdsListener(_ pid: Int32) -> Bool {
        let descriptors = "/proc/\(pid)/fd"
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: descriptors)) ?? []
        return entries.contains { entry in
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "\(descriptors)/\(entry)"),
                  target.hasPrefix("socket:[") else { return false }
            return inodes.contains(String(target.dropFirst("socket:[".count).dropLast()))
        }
    }
    return holdsListener(root) || childProcesses(of: root).contains(where: holdsListener)
}

/// Inodes of the sockets in state LISTEN (0A) whose local port is `port`.
func listeningSocketInodes(port: Int) -> Set<String> {
    let hex = String(port, radix: 16, uppercase: true)
    let hexPort = String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    var inodes: Set<String> = []
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        guard let text = try? String(contentsOfFile: table, encoding: .utf8) else { continue }
        // "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode"
        for line in text.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count > 9, fields[3] == "0A", fields[1].hasSuffix(":" + hexPort) else { continue }
            inodes.insert(String(fields[9]))
        }
    }
    return inodes
}

/// Direct children of `parent`, from /proc/<pid>/stat's fourth field.
func childProcesses(of parent: Int32) -> [Int32] {
    guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
    return entries.compactMap { entry -> Int32? in
        guard let pid = Int32(entry),
              let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
              let nameEnd = stat.lastIndex(of: ")") else { return nil }
        // After the command name (which may hold spaces and parentheses): state, ppid, …
        let fields = stat[stat.index(after: nameEnd)...].split(separator: " ")
        return fields.count > 1 && Int32(fields[1]) == parent ? pid : nil
    }
}
