/// A publish made while the client may not write to the broker (before CONNACK, during a reconnect).
struct OfflineMessage: Sendable {
    var topic: String
    var payload: [UInt8]
    var qos: MQTTQoS
    var retain: Bool
    var properties: MQTTPublishProperties
    /// Set when a `publishAndWait` caller waits for this message's acknowledgement.
    var token: UInt64?
}

/// The client's own queue for publishes made while not connected; flushed in order after CONNACK.
///
/// - Bounded by `limit` messages: when full, the oldest message is dropped (and returned, so it is counted).
/// - Retained messages are coalesced per topic: the newest value replaces the older one (an empty payload
///   is a value too: it clears the retained message) and takes its place at the end of the order.
/// - Non-retained messages are kept in FIFO order. The caller decides what is queued at all
///   (the client drops non-retained QoS 0 while offline).
struct OfflineQueue: Sendable {
    /// Most messages held at once; 0 keeps nothing.
    let limit: Int
    /// Slots in publish order; nil marks a message replaced or dropped (compacted lazily).
    private var slots: [OfflineMessage?] = []
    /// First slot that may still hold a message.
    private var head = 0
    /// Slot of the queued retained message per topic.
    private var retainedSlot: [String: Int] = [:]
    /// Messages held now.
    private(set) var count = 0

    init(limit: Int) {
        self.limit = max(0, limit)
    }

    var isEmpty: Bool { count == 0 }

    /// What `enqueue` displaced: a retained message of the same topic it replaced, and messages dropped for room.
    struct Displaced {
        var replaced: OfflineMessage?
        var dropped: [OfflineMessage] = []
    }

    /// Queues `message`; returns what it displaced (the caller fails their waiters and counts the drops).
    /// With `limit` 0 the message itself is returned as dropped.
    mutating func enqueue(_ message: OfflineMessage) -> Displaced {
        var displaced = Displaced()
        guard limit > 0 else {
            displaced.dropped.append(message)
            return displaced
        }
        if message.retain, let slot = retainedSlot[message.topic] {
            displaced.replaced = slots[slot]
            slots[slot] = nil
            count -= 1
        }
        while count >= limit, let oldest = removeOldest() {
            displaced.dropped.append(oldest)
        }
        if message.retain { retainedSlot[message.topic] = slots.count }
        slots.append(message)
        count += 1
        compactIfSparse()
        return displaced
    }

    /// Removes and returns every message in publish order.
    mutating func drain() -> [OfflineMessage] {
        let messages = slots[head...].compactMap { $0 }
        self = OfflineQueue(limit: limit)
        return messages
    }

    private mutating func removeOldest() -> OfflineMessage? {
        while head < slots.count {
            defer { head += 1 }
            if let message = slots[head] {
                slots[head] = nil
                if message.retain, retainedSlot[message.topic] == head { retainedSlot[message.topic] = nil }
                count -= 1
                return message
            }
        }
        return nil
    }

    /// Keeps memory proportional to `count`: rebuilds the slots once more than half are empty.
    private mutating func compactIfSparse() {
        guard slots.count > 64, count * 2 < slots.count else { return }
        let live = slots[head...].compactMap { $0 }
        slots = live
        head = 0
        retainedSlot.removeAll(keepingCapacity: true)
        for (index, message) in live.enumerated() where message.retain {
            retainedSlot[message.topic] = index
        }
    }
}
