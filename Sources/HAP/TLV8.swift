/// HAP's TLV8 (type, length, value) records, the body of every pairing message.
///
/// Values longer than 255 bytes travel as consecutive items of one type (255 bytes each, then the rest); a
/// decoder joins *adjacent* items of one type. Two separate values of one type (a list of pairings) are divided
/// by the empty separator item `FF 00`.
public struct TLV8: Sendable, Equatable {
    public struct Item: Sendable, Equatable {
        public var type: UInt8
        public var value: [UInt8]

        public init(_ type: UInt8, _ value: [UInt8]) {
            self.type = type
            self.value = value
        }
    }

    public var items: [Item]

    public init(_ items: [Item] = []) {
        self.items = items
    }

    public init(_ pairs: [(TLVType, [UInt8])]) {
        items = pairs.map { Item($0.0.rawValue, $0.1) }
    }

    /// The first value of `type`, or nil.
    public subscript(type: TLVType) -> [UInt8]? {
        items.first { $0.type == type.rawValue }?.value
    }

    /// A one-byte (or little-endian multi-byte) integer value, such as State or Error.
    public func integer(_ type: TLVType) -> Int? {
        guard let bytes = self[type], !bytes.isEmpty, bytes.count <= 8 else { return nil }
        return bytes.enumerated().reduce(0) { $0 | Int($1.element) << (8 * $1.offset) }
    }

    /// The items split at separators: one group per pairing in a List Pairings answer.
    public var groups: [TLV8] {
        var groups: [TLV8] = [TLV8()]
        for item in items {
            if item.type == TLVType.separator.rawValue {
                groups.append(TLV8())
            } else {
                groups[groups.count - 1].items.append(item)
            }
        }
        return groups.filter { !$0.items.isEmpty }
    }

    /// The wire form: long values fragmented into 255-byte items (an empty value is one empty item).
    public func encoded() -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(items.reduce(0) { $0 + $1.value.count + 2 })
        for item in items {
            if item.value.isEmpty {
                bytes += [item.type, 0]
                continue
            }
            var start = 0
            while start < item.value.count {
                let end = min(start + 255, item.value.count)
                bytes += [item.type, UInt8(end - start)]
                bytes += item.value[start..<end]
                start = end
            }
        }
        return bytes
    }

    /// Reads a TLV8 body; adjacent items of one type are joined.
    public static func decode(_ bytes: [UInt8]) throws(HAPError) -> TLV8 {
        var items: [Item] = []
        var index = 0
        var lastWasFragment = false
        while index < bytes.count {
            guard index + 2 <= bytes.count else { throw HAPError.malformed("a TLV8 item is cut off after its type byte") }
            let type = bytes[index], length = Int(bytes[index + 1])
            index += 2
            guard index + length <= bytes.count else {
                throw HAPError.malformed("a TLV8 item of type \(type) says \(length) bytes but \(bytes.count - index) remain")
            }
            let value = bytes[index..<index + length]
            index += length
            // A continuation is an item of the same type right after a full (255-byte) one.
            if lastWasFragment, let last = items.last, last.type == type {
                items[items.count - 1].value += value
            } else {
                items.append(Item(type, Array(value)))
            }
            lastWasFragment = length == 255
        }
        return TLV8(items)
    }
}

/// The TLV types of pairing messages (HAP §5.15).
public enum TLVType: UInt8, Sendable {
    case method = 0x00
    case identifier = 0x01
    case salt = 0x02
    case publicKey = 0x03
    case proof = 0x04
    case encryptedData = 0x05
    case state = 0x06
    case error = 0x07
    case retryDelay = 0x08
    case certificate = 0x09
    case signature = 0x0A
    case permissions = 0x0B
    case fragmentData = 0x0C
    case fragmentLast = 0x0D
    case sessionID = 0x0E
    case flags = 0x13
    case separator = 0xFF
}

/// Pairing methods (TLV type 0).
public enum PairingMethod: UInt8, Sendable {
    case pairSetup = 0
    case pairSetupWithAuth = 1
    case pairVerify = 2
    case addPairing = 3
    case removePairing = 4
    case listPairings = 5
}

/// The errors an accessory puts in TLV type 7.
public enum TLVError: Int, Sendable, Equatable {
    case unknown = 1
    case authentication = 2
    case backoff = 3
    case maxPeers = 4
    case maxTries = 5
    case unavailable = 6
    case busy = 7

    public var reason: String {
        switch self {
        case .unknown: "the accessory reported an unknown error"
        case .authentication: "the accessory refused the authentication (wrong setup code, or it does not know this controller)"
        case .backoff: "the accessory asks to wait before trying again"
        case .maxPeers: "the accessory has no room for another pairing"
        case .maxTries: "the accessory refuses pairing after too many failed attempts (reset it)"
        case .unavailable: "the accessory is already paired with another controller"
        case .busy: "the accessory is pairing with another controller"
        }
    }
}
