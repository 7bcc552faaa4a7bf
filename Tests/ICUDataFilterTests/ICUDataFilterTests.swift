@testable import ICUDataFilter
import Testing

@Suite struct ICUDataPackageTests {
    /// A common data header as ICU writes it: size 32, magic 0xda27, UDataInfo (little-endian, ASCII, 2-byte UChar,
    /// format "CmnD" 1.0), padded to 32 bytes.
    static let header: [UInt8] = [32, 0, 0xda, 0x27, 20, 0, 0, 0, 0, 0, 2, 0] + Array("CmnD".utf8) + [1, 0, 0, 0]
        + [0, 0, 0, 0] + [UInt8](repeating: 0, count: 8)

    static let items: [ICUDataPackage.Item] = [
        .init(name: "icudt76l/de.res", bytes: [1, 2, 3]),
        .init(name: "icudt76l/en.res", bytes: Array(1...40)),
        .init(name: "icudt76l/ibm-943_P15A-2003.cnv", bytes: [9]),
        .init(name: "icudt76l/zone/root.res", bytes: Array(repeating: 7, count: 16)),
        .init(name: "icudt76l/zoneinfo64.res", bytes: [5, 5, 5, 5, 5]),
    ]

    @Test func aWrittenPackageReadsBackWithItsItemsAligned() throws {
        let package = ICUDataPackage(header: Self.header, items: Self.items)
        let bytes = package.serialized()
        let read = try ICUDataPackage(bytes: bytes)
        #expect(read.holdsTheItems(of: package))
        #expect(read.items.map(\.name) == Self.items.map(\.name))
        // Every item starts 16-byte aligned in the file: its offset in the table is relative to the table (at 32).
        let table = Self.header.count
        for index in Self.items.indices {
            let offset = (0..<4).reduce(0) { $0 | Int(bytes[table + 8 + index * 8 + $1]) << (8 * $1) }
            #expect((table + offset) % 16 == 0, "item \(index) at \(table + offset)")
            #expect(Array(bytes[(table + offset)...].prefix(Self.items[index].bytes.count)) == Self.items[index].bytes)
        }
        // Written again, the read package gives the same bytes: padding is kept with the item before it.
        #expect(read.serialized() == bytes)
    }

    @Test func filteringKeepsTheOrderAndTheBytesOfWhatItKeeps() throws {
        let package = ICUDataPackage(header: Self.header, items: Self.items)
        let kept = package.filtered(ICUDataSelection.keeps)
        #expect(kept.items.map(\.name) == ["icudt76l/en.res", "icudt76l/zone/root.res", "icudt76l/zoneinfo64.res"])
        #expect(try ICUDataPackage(bytes: kept.serialized()).holdsTheItems(of: kept))
        #expect(kept.header == Self.header)
    }

    @Test func aDifferentItemIsNotTakenForTheSame() throws {
        let package = ICUDataPackage(header: Self.header, items: Self.items)
        var changed = package
        changed.items[1].bytes[3] ^= 1
        #expect(!(try ICUDataPackage(bytes: changed.serialized())).holdsTheItems(of: package))
        changed = package
        changed.items.removeLast()
        #expect(!(try ICUDataPackage(bytes: changed.serialized())).holdsTheItems(of: package))
    }

    @Test func whatIsNotAPackageIsRefusedWithAReason() {
        let good = ICUDataPackage(header: Self.header, items: Self.items).serialized()
        var bigEndian = good
        bigEndian[8] = 1
        var otherFormat = good
        otherFormat[12] = UInt8(ascii: "X")
        var tooManyEntries = good
        tooManyEntries[32 + 3] = 0x7f
        var nameOutside = good
        nameOutside[32 + 4 + 3] = 0x7f
        var outOfOrder = good
        outOfOrder[32 + 8] = 0xff
        for (label, bytes) in [("empty", []), ("no magic", [UInt8](repeating: 0, count: 64)), ("header only", Array(good.prefix(30))),
                               ("big-endian", bigEndian), ("not CmnD", otherFormat), ("count", tooManyEntries),
                               ("name", nameOutside), ("order", outOfOrder)] {
            #expect(throws: ICUDataPackage.Failure.self, "\(label)") { try ICUDataPackage(bytes: bytes) }
        }
    }
}

@Suite struct ICUDataSelectionTests {
    @Test(arguments: [
        // Time zones, calendars, the root and English bundles, pools and indexes, Unicode data.
        "icudt76l/zoneinfo64.res", "icudt76l/metaZones.res", "icudt76l/timezoneTypes.res", "icudt76l/windowsZones.res",
        "icudt76l/supplementalData.res", "icudt76l/root.res", "icudt76l/en.res", "icudt76l/en_US_POSIX.res", "icudt76l/pool.res",
        "icudt76l/res_index.res", "icudt76l/zone/root.res", "icudt76l/zone/en.res", "icudt76l/zone/tzdbNames.res",
        "icudt76l/zone/res_index.res", "icudt76l/coll/ucadata.icu", "icudt76l/coll/root.res", "icudt76l/brkitr/word.brk",
        "icudt76l/uprops.icu", "icudt76l/nfkc.nrm", "icudt76l/cnvalias.icu", "icudt76l/curr/supplementalData.res",
    ])
    func kept(_ name: String) {
        #expect(ICUDataSelection.keeps(name))
    }

    @Test(arguments: [
        "icudt76l/de.res", "icudt76l/de_CH.res", "icudt76l/zone/fr.res", "icudt76l/sr_Latn_BA.res", "icudt76l/curr/zh_Hant_HK.res",
        "icudt76l/coll/ja.res", "icudt76l/yue.res", "icudt76l/ibm-943_P15A-2003.cnv", "icudt76l/translit/root.res",
        "icudt76l/brkitr/cjdict.dict", "icudt76l/unit/en_AU.res", "icudt76l/es_419.res",
    ])
    func leftOut(_ name: String) {
        #expect(!ICUDataSelection.keeps(name))
    }
}
