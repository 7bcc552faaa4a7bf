#if canImport(Glibc)
import Glibc
#endif

// What the outbox journal is built from: its checksum, its byte encoding, and its writer thread's signal.

/// CRC-32 (IEEE 802.3, as zlib computes it).
struct CRC32 {
    private static let table: [UInt32] = (0..<256).map { index in
        var value = UInt32(index)
        for _ in 0..<8 { value = value & 1 == 1 ? 0xEDB8_8320 ^ (value >> 1) : value >> 1 }
        return value
    }

    private var running: UInt32 = 0xFFFF_FFFF

    mutating func update(_ bytes: ArraySlice<UInt8>) {
        for byte in bytes { running = Self.table[Int((running ^ UInt32(byte)) & 0xFF)] ^ (running >> 8) }
    }

    var value: UInt32 { running ^ 0xFFFF_FFFF }
}

extension [UInt8] {
    mutating func appendLittleEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }

    mutating func appendString(_ text: String) {
        appendLittleEndian(UInt32(text.utf8.count))
        append(contentsOf: text.utf8)
    }

    /// A presence byte, then the string.
    mutating func appendOptionalString(_ text: String?) {
        guard let text else { return append(0) }
        append(1)
        appendString(text)
    }

    func littleEndian<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T? {
        guard offset >= 0, offset + MemoryLayout<T>.size <= count else { return nil }
        var value: T = 0
        for index in (0..<MemoryLayout<T>.size).reversed() { value = value << 8 | T(self[offset + index]) }
        return value
    }
}

/// Reads a payload front to back; every read is nil past the end.
struct ByteReader {
    var bytes: ArraySlice<UInt8>

    var isAtEnd: Bool { bytes.isEmpty }

    mutating func readByte() -> UInt8? { bytes.popFirst() }

    mutating func read<T: FixedWidthInteger>(_: T.Type) -> T? {
        let size = MemoryLayout<T>.size
        guard bytes.count >= size else { return nil }
        var value: T = 0
        for byte in bytes.prefix(size).reversed() { value = value << 8 | T(byte) }
        bytes = bytes.dropFirst(size)
        return value
    }

    mutating func readString() -> String? {
        guard let length = read(UInt32.self).map(Int.init), bytes.count >= length else { return nil }
        let text = String(validating: bytes.prefix(length), as: UTF8.self)
        bytes = bytes.dropFirst(length)
        return text
    }

    mutating func readOptionalString() -> String?? {
        guard let present = readByte() else { return nil }
        switch present {
        case 0: return .some(nil)
        case 1: return readString().map { .some($0) }
        default: return nil
        }
    }
}

/// A condition variable for one waiting thread: `wait` returns after a `notify` (one given before the wait
/// counts: it is not lost).
final class ThreadSignal: @unchecked Sendable {
    // pthread objects must not move: heap-allocated once.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var pending = false
    private var stopped = false

    init() {
        mutex = .allocate(capacity: 1)
        condition = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        condition.deallocate()
    }

    /// Wakes `wait`.
    func notify() { change { $0.pending = true } }

    /// Waits for a `notify`, and consumes it.
    func wait() { waitUntil({ $0.pending }, then: { $0.pending = false }) }

    /// Tells `waitForStop` the thread ended (for good).
    func notifyStopped() { change { $0.stopped = true } }

    func waitForStop() { waitUntil({ $0.stopped }, then: { _ in }) }

    private func change(_ body: (ThreadSignal) -> Void) {
        pthread_mutex_lock(mutex)
        body(self)
        pthread_cond_broadcast(condition)
        pthread_mutex_unlock(mutex)
    }

    private func waitUntil(_ condition: (ThreadSignal) -> Bool, then consume: (ThreadSignal) -> Void) {
        pthread_mutex_lock(mutex)
        while !condition(self) { pthread_cond_wait(self.condition, mutex) }
        consume(self)
        pthread_mutex_unlock(mutex)
    }
}

/// Starts a detached thread running `body`; false when the system refused. (The MQTT module has its own: Cache must
/// not depend on it.)
func startThread(_ body: @escaping @Sendable () -> Void) -> Bool {
    final class Context {
        let body: @Sendable () -> Void
        init(body: @escaping @Sendable () -> Void) { self.body = body }
    }
    let context = Unmanaged.passRetained(Context(body: body)).toOpaque()
    var thread: pthread_t = 0
    let rc = pthread_create(&thread, nil, { raw in
        guard let raw else { return nil }
        Unmanaged<Context>.fromOpaque(raw).takeRetainedValue().body()
        return nil
    }, context)
    if rc != 0 {
        Unmanaged<Context>.fromOpaque(context).release()
        return false
    }
    pthread_detach(thread)
    return true
}
