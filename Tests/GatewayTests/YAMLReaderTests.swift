import Foundation
import GatewayCore
import GatewayTesting
import LBSGatewayApp
import Resilience
import Testing
import VendorKit
import Yams

/// The gateway's own YAML reader gives what Yams (libyaml) gave for every config a user may write: the same tree,
/// the same lines, and a refusal where Yams refused.
@Suite struct YAMLReaderTests {
    /// The repository's YAML: the example config, every ```yaml block of the docs, the fuzzing corpus, the
    /// recorded Awair cassettes.
    static func repositoryDocuments() throws -> [(name: String, text: String)] {
        let root = try #require(Fixtures.packageRoot())
        var documents: [(String, String)] = []
        let manager = FileManager.default
        for folder in ["deploy", "Fuzz/corpus/config", "Tests/Fixtures/awair"] {
            for name in (try? manager.contentsOfDirectory(atPath: root + "/" + folder)) ?? [] where name.hasSuffix(".yaml") || name.hasSuffix(".yml") {
                documents.append(("\(folder)/\(name)", try String(contentsOfFile: root + "/" + folder + "/" + name, encoding: .utf8)))
            }
        }
        let markdown = ["README.md", "mqtt-topics.md"] + ((try? manager.contentsOfDirectory(atPath: root + "/docs")) ?? []).map { "docs/" + $0 }
        for name in markdown where name.hasSuffix(".md") {
            let text = try String(contentsOfFile: root + "/" + name, encoding: .utf8)
            for (number, block) in text.components(separatedBy: "```yaml\n").dropFirst().enumerated() {
                documents.append(("\(name) block \(number + 1)", block.components(separatedBy: "```").first ?? ""))
            }
        }
        return documents
    }

    /// What a config may hold, beyond what the repository's files show.
    static let handwritten: [String] = [
        "a: 1\nb: two words\nc: 'single ''quoted'''\nd: \"double \\\"quoted\\\" \\u00e9 \\x41 \\t tab\"\n",
        "# comment first\n\n---\nmqtt:   # trailing comment\n  url: mqtt://127.0.0.1:1883   # another\n  keepalive: 30\n...\n",
        "list:\n- a\n- b\nnext: 1\n",
        "list:\n  - a\n  -   b\n  -\n    c: 1\n    d: 2\n  - - nested\n    - twice\n",
        "vendors:\n  - type: demo\n    id: demo\n    poll_interval: 2.5\n  - {type: enphase, id: roof, host: envoy.local}\n",
        "flow: [a, 'b, c', \"d\", {e: f, g: [h, i]}, ]\nempty: []\nnone: {}\n",
        "multi: [\n  one,\n  two,   # comment\n  three four\n]\nmap: {\n  a: 1,\n  b: 2\n}\n",
        "empty:\ntilde: ~\nnull1: null\nquoted_null: 'null'\nquoted_empty: ''\nlast:",
        "literal: |\n  line one\n   indented\n\n  after blank\n\nnext: x\n",
        "strip: |-\n  text\n\n\nkeep: |+\n  text\n\n\nclip: >\n  folded\n  lines\n\n  paragraph\n    more indented\n  back\n",
        "indicator: |2\n    two extra\n  base\nfolded_strip: >-\n  a\n  b\n",
        "plain: this is\n  continued over\n\n  lines\nnext: 1\n",
        "quoted: \"first\n  second\n\n  third\"\nsingle: 'a\n  b'\nescaped: \"joined\\\n  here\"\n",
        "base: &base {host: h, port: 1}\ncopy: *base\nscalar: &s text\nagain: *s\n",
        "url: http://example.com:8080/path#frag\nhash: a#b\ncolon: a:b\ndash: -1\ntime: 22:55-00:30\n",
        "tags: !!str 123\nother: !custom value\n",
        "\"quoted key\": 1\n'single key': 2\n",
        "a:\n  b:\n    c:\n      d: deep\n  e: back\nf: top\n",
        "- top\n- list\n",
        "just a scalar\n",
        "",
        "# only comments\n\n   # indented comment\n",
        "---\n",
        "a: 1\n---\nb: 2\n",
        "a: [unclosed\n",
        "a: {b: c\n",
        "a: 'unclosed\n",
        "a: b: c\n",
        "a:\n  b: 1\n c: 2\n",
        "a:\n\tb: 1\n",
        "a: *nowhere\n",
        "a: \"bad \\q escape\"\n",
        "a: 1\n  b: 2\n",
        "- a\nb: 1\n",
        "a: - b\n",
        "a: |\n  text\n b: 1\n",
        "a: >\n\n  leading blank\n",
        "key with spaces: value with: colon\n",
    ]

    @Test func repositoryDocumentsReadAsYamsReadThem() throws {
        let documents = try Self.repositoryDocuments()
        #expect(documents.count >= 25, "found \(documents.count)")
        // This fuzzer-found file has a `?` line: see `complexKeysAreRefused`.
        for (name, text) in documents where !name.hasSuffix("fuzz-found-empty-key.yaml") { compare(text, name) }
    }

    @Test(arguments: handwritten) func handwrittenDocumentsReadAsYamsReadThem(_ text: String) {
        compare(text, text.debugDescription)
    }

    /// Where the reader differs from Yams on purpose: a key that is a list, a mapping or an explicit `? ` entry is
    /// refused (no config key is one; Yams turned it into the key's description, which no reader then found).
    static let complexKeys = ["? complex\n: key\n", "[a, b]: c\n", "{a: 1}: c\n", "a: 1\n? \n"]

    @Test func complexKeysAreRefused() throws {
        for text in Self.complexKeys {
            let error = try #require(throws: YAMLReader.SyntaxError.self) { try YAMLReader.parse(text) }
            #expect(error.line >= 1, "\(text.debugDescription): \(error)")
        }
        let root = try #require(Fixtures.packageRoot())
        let found = try String(contentsOfFile: root + "/Fuzz/corpus/config/fuzz-found-empty-key.yaml", encoding: .utf8)
        #expect(throws: YAMLReader.SyntaxError.self) { try YAMLReader.parse(found) }
    }

    /// Yams refused a file saved with a byte order mark and Windows line ends; the reader reads it.
    @Test func aWindowsEditedFileIsRead() throws {
        let node = try YAMLReader.parse("\u{FEFF}bom: yes\r\ncrlf: 'ok'\r\nlist:\r\n  - a\r\n")
        #expect(node == .mapping([(key: "bom", value: .scalar("yes", line: 1)), (key: "crlf", value: .scalar("ok", line: 2)),
                                  (key: "list", value: .sequence([.scalar("a", line: 4)]))]))
    }

    /// Deep nesting is refused with a message, not a crashed stack.
    @Test func deepNestingIsRefused() {
        for text in [String(repeating: "[", count: 100_000), String(repeating: "{a: ", count: 10_000),
                     (0..<200).map { String(repeating: "  ", count: $0) + "k\($0):\n" }.joined(),
                     String(repeating: "- ", count: 5_000) + "x\n"] {
            #expect(throws: YAMLReader.SyntaxError.self) { try YAMLReader.parse(text) }
        }
    }

    @Test func errorsNameTheirLine() throws {
        let error = try #require(throws: YAMLReader.SyntaxError.self) { try YAMLReader.parse("a: 1\nb: [x,\nc: 'open\n") }
        #expect(error.line >= 2 && error.description.hasPrefix("line \(error.line)"), "\(error)")
        guard case .failure(let failure) = ConfigLoader.parse(yaml: "mqtt:\n  url: x\n bad: 1\n") else { Issue.record("accepted"); return }
        #expect(failure.problems.first?.message.hasPrefix("not valid YAML: line 3") == true, "\(failure)")
    }

    /// Same tree (keys, values, nulls), same line for every scalar; refused where Yams refused.
    func compare(_ text: String, _ name: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let reference: ConfigNode?? = (try? Yams.compose(yaml: text)).map { $0.map { ConfigNode(yams: $0) } }
        let ours = Result { () throws(YAMLReader.SyntaxError) in try YAMLReader.parse(text) }
        switch (reference, ours) {
        case (nil, .failure):
            break
        case (nil, .success(let node)):
            Issue.record("\(name): Yams refused it, the reader read \(String(describing: node))", sourceLocation: sourceLocation)
        case (.some, .failure(let error)):
            Issue.record("\(name): Yams read it, the reader refused: \(error)", sourceLocation: sourceLocation)
        case (.some(let expected), .success(let node)):
            #expect(node == expected, "\(name)", sourceLocation: sourceLocation)
            if let node, let expected, node == expected {
                #expect(Self.lines(node) == Self.lines(expected), "\(name): lines", sourceLocation: sourceLocation)
            }
        }
    }

    static func lines(_ node: ConfigNode) -> [Int] {
        switch node {
        case .scalar(_, let line): [line]
        case .mapping(let pairs): pairs.flatMap { lines($0.value) }
        case .sequence(let items): items.flatMap(lines)
        case .null: []
        }
    }
}

/// The example config changed line by line, the way a person editing it might get it wrong (a line indented one
/// space more or less, a line dropped, a quote or colon removed): the reader and Yams agree on each.
@Suite struct YAMLReaderEditedConfigTests {
    @Test func editedExampleConfigsReadAsYamsReadThem() throws {
        let root = try #require(Fixtures.packageRoot())
        let example = try String(contentsOfFile: root + "/deploy/config.example.yaml", encoding: .utf8)
        let lines = example.components(separatedBy: "\n")
        var generator = SplitMix64(seed: 0x5eed)
        var disagreements: [String] = []
        for _ in 0..<600 {
            var edited = lines
            let index = Int(generator.next() % UInt64(edited.count))
            let kind = generator.next() % 6
            switch kind {
            case 0: edited[index] = " " + edited[index]
            case 1: if edited[index].hasPrefix(" ") { edited[index].removeFirst() }
            case 2: edited.remove(at: index)
            case 3: edited[index] = edited[index].replacingOccurrences(of: ":", with: "", options: [], range: edited[index].range(of: ":"))
            case 4: edited[index] = edited[index].replacingOccurrences(of: "\"", with: "")
            default: edited.insert(edited[index], at: index)
            }
            let text = edited.joined(separator: "\n")
            let reference: ConfigNode? = (try? Yams.compose(yaml: text)).map { ConfigNode(yams: $0) }
            let ours: ConfigNode? = (try? YAMLReader.parse(text)) ?? nil
            // Both nil (refused, or no content), or the same tree.
            if reference != ours {
                disagreements.append("edit \(kind) at line \(index + 1): \(edited.indices.contains(index) ? edited[index] : "")\n  yams: \(reference.map { "\($0 as Any)" } ?? "refused")\n  ours: \(ours.map { "\($0 as Any)" } ?? "refused")")
            }
        }
        #expect(disagreements.isEmpty, "\(disagreements.count) disagreements:\n\(disagreements.prefix(5).joined(separator: "\n"))")
    }
}

/// Anchors that repeat each other stand for more entries than the file holds; past 100,000 the reader refuses.
@Suite struct YAMLReaderAliasTests {
    @Test func aBillionLaughsIsRefusedAndOrdinaryAliasesAreRead() throws {
        var laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
        for (name, previous) in zip("bcdefghij", "abcdefghi") {
            laughs += "\(name): &\(name) [" + Array(repeating: "*\(previous)", count: 10).joined(separator: ", ") + "]\n"
        }
        let error = try #require(throws: YAMLReader.SyntaxError.self) { try YAMLReader.parse(laughs) }
        #expect(error.reason.contains("100000"), "\(error)")
        let ordinary = try YAMLReader.parse("base: &b {host: h, port: 1}\none: *b\ntwo: *b\nlist: &l [1, 2]\nthree: *l\n")
        #expect(ordinary?["two"] == .mapping([(key: "host", value: .scalar("h", line: 1)), (key: "port", value: .scalar("1", line: 1))]))
        #expect(ordinary?["three"] == .sequence([.scalar("1", line: 4), .scalar("2", line: 4)]))
    }
}
