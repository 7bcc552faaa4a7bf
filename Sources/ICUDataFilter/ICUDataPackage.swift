/// An ICU common data package (`icudt<version><endianness>.dat`, the format of ICU's `icupkg` and of the
/// `icudt<version>_dat` symbol a static ICU links): a header, a table of contents sorted by name, then the items.
///
/// Layout (ICU's `ucmndata.h`, "offset TOC"), all integers in the package's byte order (little-endian here):
/// - header: `headerSize: UInt16`, magic `0xda 0x27`, then `UDataInfo` (data format "CmnD"); `headerSize` bytes;
/// - table of contents at `headerSize`: `count: UInt32`, then `count` × (`nameOffset: UInt32`, `dataOffset: UInt32`),
///   both relative to the table's start; names are NUL-terminated (`icudt76l/zoneinfo64.res`);
/// - an item's bytes run from its offset to the next item's (the last one to the end).
struct ICUDataPackage: Equatable {
    struct Item: Equatable {
        var name: String
        var bytes: [UInt8]
    }

    enum Failure: Error, Equatable, CustomStringConvertible {
        case malformed(String)

        var description: String {
            switch self {
            case .malformed(let reason): "not an ICU common data package: \(reason)"
            }
        }
    }

    /// The header as read (copied unchanged: it names the format, not the items).
    var header: [UInt8]
    var items: [Item]

    /// ICU finds items by a binary search over the names, so a package keeps them sorted; items start 16-byte aligned
    /// (as `icupkg` writes them), which the resource bundles' 32-bit and 64-bit reads rely on.
    static let itemAlignment = 16

    init(header: [UInt8], items: [Item]) {
        self.header = header
        self.items = items
    }

    init(bytes: [UInt8]) throws(Failure) {
        guard bytes.count >= 4, bytes[2] == 0xda, bytes[3] == 0x27 else { throw .malformed("no 0xda27 magic") }
        let headerSize = Int(Self.uint16(bytes, at: 0))
        // UDataInfo starts at byte 4: size (2), reserved (2), isBigEndian (1), charsetFamily (1), sizeofUChar (1),
        // reserved (1), dataFormat (4) …
        guard headerSize >= 24, bytes.count >= headerSize + 4 else { throw .malformed("header of \(headerSize) bytes in \(bytes.count)") }
        guard bytes[8] == 0 else { throw .malformed("big-endian packages are not handled") }
        guard Array(bytes[12..<16]) == Array("CmnD".utf8) else { throw .malformed("data format is not CmnD") }
        let table = headerSize
        let count = Int(Self.uint32(bytes, at: table))
        guard count >= 0, table + 4 + count * 8 <= bytes.count else { throw .malformed("\(count) entries do not fit") }
        var entries: [(name: String, offset: Int)] = []
        entries.reserveCapacity(count)
        for index in 0..<count {
            let nameOffset = table + Int(Self.uint32(bytes, at: table + 4 + index * 8))
            let dataOffset = table + Int(Self.uint32(bytes, at: table + 8 + index * 8))
            guard nameOffset < bytes.count, let end = bytes[nameOffset...].firstIndex(of: 0) else {
                throw .malformed("entry \(index): name outside the file")
            }
            guard dataOffset <= bytes.count, entries.last.map({ $0.offset <= dataOffset }) ?? true else {
                throw .malformed("entry \(index): data offset \(dataOffset) out of order")
            }
            entries.append((String(decoding: bytes[nameOffset..<end], as: UTF8.self), dataOffset))
        }
        header = Array(bytes[0..<headerSize])
        items = entries.indices.map { index in
            let end = index + 1 < entries.count ? entries[index + 1].offset : bytes.count
            return Item(name: entries[index].name, bytes: Array(bytes[entries[index].offset..<end]))
        }
    }

    /// The package with only the items `keep` accepts, in their order.
    func filtered(_ keep: (String) -> Bool) -> ICUDataPackage {
        ICUDataPackage(header: header, items: items.filter { keep($0.name) })
    }

    /// The package's bytes: the header, the table of contents, the names, then each item 16-byte aligned. An item's
    /// bytes keep the padding that followed it, so reading and writing an unfiltered package gives it back unchanged.
    func serialized() -> [UInt8] {
        var names: [UInt8] = []
        var nameOffsets: [Int] = []
        let tableSize = 4 + items.count * 8
        for item in items {
            nameOffsets.append(tableSize + names.count)
            names += Array(item.name.utf8) + [0]
        }
        var body: [UInt8] = []
        var dataOffsets: [Int] = []
        let bodyStart = Self.aligned(header.count + tableSize + names.count) - header.count
        for item in items {
            body += [UInt8](repeating: 0, count: Self.aligned(header.count + bodyStart + body.count) - (header.count + bodyStart + body.count))
            dataOffsets.append(bodyStart + body.count)
            body += item.bytes
        }
        var output = header
        Self.append(UInt32(items.count), to: &output)
        for (name, data) in zip(nameOffsets, dataOffsets) {
            Self.append(UInt32(name), to: &output)
            Self.append(UInt32(data), to: &output)
        }
        output += names
        output += [UInt8](repeating: 0, count: header.count + bodyStart - output.count)
        return output + body
    }

    /// Whether `self`, read back from `original.serialized()`, holds the same items: the same names in the same order,
    /// each with the same bytes, followed at most by the zeros that align the next one.
    func holdsTheItems(of original: ICUDataPackage) -> Bool {
        header == original.header && items.count == original.items.count
            && zip(items, original.items).allSatisfy { read, written in
                read.name == written.name && read.bytes.starts(with: written.bytes)
                    && read.bytes.dropFirst(written.bytes.count).allSatisfy { $0 == 0 }
                    && read.bytes.count - written.bytes.count < Self.itemAlignment
            }
    }

    private static func aligned(_ offset: Int) -> Int { (offset + itemAlignment - 1) / itemAlignment * itemAlignment }

    private static func uint16(_ bytes: [UInt8], at offset: Int) -> UInt16 {
        UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8
    }

    private static func uint32(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        (0..<4).reduce(0) { $0 | UInt32(bytes[offset + $1]) << (8 * UInt32($1)) }
    }

    private static func append(_ value: UInt32, to bytes: inout [UInt8]) {
        for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt32(shift))) }
    }
}
