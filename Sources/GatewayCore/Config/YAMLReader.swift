import VendorKit

/// Reads a YAML configuration file into `ConfigNode`s: block and flow mappings and sequences, plain, quoted and
/// block (`|`, `>`) scalars, comments, anchors and aliases, one document. Every scalar stays text (typing is the
/// config reader's job); a plain empty value, `~` and `null` are `.null`.
///
/// Refused, each with its line: complex keys (`? `), a second document, tabs as indentation, a key twice in one
/// mapping, aliases that repeat more than 100,000 entries. Tags (`!!str`) are read and ignored. What a configuration
/// needs of YAML 1.2 and nothing more: Yams imports full Foundation, which the installed binary leaves out. Tests
/// compare its answers with Yams' on the repository's YAML, the docs' examples, the fuzzing corpus and edited configs.
public struct YAMLReader {
    public struct SyntaxError: Error, Equatable, CustomStringConvertible {
        public var line: Int
        public var column: Int
        public var reason: String
        public var description: String { "line \(line), column \(column): \(reason)" }
    }

    private let bytes: [UInt8]
    private var index = 0
    private var line = 1
    private var lineStart = 0
    private var anchors: [String: (node: ConfigNode, size: Int)] = [:]
    private var depth = 0
    private static let maximumDepth = 64
    /// Nodes read so far, each alias counting as the nodes it repeats: a few lines of anchors that repeat each other
    /// ("billion laughs") would otherwise stand for more entries than any reader of the config could walk.
    private var expanded = 0
    private static let maximumNodes = 100_000

    private init(_ text: String) {
        var bytes = Array(text.utf8)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes.removeFirst(3) }
        self.bytes = bytes
    }

    /// The document's root; nil for a file with no content (only comments, or nothing).
    public static func parse(_ text: String) throws(SyntaxError) -> ConfigNode? {
        var reader = YAMLReader(text)
        return try reader.document()
    }

    // MARK: document

    private mutating func document() throws(SyntaxError) -> ConfigNode? {
        // Directives (`%YAML 1.2`) and a document start marker may come first.
        var sawStart = false
        while true {
            try skipBlankLines()
            guard index < bytes.count else { return sawStart ? .null : nil }
            if column == 0, peek() == UInt8(ascii: "%") {
                skipToEndOfLine()
                continue
            }
            if isMarker("---") {
                guard !sawStart else { break }
                sawStart = true
                index += 3
                skipSpaces()
                if atLineEnd { continue }
            }
            break
        }
        guard index < bytes.count else { return sawStart ? .null : nil }
        if isMarker("...") { return sawStart ? .null : nil }
        let root = try node(minimumIndent: 0, parentIndent: -1, compact: true)
        try skipBlankLines()
        if isMarker("...") {
            index += 3
            skipSpaces()
            if !atLineEnd { throw error("unexpected text after the document end marker") }
            try skipBlankLines()
        }
        if index < bytes.count {
            if isMarker("---") { throw error("a second document: the config holds one") }
            throw error(column > 0 ? "this line is indented more or less than the keys around it" : "unexpected text after the document")
        }
        if case .null = root, !sawStart { return nil }
        return root
    }

    // MARK: block nodes

    /// A node that starts at the current position (or on the next content line when the rest of this line is empty).
    /// `compact`: a block mapping or sequence may start mid-line (after `- ` or at the document's start).
    private mutating func node(minimumIndent: Int, parentIndent: Int, compact: Bool) throws(SyntaxError) -> ConfigNode {
        depth += 1
        defer { depth -= 1 }
        guard depth <= Self.maximumDepth else { throw error("nested more than \(Self.maximumDepth) levels deep") }
        let first = try countNode()
        skipSpaces()
        var onNewLine = false
        if atLineEnd {
            try skipBlankLines()
            guard index < bytes.count, column >= minimumIndent, !isMarker("---"), !isMarker("...") else { return .null }
            onNewLine = true
        }
        let (anchor, hadProperties) = try properties()
        if hadProperties, atLineEnd {
            // `key: &anchor` with the node on the lines below.
            try skipBlankLines()
            guard index < bytes.count, column >= minimumIndent, !isMarker("---"), !isMarker("...") else { return remember(anchor, .null, from: first) }
            onNewLine = true
        }
        let value = try content(minimumIndent: minimumIndent, parentIndent: parentIndent, compact: compact || onNewLine)
        return remember(anchor, value, from: first)
    }

    private mutating func content(minimumIndent: Int, parentIndent: Int, compact: Bool) throws(SyntaxError) -> ConfigNode {
        let indent = column
        if peek() == UInt8(ascii: "\t"), index == lineStart { throw error("a tab is not allowed as indentation; use spaces") }
        if isSequenceEntry {
            guard compact else { throw error("a list cannot start on the same line as its key; put it on the next line") }
            return try blockSequence(indent: indent)
        }
        if peek() == UInt8(ascii: "*") { return try alias() }
        if peek() == UInt8(ascii: "?"), isBlank(at: index + 1) { throw error("complex keys ('? ') are not supported") }
        if peek() == UInt8(ascii: "|") || peek() == UInt8(ascii: ">") { return try blockScalar(parentIndent: parentIndent) }
        if try keyFollows() {
            guard compact else { throw error("a mapping cannot start on the same line as its key; put it on the next line") }
            return try blockMapping(indent: indent)
        }
        if peek() == UInt8(ascii: "[") || peek() == UInt8(ascii: "{") {
            let value = try flowNode()
            try expectLineEnd()
            return value
        }
        if peek() == UInt8(ascii: "\"") || peek() == UInt8(ascii: "'") {
            let startLine = line
            let text = try quoted()
            try expectLineEnd()
            return .scalar(text, line: startLine)
        }
        return try plainBlockScalar(parentIndent: parentIndent)
    }

    private mutating func blockMapping(indent: Int) throws(SyntaxError) -> ConfigNode {
        var pairs: [(key: String, value: ConfigNode)] = []
        var seen = Set<String>()
        while true {
            let keyLine = line, keyColumn = column
            let key = try mappingKey()
            guard seen.insert(key).inserted else { throw SyntaxError(line: keyLine, column: keyColumn + 1, reason: "the key '\(key)' appears twice in one mapping") }
            skipSpaces()
            // The value: on this line, on the lines below (more indented), or a list at the key's own indentation.
            var value: ConfigNode
            if atLineEnd {
                let mark = position
                try skipBlankLines()
                if index < bytes.count, column == indent, isSequenceEntry {
                    value = try blockSequence(indent: indent)
                } else {
                    restore(mark)
                    value = try node(minimumIndent: indent + 1, parentIndent: indent, compact: false)
                }
            } else {
                value = try node(minimumIndent: indent + 1, parentIndent: indent, compact: false)
            }
            pairs.append((key: key, value: value))
            try skipBlankLines()
            guard index < bytes.count, !isMarker("---"), !isMarker("...") else { break }
            if column < indent { break }
            if column > indent { throw error("this line is indented more than the keys above it") }
            if isSequenceEntry { throw error("a list entry where a key was expected") }
        }
        return .mapping(pairs)
    }

    /// A key and its `:` (the current position is at the key).
    private mutating func mappingKey() throws(SyntaxError) -> String {
        let (anchor, _) = try properties()
        let key: String
        if peek() == UInt8(ascii: "\"") || peek() == UInt8(ascii: "'") {
            key = try quoted()
            skipSpaces()
        } else if peek() == UInt8(ascii: "*") {
            guard case .scalar(let text, _) = try alias() else { throw error("an alias used as a key must name a plain value") }
            key = text
            skipSpaces()
        } else {
            let start = index
            while index < bytes.count, !isLineBreak(bytes[index]), !(bytes[index] == UInt8(ascii: ":") && isBlank(at: index + 1)) {
                if bytes[index] == UInt8(ascii: "#"), index > start, isSpace(bytes[index - 1]) { break }
                index += 1
            }
            key = trimmedText(start, index)
        }
        _ = remember(anchor, .scalar(key, line: line), from: expanded - 1)
        guard peek() == UInt8(ascii: ":"), isBlank(at: index + 1) else { throw error("expected ':' after the key '\(key)'") }
        index += 1
        return key
    }

    private mutating func blockSequence(indent: Int) throws(SyntaxError) -> ConfigNode {
        var items: [ConfigNode] = []
        while true {
            index += 1  // the dash
            let item = try node(minimumIndent: indent + 1, parentIndent: indent, compact: true)
            items.append(item)
            try skipBlankLines()
            guard index < bytes.count, !isMarker("---"), !isMarker("...") else { break }
            if column < indent { break }
            if column > indent { throw error("this line is indented more than the list entries above it") }
            guard isSequenceEntry else { break }
        }
        return .sequence(items)
    }

    /// A plain scalar in block context, with its continuation lines (indented more than its parent), folded.
    private mutating func plainBlockScalar(parentIndent: Int) throws(SyntaxError) -> ConfigNode {
        let startLine = line
        var text = try plainLine(inFlow: false)
        var pendingBreaks = 0
        while true {
            let mark = position
            // Blank lines inside the scalar become line breaks; a comment ends it.
            skipToEndOfLine()
            guard index < bytes.count else { break }
            consumeLineBreak()
            skipSpaces()
            if atLineEnd, peek() != UInt8(ascii: "#") {
                pendingBreaks += 1
                continue
            }
            guard column > parentIndent, peek() != UInt8(ascii: "#"), !isMarker("---"), !isMarker("...") else {
                restore(mark)
                break
            }
            if peek() == UInt8(ascii: "\t"), index == lineStart { throw error("a tab is not allowed as indentation; use spaces") }
            let more = try plainLine(inFlow: false)
            text += pendingBreaks == 0 ? " " : String(repeating: "\n", count: pendingBreaks)
            text += more
            pendingBreaks = 0
        }
        return Self.isNull(text) ? .null : .scalar(text, line: startLine)
    }

    /// One line's part of a plain scalar: up to a comment, the line's end, `: ` (an error in block context), or in
    /// flow context a flow indicator.
    private mutating func plainLine(inFlow: Bool) throws(SyntaxError) -> String {
        let start = index
        while index < bytes.count, !isLineBreak(bytes[index]) {
            let byte = bytes[index]
            if byte == UInt8(ascii: "#"), index > start, isSpace(bytes[index - 1]) { break }
            if byte == UInt8(ascii: ":"), isBlank(at: index + 1) || (inFlow && isFlowIndicator(at: index + 1)) {
                if inFlow { break }
                throw error("a ':' followed by a space inside a value; quote the value")
            }
            if inFlow, isFlowIndicator(at: index) { break }
            index += 1
        }
        return trimmedText(start, index)
    }

    /// `|` or `>` with its indentation and chomping indicators, then the indented lines.
    private mutating func blockScalar(parentIndent: Int) throws(SyntaxError) -> ConfigNode {
        let startLine = line
        let folded = peek() == UInt8(ascii: ">")
        index += 1
        var chomping: UInt8 = 0, explicitIndent = 0
        for _ in 0..<2 {
            guard let byte = peek() else { break }
            if byte == UInt8(ascii: "-") || byte == UInt8(ascii: "+"), chomping == 0 {
                chomping = byte
                index += 1
            } else if (UInt8(ascii: "1")...UInt8(ascii: "9")).contains(byte), explicitIndent == 0 {
                explicitIndent = Int(byte - UInt8(ascii: "0"))
                index += 1
            }
        }
        try expectLineEnd()
        skipToEndOfLine()
        var indent = explicitIndent > 0 ? max(parentIndent, 0) + explicitIndent : 0
        var content: [String] = []
        while index < bytes.count {
            consumeLineBreak()
            let rowStart = index
            var spaces = 0
            while index < bytes.count, bytes[index] == UInt8(ascii: " ") { index += 1; spaces += 1 }
            if atRawLineEnd {
                // An empty line belongs to the scalar (it may end up chomped).
                content.append(spaces > indent && indent > 0 ? String(repeating: " ", count: spaces - indent) : "")
                continue
            }
            if indent == 0 {
                guard spaces > parentIndent else { index = rowStart; break }
                indent = spaces
            }
            guard spaces >= indent else { index = rowStart; break }
            let textStart = rowStart + indent
            while index < bytes.count, !isLineBreak(bytes[index]) { index += 1 }
            content.append(String(decoding: bytes[textStart..<index], as: UTF8.self))
        }
        // Trailing empty lines are chomped; `content` holds them as "".
        var trailing = 0
        while let last = content.last, last.isEmpty {
            trailing += 1
            content.removeLast()
        }
        var text = ""
        if folded {
            var previousMoreIndented = true
            var blanks = 0
            var started = false
            for row in content {
                if row.isEmpty { blanks += 1; continue }
                let moreIndented = row.first == " " || row.first == "\t"
                if started {
                    if blanks == 0 {
                        text += (moreIndented || previousMoreIndented) ? "\n" : " "
                    } else {
                        text += String(repeating: "\n", count: blanks + ((moreIndented || previousMoreIndented) ? 1 : 0))
                    }
                } else if blanks > 0 {
                    text += String(repeating: "\n", count: blanks)
                }
                blanks = 0
                started = true
                text += row
                previousMoreIndented = moreIndented
            }
        } else {
            text = content.joined(separator: "\n")
        }
        switch chomping {
        case UInt8(ascii: "-"): break
        case UInt8(ascii: "+"): text += content.isEmpty ? String(repeating: "\n", count: trailing) : "\n" + String(repeating: "\n", count: trailing)
        default: if !content.isEmpty { text += "\n" }
        }
        return .scalar(text, line: startLine)
    }

    // MARK: flow nodes

    private mutating func flowNode() throws(SyntaxError) -> ConfigNode {
        depth += 1
        defer { depth -= 1 }
        guard depth <= Self.maximumDepth else { throw error("nested more than \(Self.maximumDepth) levels deep") }
        let first = try countNode()
        try skipFlowSpace()
        let (anchor, _) = try properties()
        try skipFlowSpace()
        guard let byte = peek() else { throw error("the file ends inside a '[' or '{'") }
        let startLine = line
        let value: ConfigNode
        switch byte {
        case UInt8(ascii: "["): value = try flowSequence()
        case UInt8(ascii: "{"): value = try flowMapping()
        case UInt8(ascii: "\""), UInt8(ascii: "'"): value = .scalar(try quoted(), line: startLine)
        case UInt8(ascii: "*"): value = try alias()
        default:
            guard !isFlowIndicator(at: index) else { return remember(anchor, .null, from: first) }
            let text = try plainFlowScalar()
            value = Self.isNull(text) ? .null : .scalar(text, line: startLine)
        }
        return remember(anchor, value, from: first)
    }

    private mutating func flowSequence() throws(SyntaxError) -> ConfigNode {
        index += 1
        var items: [ConfigNode] = []
        while true {
            try skipFlowSpace()
            guard let byte = peek() else { throw error("the file ends inside a '['") }
            if byte == UInt8(ascii: "]") { index += 1; break }
            let item = try flowNode()
            try skipFlowSpace()
            if peek() == UInt8(ascii: ":") {
                // `[a: b]`: a single-pair mapping as an entry.
                index += 1
                let value = try flowNode()
                guard case .scalar(let key, _) = item else { throw error("a key in a list must be a plain value") }
                items.append(.mapping([(key: key, value: value)]))
                try skipFlowSpace()
            } else {
                items.append(item)
            }
            if peek() == UInt8(ascii: ",") { index += 1; continue }
            if peek() == UInt8(ascii: "]") { index += 1; break }
            throw error("expected ',' or ']' in a list")
        }
        return .sequence(items)
    }

    private mutating func flowMapping() throws(SyntaxError) -> ConfigNode {
        index += 1
        var pairs: [(key: String, value: ConfigNode)] = []
        var seen = Set<String>()
        while true {
            try skipFlowSpace()
            guard let byte = peek() else { throw error("the file ends inside a '{'") }
            if byte == UInt8(ascii: "}") { index += 1; break }
            if byte == UInt8(ascii: "?"), isBlank(at: index + 1) { throw error("complex keys ('? ') are not supported") }
            let keyLine = line, keyColumn = column
            let keyNode = try flowNode()
            let key: String
            switch keyNode {
            case .scalar(let text, _): key = text
            case .null: key = ""
            default: throw error("a key must be a plain value, not a list or mapping")
            }
            try skipFlowSpace()
            var value = ConfigNode.null
            if peek() == UInt8(ascii: ":") {
                index += 1
                try skipFlowSpace()
                if peek() != UInt8(ascii: ","), peek() != UInt8(ascii: "}") { value = try flowNode() }
                try skipFlowSpace()
            }
            guard seen.insert(key).inserted else { throw SyntaxError(line: keyLine, column: keyColumn + 1, reason: "the key '\(key)' appears twice in one mapping") }
            pairs.append((key: key, value: value))
            if peek() == UInt8(ascii: ",") { index += 1; continue }
            if peek() == UInt8(ascii: "}") { index += 1; break }
            throw error("expected ',' or '}' in a mapping")
        }
        return .mapping(pairs)
    }

    /// A plain scalar inside `[]`/`{}`, which may run over several lines (folded with spaces).
    private mutating func plainFlowScalar() throws(SyntaxError) -> String {
        var text = try plainLine(inFlow: true)
        while atLineEnd, peek() != UInt8(ascii: "#"), index < bytes.count {
            let mark = position
            consumeLineBreak()
            skipSpaces()
            var breaks = 0
            while atLineEnd, peek() != UInt8(ascii: "#"), index < bytes.count {
                breaks += 1
                consumeLineBreak()
                skipSpaces()
            }
            guard index < bytes.count, !isFlowIndicator(at: index), peek() != UInt8(ascii: "#"),
                  !(peek() == UInt8(ascii: ":") && (isBlank(at: index + 1) || isFlowIndicator(at: index + 1))) else {
                restore(mark)
                break
            }
            let more = try plainLine(inFlow: true)
            text += (breaks == 0 ? " " : String(repeating: "\n", count: breaks)) + more
        }
        return text
    }

    /// Spaces, line breaks and comments between flow tokens.
    private mutating func skipFlowSpace() throws(SyntaxError) {
        while let byte = peek() {
            if isSpace(byte) {
                index += 1
            } else if byte == UInt8(ascii: "#"), index == 0 || isSpace(bytes[index - 1]) || isLineBreak(bytes[index - 1]) {
                skipToEndOfLine()
            } else if isLineBreak(byte) {
                consumeLineBreak()
            } else {
                return
            }
        }
    }

    // MARK: scalars

    /// A single- or double-quoted scalar, lines folded, escapes resolved.
    private mutating func quoted() throws(SyntaxError) -> String {
        let startLine = line
        let quote = bytes[index]
        index += 1
        var text: [UInt8] = []
        while true {
            guard index < bytes.count else {
                throw SyntaxError(line: startLine, column: 0, reason: "a quoted value is not closed")
            }
            let byte = bytes[index]
            if byte == quote {
                if quote == UInt8(ascii: "'"), index + 1 < bytes.count, bytes[index + 1] == quote {
                    text.append(quote)
                    index += 2
                    continue
                }
                index += 1
                break
            }
            if isLineBreak(byte) {
                // Folding: trailing spaces go, one break becomes a space, more breaks stay as breaks.
                while let last = text.last, isSpace(last) { text.removeLast() }
                var breaks = 0
                while index < bytes.count, isLineBreak(bytes[index]) || isSpace(bytes[index]) {
                    if isLineBreak(bytes[index]) { breaks += 1; consumeLineBreak() } else { index += 1 }
                }
                if isMarker("---") || isMarker("...") { throw error("a quoted value runs into a document marker") }
                text += breaks == 1 ? [UInt8(ascii: " ")] : [UInt8](repeating: UInt8(ascii: "\n"), count: breaks - 1)
                continue
            }
            if quote == UInt8(ascii: "\""), byte == UInt8(ascii: "\\") {
                try escape(into: &text)
                continue
            }
            text.append(byte)
            index += 1
        }
        return String(decoding: text, as: UTF8.self)
    }

    private mutating func escape(into text: inout [UInt8]) throws(SyntaxError) {
        index += 1
        guard let code = peek() else { throw error("a '\\' at the end of the file") }
        index += 1
        func hex(_ count: Int) throws(SyntaxError) -> [UInt8] {
            guard index + count <= bytes.count, let value = UInt32(String(decoding: bytes[index..<index + count], as: UTF8.self), radix: 16),
                  let scalar = Unicode.Scalar(value) else { throw error("'\\\(Character(Unicode.Scalar(code)))' wants \(count) hex digits of a character") }
            index += count
            return Array(String(Character(scalar)).utf8)
        }
        switch code {
        case UInt8(ascii: "0"): text.append(0)
        case UInt8(ascii: "a"): text.append(7)
        case UInt8(ascii: "b"): text.append(8)
        case UInt8(ascii: "t"), 9: text.append(9)
        case UInt8(ascii: "n"): text.append(10)
        case UInt8(ascii: "v"): text.append(11)
        case UInt8(ascii: "f"): text.append(12)
        case UInt8(ascii: "r"): text.append(13)
        case UInt8(ascii: "e"): text.append(27)
        case UInt8(ascii: " "), UInt8(ascii: "\""), UInt8(ascii: "/"), UInt8(ascii: "\\"): text.append(code)
        case UInt8(ascii: "N"): text += [0xC2, 0x85]
        case UInt8(ascii: "_"): text += [0xC2, 0xA0]
        case UInt8(ascii: "L"): text += [0xE2, 0x80, 0xA8]
        case UInt8(ascii: "P"): text += [0xE2, 0x80, 0xA9]
        case UInt8(ascii: "x"): text += try hex(2)
        case UInt8(ascii: "u"): text += try hex(4)
        case UInt8(ascii: "U"): text += try hex(8)
        case 10, 13:
            // An escaped line break: the lines join without a space.
            index -= 1
            consumeLineBreak()
            while index < bytes.count, isSpace(bytes[index]) { index += 1 }
        default:
            throw error("unknown escape '\\\(Character(Unicode.Scalar(code)))' in a double-quoted value")
        }
    }

    static func isNull(_ text: String) -> Bool { ["", "~", "null", "Null", "NULL"].contains(text) }

    // MARK: anchors, aliases, tags

    /// An anchor (`&name`) and a tag (`!!str`, ignored), in either order; whether there were any.
    private mutating func properties() throws(SyntaxError) -> (anchor: String?, any: Bool) {
        var anchor: String?
        var any = false
        while let byte = peek(), byte == UInt8(ascii: "&") || byte == UInt8(ascii: "!") {
            index += 1
            let start = index
            while index < bytes.count, !isBlank(at: index), !isFlowIndicator(at: index) { index += 1 }
            if byte == UInt8(ascii: "&") {
                guard index > start else { throw error("an anchor ('&') without a name") }
                anchor = String(decoding: bytes[start..<index], as: UTF8.self)
            }
            any = true
            skipSpaces()
        }
        return (anchor, any)
    }

    private mutating func alias() throws(SyntaxError) -> ConfigNode {
        index += 1
        let start = index
        while index < bytes.count, !isBlank(at: index), !isFlowIndicator(at: index) { index += 1 }
        let name = String(decoding: bytes[start..<index], as: UTF8.self)
        guard let anchored = anchors[name] else { throw error("'*\(name)' names no anchor ('&\(name)') above it") }
        expanded += anchored.size
        guard expanded <= Self.maximumNodes else { throw error("aliases repeat more than \(Self.maximumNodes) entries") }
        skipSpaces()
        return anchored.node
    }

    /// Counts the node about to be read; its number (nodes read before it).
    private mutating func countNode() throws(SyntaxError) -> Int {
        expanded += 1
        guard expanded <= Self.maximumNodes else { throw error("more than \(Self.maximumNodes) entries") }
        return expanded - 1
    }

    /// Keeps an anchored node with how many nodes it stands for (those read since `first`).
    private mutating func remember(_ anchor: String?, _ node: ConfigNode, from first: Int) -> ConfigNode {
        if let anchor { anchors[anchor] = (node, max(1, expanded - first)) }
        return node
    }

    // MARK: lookahead

    /// Whether a `key:` starts at the current position (without moving).
    private mutating func keyFollows() throws(SyntaxError) -> Bool {
        let mark = position
        defer { restore(mark) }
        _ = try properties()
        if peek() == UInt8(ascii: "\"") || peek() == UInt8(ascii: "'") {
            guard (try? quoted()) != nil else { return false }
            skipSpaces()
            return peek() == UInt8(ascii: ":") && isBlank(at: index + 1)
        }
        if peek() == UInt8(ascii: "[") || peek() == UInt8(ascii: "{") { return false }
        if peek() == UInt8(ascii: "*") {
            while index < bytes.count, !isBlank(at: index) { index += 1 }
            skipSpaces()
            return peek() == UInt8(ascii: ":") && isBlank(at: index + 1)
        }
        let start = index
        while index < bytes.count, !isLineBreak(bytes[index]) {
            if bytes[index] == UInt8(ascii: "#"), index > start, isSpace(bytes[index - 1]) { return false }
            if bytes[index] == UInt8(ascii: ":"), isBlank(at: index + 1) { return true }
            index += 1
        }
        return false
    }

    private var isSequenceEntry: Bool { peek() == UInt8(ascii: "-") && isBlank(at: index + 1) }

    // MARK: characters and lines

    private var column: Int { index - lineStart }

    private var position: (Int, Int, Int) { (index, line, lineStart) }

    private mutating func restore(_ mark: (Int, Int, Int)) { (index, line, lineStart) = mark }

    private func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

    private func isSpace(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }

    private func isLineBreak(_ byte: UInt8) -> Bool { byte == 10 || byte == 13 }

    /// A space, a tab, a line break, or the end of the file.
    private func isBlank(at position: Int) -> Bool { position >= bytes.count || isSpace(bytes[position]) || isLineBreak(bytes[position]) }

    private func isFlowIndicator(at position: Int) -> Bool {
        guard position < bytes.count else { return false }
        return [UInt8(ascii: ","), UInt8(ascii: "["), UInt8(ascii: "]"), UInt8(ascii: "{"), UInt8(ascii: "}")].contains(bytes[position])
    }

    /// At a line break, the end of the file, or a comment.
    private var atLineEnd: Bool {
        guard let byte = peek() else { return true }
        return isLineBreak(byte) || (byte == UInt8(ascii: "#") && (index == 0 || isSpace(bytes[index - 1]) || isLineBreak(bytes[index - 1])))
    }

    private var atRawLineEnd: Bool { peek().map(isLineBreak) ?? true }

    /// `---` or `...` at the start of a line, followed by a blank.
    private func isMarker(_ marker: String) -> Bool {
        column == 0 && index + 3 <= bytes.count && bytes[index..<index + 3].elementsEqual(marker.utf8) && isBlank(at: index + 3)
    }

    private mutating func skipSpaces() {
        while index < bytes.count, bytes[index] == UInt8(ascii: " ") || (bytes[index] == UInt8(ascii: "\t") && index > lineStart) { index += 1 }
    }

    private mutating func skipToEndOfLine() {
        while index < bytes.count, !isLineBreak(bytes[index]) { index += 1 }
    }

    private mutating func consumeLineBreak() {
        guard index < bytes.count else { return }
        if bytes[index] == 13, index + 1 < bytes.count, bytes[index + 1] == 10 { index += 1 }
        index += 1
        line += 1
        lineStart = index
    }

    /// Past empty and comment-only lines to the first content of the next line with content (or the end).
    private mutating func skipBlankLines() throws(SyntaxError) {
        while true {
            skipSpaces()
            if index == lineStart || bytes[lineStart..<index].allSatisfy({ $0 == UInt8(ascii: " ") }), peek() == UInt8(ascii: "\t") {
                // A tab in the indentation: fine on a blank or comment line, refused before content.
                while let byte = peek(), isSpace(byte) { index += 1 }
                if !atLineEnd { throw error("a tab is not allowed as indentation; use spaces") }
            }
            guard atLineEnd, index < bytes.count else { return }
            skipToEndOfLine()
            guard index < bytes.count else { return }
            consumeLineBreak()
        }
    }

    private mutating func expectLineEnd() throws(SyntaxError) {
        skipSpaces()
        guard atLineEnd else { throw error("unexpected text after the value") }
    }

    private func trimmedText(_ start: Int, _ end: Int) -> String {
        var end = end
        while end > start, isSpace(bytes[end - 1]) { end -= 1 }
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }

    private func error(_ reason: String) -> SyntaxError {
        SyntaxError(line: line, column: column + 1, reason: reason)
    }
}
