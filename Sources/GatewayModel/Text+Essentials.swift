extension StringProtocol {
    /// Without whitespace or line breaks at either end: Foundation's `trimmingCharacters(in: .whitespacesAndNewlines)`
    /// on the standard library alone, so a module needs only FoundationEssentials.
    package func trimmingWhitespace() -> String {
        guard let start = firstIndex(where: { !$0.isWhitespace }), let end = lastIndex(where: { !$0.isWhitespace }) else { return "" }
        return String(self[start...end])
    }
}

extension BinaryInteger {
    /// The decimal digits, zero-padded to at least `width` (`String(format: "%02d")`, without Foundation).
    package func zeroPadded(_ width: Int) -> String {
        let digits = String(self.magnitude)
        let sign = self < 0 ? "-" : ""
        return sign + String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
}

extension String {
    /// The path without its last component, as `NSString.deletingLastPathComponent` has it: `"a/b"` → `"a"`,
    /// `"/a"` → `"/"`, `"a"` → `""`, trailing slashes ignored.
    package var deletingLastPathComponent: String {
        var path = Substring(self)
        while path.count > 1, path.hasSuffix("/") { path = path.dropLast() }
        guard let slash = path.lastIndex(of: "/") else { return "" }
        var parent = path[..<slash]
        while parent.count > 1, parent.hasSuffix("/") { parent = parent.dropLast() }
        return parent.isEmpty ? "/" : String(parent)
    }
}
