/// A small, non-validating XML reader for Green Button's Atom feeds: elements (by local name, so `espi:value` and
/// `value` read the same), attributes, text with the predefined and numeric character references, CDATA; comments
/// and processing instructions skipped. A DOCTYPE with declarations is refused, so no entity is ever expanded.
///
/// Why not Foundation's XMLParser: it is the only user of FoundationXML, which loads libxml2 and the system's ICU
/// into every gateway process (~1 MB resident) for one vendor, and it traps on element names that are not UTF-8.
struct XMLReader {
    enum Event {
        case start(name: String, attributes: [String: String])
        case text(String)
        case end(name: String)
    }

    struct Failure: Error {
        var line: Int
        var reason: String
    }

    private let bytes: [UInt8]
    private var index = 0
    private var line = 1

    private init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// Calls `handle` for every event in document order; throws at the first error in the document.
    static func read(_ bytes: [UInt8], _ handle: (Event) -> Void) throws(Failure) {
        var reader = XMLReader(bytes)
        try reader.run(handle)
    }

    private mutating func run(_ handle: (Event) -> Void) throws(Failure) {
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { index = 3 }
        var open: [String] = []
        var sawRoot = false
        while index < bytes.count {
            if bytes[index] != UInt8(ascii: "<") {
                let text = try readText()
                if open.isEmpty {
                    guard text.allSatisfy(\.isWhitespace) else { throw fail("text outside the document element") }
                } else {
                    handle(.text(text))
                }
                continue
            }
            if skip("<?") {
                try skipPast("?>", what: "processing instruction")
            } else if skip("<!--") {
                try skipPast("-->", what: "comment")
            } else if skip("<![CDATA[") {
                guard !open.isEmpty else { throw fail("CDATA outside the document element") }
                let start = index
                try skipPast("]]>", what: "CDATA section")
                handle(.text(String(decoding: bytes[start..<(index - 3)], as: UTF8.self)))
            } else if skip("<!DOCTYPE") {
                while index < bytes.count, bytes[index] != UInt8(ascii: ">") {
                    if bytes[index] == UInt8(ascii: "[") { throw fail("a DOCTYPE with declarations is not read (entities are refused)") }
                    advance()
                }
                guard index < bytes.count else { throw fail("unterminated DOCTYPE") }
                advance()
            } else if skip("</") {
                let name = try readName()
                skipSpace()
                guard skip(">") else { throw fail("'>' expected after </\(name)") }
                guard let last = open.popLast() else { throw fail("end tag </\(name)> without a start tag") }
                guard last == name else { throw fail("end tag </\(name)> does not close <\(last)>") }
                handle(.end(name: Self.localName(name)))
            } else {
                advance()
                let name = try readName()
                guard open.isEmpty ? !sawRoot : true else { throw fail("a second document element <\(name)>") }
                sawRoot = true
                var attributes: [String: String] = [:]
                while true {
                    let spaced = skipSpace()
                    if skip("/>") {
                        handle(.start(name: Self.localName(name), attributes: attributes))
                        handle(.end(name: Self.localName(name)))
                        break
                    }
                    if skip(">") {
                        open.append(name)
                        handle(.start(name: Self.localName(name), attributes: attributes))
                        break
                    }
                    guard spaced else { throw fail("'>' or an attribute expected in <\(name)>") }
                    let attribute = try readName()
                    skipSpace()
                    guard skip("=") else { throw fail("'=' expected after the attribute \(attribute)") }
                    skipSpace()
                    let value = try readQuoted()
                    let key = Self.localName(attribute)
                    guard attributes[key] == nil else { throw fail("the attribute \(attribute) appears twice") }
                    attributes[key] = value
                }
            }
        }
        if let last = open.last { throw fail("the document ends inside <\(last)>") }
        guard sawRoot else { throw fail("no document element") }
    }

    /// `espi:IntervalBlock` → `IntervalBlock`; a namespace's prefix says nothing Green Button relies on.
    private static func localName(_ name: String) -> String {
        guard let colon = name.lastIndex(of: ":") else { return name }
        return String(name[name.index(after: colon)...])
    }

    private func fail(_ reason: String) -> Failure {
        Failure(line: line, reason: reason)
    }

    private mutating func advance() {
        if bytes[index] == UInt8(ascii: "\n") { line += 1 }
        index += 1
    }

    private mutating func skip(_ literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard index + count <= bytes.count else { return false }
        let matches = literal.withUTF8Buffer { expected in
            expected.indices.allSatisfy { bytes[index + $0] == expected[$0] }
        }
        if matches { index += count }
        return matches
    }

    private mutating func skipPast(_ terminator: StaticString, what: String) throws(Failure) {
        while index < bytes.count {
            if skip(terminator) { return }
            advance()
        }
        throw fail("unterminated \(what)")
    }

    @discardableResult
    private mutating func skipSpace() -> Bool {
        let start = index
        while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { advance() }
        return index > start
    }

    private static func isNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "_"), UInt8(ascii: ":"), UInt8(ascii: "-"), UInt8(ascii: "."), 0x80...:
            true
        default:
            false
        }
    }

    private mutating func readName() throws(Failure) -> String {
        let start = index
        while index < bytes.count, Self.isNameByte(bytes[index]) { index += 1 }
        guard index > start else { throw fail(index < bytes.count ? "a name expected at '\(Character(Unicode.Scalar(bytes[index])))'" : "a name expected at the end") }
        let first = bytes[start]
        guard !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first), first != UInt8(ascii: "-"), first != UInt8(ascii: ".") else {
            throw fail("a name cannot start with '\(Character(Unicode.Scalar(first)))'")
        }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    private mutating func readQuoted() throws(Failure) -> String {
        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") || bytes[index] == UInt8(ascii: "'") else {
            throw fail("a quoted attribute value expected")
        }
        let quote = bytes[index]
        index += 1
        var value: [UInt8] = []
        while index < bytes.count, bytes[index] != quote {
            if bytes[index] == UInt8(ascii: "<") { throw fail("'<' in an attribute value") }
            if bytes[index] == UInt8(ascii: "&") {
                try readReference(into: &value)
            } else {
                value.append(bytes[index])
                advance()
            }
        }
        guard index < bytes.count else { throw fail("unterminated attribute value") }
        index += 1
        return String(decoding: value, as: UTF8.self)
    }

    private mutating func readText() throws(Failure) -> String {
        var text: [UInt8] = []
        while index < bytes.count, bytes[index] != UInt8(ascii: "<") {
            if bytes[index] == UInt8(ascii: "&") {
                try readReference(into: &text)
            } else {
                text.append(bytes[index])
                advance()
            }
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// `&lt;` `&gt;` `&amp;` `&quot;` `&apos;` `&#65;` `&#x41;`; any other entity is an error (none is declared).
    private mutating func readReference(into output: inout [UInt8]) throws(Failure) {
        let start = index
        index += 1
        while index < bytes.count, bytes[index] != UInt8(ascii: ";"), index - start < 12 { index += 1 }
        guard index < bytes.count, bytes[index] == UInt8(ascii: ";") else { throw fail("an unterminated '&' reference") }
        let name = String(decoding: bytes[(start + 1)..<index], as: UTF8.self)
        index += 1
        switch name {
        case "lt": output.append(UInt8(ascii: "<"))
        case "gt": output.append(UInt8(ascii: ">"))
        case "amp": output.append(UInt8(ascii: "&"))
        case "quot": output.append(UInt8(ascii: "\""))
        case "apos": output.append(UInt8(ascii: "'"))
        default:
            let number: UInt32? = if name.hasPrefix("#x") {
                UInt32(name.dropFirst(2), radix: 16)
            } else if name.hasPrefix("#") {
                UInt32(name.dropFirst(), radix: 10)
            } else {
                nil
            }
            guard let number, number != 0, let scalar = Unicode.Scalar(number) else { throw fail("unknown reference &\(name);") }
            output.append(contentsOf: Array(String(Character(scalar)).utf8))
        }
    }
}
