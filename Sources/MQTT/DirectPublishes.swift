import CMosquitto
#if canImport(Glibc)
import Glibc
#endif

/// QoS 0 publishes the client encodes itself and the network thread writes many to one `send`, instead of handing
/// each to libmosquitto.
///
/// Why: per QoS 0 message libmosquitto allocates a packet, writes a wake-up byte to its socket pair, and its loop
/// then reads that byte in a `select` pass of its own and writes the packet with a system call of its own: four
/// system calls a message, most of the gateway's network time when a thousand devices report (perf over
/// `lbs-bench publish`). A PUBLISH at QoS 0 without properties is a few fixed bytes around topic and payload, so the
/// client builds it here and the network thread sends the whole buffer at once.
///
/// What keeps the wire the same as through libmosquitto (all under the client's state lock, the lock every hand-over
/// to libmosquitto takes):
/// - Order: the network thread takes the buffer only while libmosquitto has nothing queued, and whoever hands
///   libmosquitto anything first moves what waits here into libmosquitto (`ClientCore.spillDirect`), so a later
///   packet never leaves before an earlier one.
/// - Wake-up: a message waits here only when the network thread is sure to look again (`drainPending`): after a
///   hand-over to libmosquitto (whose wake-up byte ends the thread's `select`) and until the thread took the buffer.
///   Otherwise the publish goes through libmosquitto, which wakes it.
/// - Limits: only plain TCP (with TLS only libmosquitto's thread may write to the session), only what libmosquitto
///   would accept the same way (a valid topic, retain only where the broker has it, within the broker's maximum
///   packet size), and at most `capacity` bytes wait: beyond it, publishes go through libmosquitto again.
/// - Loss: on a lost connection what waits here is dropped, as libmosquitto drops its unsent QoS 0 packets.
struct DirectPublishes {
    /// One waiting message, kept so it can be handed to libmosquitto after all (`spillDirect`).
    struct Entry {
        var topicStart: Int
        var topicCount: Int
        var payloadStart: Int
        var payloadCount: Int
        var retain: Bool
    }

    /// The encoded PUBLISH packets, back to back.
    private(set) var bytes: [UInt8] = []
    private(set) var entries: [Entry] = []
    /// True from a hand-over to libmosquitto (which wakes the network thread) until the network thread took the
    /// buffer: only then may a message wait here.
    var drainPending = false

    /// Bytes that may wait; past this publishes go through libmosquitto (whose queue the gateway's backlog bounds).
    static let capacity = 1 << 20
    /// Larger messages go through libmosquitto: they are few, and a broker's smallest sensible packet limit is far
    /// above this.
    static let largestPacket = 4096

    var isEmpty: Bool { entries.isEmpty }

    /// The packet's size, or nil when it must go through libmosquitto.
    static func packetSize(topicCount: Int, payloadCount: Int, isV5: Bool) -> Int? {
        let remaining = 2 + topicCount + (isV5 ? 1 : 0) + payloadCount
        let size = 1 + varintLength(remaining) + remaining
        return size <= largestPacket ? size : nil
    }

    /// Appends a PUBLISH (QoS 0, no packet id, an empty property list in v5).
    mutating func append(topic: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer, retain: Bool, isV5: Bool) {
        let remaining = 2 + topic.count + (isV5 ? 1 : 0) + payload.count
        bytes.append(0x30 | (retain ? 0x01 : 0x00))
        var length = remaining
        repeat {
            var byte = UInt8(length & 0x7F)
            length >>= 7
            if length > 0 { byte |= 0x80 }
            bytes.append(byte)
        } while length > 0
        bytes.append(UInt8(topic.count >> 8))
        bytes.append(UInt8(topic.count & 0xFF))
        let topicStart = bytes.count
        bytes.append(contentsOf: topic)
        if isV5 { bytes.append(0) }
        let payloadStart = bytes.count
        bytes.append(contentsOf: payload)
        entries.append(Entry(topicStart: topicStart, topicCount: topic.count, payloadStart: payloadStart,
                             payloadCount: payload.count, retain: retain))
    }

    /// Hands the waiting bytes to `other` (emptied first) and keeps `other`'s storage for the next ones, so neither
    /// side allocates while messages flow. Returns how many messages went.
    mutating func take(into other: inout [UInt8]) -> Int {
        other.removeAll(keepingCapacity: true)
        swap(&bytes, &other)
        let taken = entries.count
        entries.removeAll(keepingCapacity: true)
        return taken
    }

    /// Empties the buffer; returns how many messages it held.
    mutating func removeAll() -> Int {
        let removed = entries.count
        bytes.removeAll(keepingCapacity: true)
        entries.removeAll(keepingCapacity: true)
        return removed
    }

    private static func varintLength(_ value: Int) -> Int {
        value < 128 ? 1 : value < 16_384 ? 2 : value < 2_097_152 ? 3 : 4
    }
}

/// What the network thread took from `DirectPublishes` and is writing.
struct DirectBatch {
    var bytes: [UInt8] = []
    var offset = 0
    var messages = 0
    /// The connection broke while writing: the rest was dropped, not sent.
    var dropped = false

    var isEmpty: Bool { offset >= bytes.count }

    /// Forgets what was sent; a buffer grown by a rare large burst is let go rather than kept for good.
    mutating func reset() {
        if bytes.capacity > 256 * 1024 { bytes = [] } else { bytes.removeAll(keepingCapacity: true) }
        offset = 0
        messages = 0
        dropped = false
    }

    /// Writes what it can without blocking. True when all is written; false when the socket is full (`EAGAIN`: wait
    /// until writable). A broken connection drops the rest (libmosquitto notices it on its next read or write).
    mutating func write(to socket: Int32) -> Bool {
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { raw in
                send(socket, raw.baseAddress.map { $0 + offset }, raw.count - offset, Int32(MSG_NOSIGNAL))
            }
            if written > 0 {
                offset += written
                continue
            }
            if written < 0, errno == EINTR { continue }
            if written < 0, errno == EAGAIN || errno == EWOULDBLOCK { return false }
            offset = bytes.count
            dropped = true
        }
        return true
    }
}
