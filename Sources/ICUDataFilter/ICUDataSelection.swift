/// Which of ICU's data items the gateway's static build carries. The full package is 34 MB, a third of the binary;
/// the gateway needs from it time zones (`zoneinfo64`, `metaZones`, `timezoneTypes`, `windowsZones`), the Gregorian
/// calendar and English/POSIX date formats (`DateFormatter` with `en_US_POSIX`, Cognito's timestamps), and Unicode
/// properties and normalization (the regular expressions of the YAML reader). What it leaves out:
/// - character set converters (`*.cnv`, 5 MB): the gateway reads and writes UTF-8 only, which needs no table;
/// - transliterators (`translit/`) and the word-break dictionaries of Chinese, Japanese, Thai, Khmer, Lao, Burmese
///   (`brkitr/*.dict`, 3 MB);
/// - locale bundles other than root and English, in every category (names of zones, currencies, languages,
///   regions, units, collation tailorings, spell-out rules: 22 MB). ICU falls back to root for a locale it lacks.
/// Every other item (root bundles, pools, indexes, properties, normalization, collation's root table) stays.
enum ICUDataSelection {
    /// The locales kept in every category, besides `root`.
    static let locales: Set<Substring> = ["root", "en", "en_US", "en_US_POSIX", "en_001", "en_150", "en_GB"]

    /// Whether the item `name` (`icudt76l/zone/de.res`) is kept.
    static func keeps(_ name: String) -> Bool {
        let parts = name.split(separator: "/")
        guard let leaf = parts.last else { return true }
        let folder = parts.count > 2 ? parts[parts.count - 2] : ""
        if leaf.hasSuffix(".cnv") || folder == "translit" { return false }
        if folder == "brkitr", leaf.hasSuffix(".dict") { return false }
        guard let locale = localeBundle(leaf) else { return true }
        return locales.contains(locale)
    }

    /// The locale of a locale bundle's file name (`de_CH.res` → `de_CH`; `sr_Latn_BA.res` → `sr_Latn_BA`), or nil
    /// for every other item (`zoneinfo64.res`, `res_index.res`, `pool.res`, `root.res`, `ucadata.icu`).
    static func localeBundle(_ leaf: Substring) -> Substring? {
        guard leaf.hasSuffix(".res") else { return nil }
        let stem = leaf.dropLast(4)
        let fields = stem.split(separator: "_", omittingEmptySubsequences: false)
        guard let language = fields.first, (2...3).contains(language.count),
              language.allSatisfy({ $0.isASCII && $0.isLowercase }),
              fields.dropFirst().allSatisfy({ !$0.isEmpty && $0.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) } })
        else { return nil }
        // `res_index` has the shape of a locale (language `res`, region `index`) but is each folder's index.
        return stem == "res_index" ? nil : stem
    }
}
