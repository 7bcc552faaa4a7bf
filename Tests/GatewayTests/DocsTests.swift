import Cache
import Foundation
@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayModel
import GatewayTesting
import Testing
import VendorKit

/// The docs tree stays true: every relative link resolves (files and headings), every YAML example passes the
/// checks `check-config` makes, the configuration reference names exactly the keys the loader accepts, and every
/// error code has its entry in troubleshooting.
@Suite struct DocsTests {
    static let root = Fixtures.packageRoot() ?? FileManager.default.currentDirectoryPath

    /// README.md, mqtt-topics.md and every page under docs/.
    static func pages() -> [String] {
        var pages = ["README.md", "mqtt-topics.md"]
        if let walker = FileManager.default.enumerator(atPath: "\(root)/docs") {
            for case let path as String in walker where path.hasSuffix(".md") { pages.append("docs/\(path)") }
        }
        return pages.sorted()
    }

    static func text(_ page: String) -> String {
        (try? String(contentsOfFile: "\(root)/\(page)", encoding: .utf8)) ?? ""
    }

    @Test func theDocsTreeExists() {
        for page in ["docs/configuration.md", "docs/troubleshooting.md", "docs/architecture.md", "docs/adding-a-vendor.md"] {
            #expect(FileManager.default.fileExists(atPath: "\(Self.root)/\(page)"), "\(page) is missing")
        }
    }

    // MARK: - Links

    @Test func everyRelativeLinkResolves() {
        var broken: [String] = []
        for page in Self.pages() {
            let directory = (page as NSString).deletingLastPathComponent
            for link in Markdown.links(in: Self.text(page)) {
                if link.hasPrefix("http://") || link.hasPrefix("https://") || link.hasPrefix("mailto:") { continue }
                let parts = link.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                let target = parts[0].isEmpty ? page : Markdown.normalize(directory.isEmpty ? parts[0] : "\(directory)/\(parts[0])")
                guard FileManager.default.fileExists(atPath: "\(Self.root)/\(target)") else {
                    broken.append("\(page): \(link) (no file \(target))")
                    continue
                }
                if parts.count == 2, target.hasSuffix(".md"), !Markdown.anchors(in: Self.text(target)).contains(parts[1]) {
                    broken.append("\(page): \(link) (no heading #\(parts[1]) in \(target))")
                }
            }
        }
        #expect(broken.isEmpty, "broken links:\n\(broken.joined(separator: "\n"))")
    }

    @Test func theLinkCheckerSeesBrokenLinks() {
        let text = "# One `a.b` thing\n\n[x](#one-ab-thing) [y](#two)\n\n```\n[z](nowhere.md)\n```\n"
        #expect(Markdown.links(in: text) == ["#one-ab-thing", "#two"])
        #expect(Markdown.anchors(in: text) == ["one-ab-thing"])
        #expect(Markdown.normalize("docs/../mqtt-topics.md") == "mqtt-topics.md")
    }

    // MARK: - YAML examples

    @Test func everyYAMLExamplePassesCheckConfig() throws {
        var failures: [String] = []
        for page in Self.pages() {
            for (index, block) in Markdown.codeBlocks(in: Self.text(page), language: "yaml").enumerated() {
                let example = try StubbedExample(block)
                defer { example.remove() }
                switch example.load() {
                case .success(let config):
                    let storage = config.storage.map { StorageCheck.problems(path: $0.path) } ?? []
                    if !storage.isEmpty { failures.append("\(page) YAML example \(index + 1): storage.path: \(storage.joined(separator: "; "))") }
                case .failure(let failure):
                    failures.append("\(page) YAML example \(index + 1):\n  \(failure.problems.map(\.description).joined(separator: "\n  "))\n---\n\(block)")
                }
            }
        }
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
    }

    /// Examples a reader copies (a Node-RED flow) must import: every JSON block in docs/ parses.
    @Test func everyJSONExampleInDocsParses() {
        var failures: [String] = []
        for page in Self.pages() where page.hasPrefix("docs/") {
            for (index, block) in Markdown.codeBlocks(in: Self.text(page), language: "json").enumerated()
            where (try? JSONSerialization.jsonObject(with: Data(block.utf8))) == nil {
                failures.append("\(page) JSON example \(index + 1) does not parse")
            }
        }
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
    }

    // MARK: - The configuration reference

    @Test func theConfigurationReferenceNamesExactlyTheKeysTheLoaderAccepts() throws {
        let page = Self.text("docs/configuration.md")
        let documented = Markdown.keyTables(in: page)
        #expect(documented.count > 20, "the reference has its key tables")
        var accepted: [String: Set<String>] = [:]
        for block in Markdown.codeBlocks(in: page, language: "yaml") {
            let example = try StubbedExample(block)
            defer { example.remove() }
            guard case .success(let config) = example.load() else { continue }  // reported by the example test
            let types = config.vendors.map(\.type)
            for (path, keys) in ConfigLoader.acceptedKeys(yaml: example.yaml, environment: example.environment, baseDirectory: example.directory) {
                accepted[Self.referencePath(path, vendorTypes: types), default: []].formUnion(keys)
            }
        }
        let common = documented["vendors[]"] ?? []
        var problems: [String] = []
        for (path, keys) in accepted.sorted(by: { $0.key < $1.key }) {
            // `password:` is accepted only to be refused with "use password_file"; the reference lists the two ways.
            var expected = keys.filter { !(keys.contains("\($0)_file") && keys.contains("\($0)_env")) }
            if path.hasPrefix("vendors[type="), !path.contains("].") { expected.subtract(common) }
            guard let listed = documented[path] else {
                problems.append("\(path): accepted by the loader, no <!-- keys: \(path) --> table (keys: \(expected.sorted().joined(separator: ", ")))")
                continue
            }
            if path == "vendors[]" { continue }
            let missing = expected.subtracting(listed), unknown = listed.subtracting(expected)
            if !missing.isEmpty { problems.append("\(path): not documented: \(missing.sorted().joined(separator: ", "))") }
            if !unknown.isEmpty { problems.append("\(path): documented, not accepted: \(unknown.sorted().joined(separator: ", "))") }
        }
        let everyVendorKey = accepted.filter { $0.key.hasPrefix("vendors[") && !$0.key.contains("].") }.values.reduce(into: Set<String>()) { $0.formUnion($1) }
        let unknownCommon = common.subtracting(everyVendorKey)
        if !unknownCommon.isEmpty { problems.append("vendors[]: documented, accepted by no vendor: \(unknownCommon.sorted().joined(separator: ", "))") }
        for path in documented.keys where accepted[path] == nil && path != "vendors[]" {
            problems.append("\(path): documented, but no complete example reaches it (or the loader has no such mapping)")
        }
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
    }

    /// The loader's key path as the reference names it: `vendors[3]` → `vendors[type=powerwall]`,
    /// `vendors[3].breaker` → `vendors[].breaker`, `alerts.rooms.Bedroom.co2` → `alerts.rooms.<room>.<key>`.
    static func referencePath(_ path: String, vendorTypes: [String]) -> String {
        if path.isEmpty { return "(top)" }
        var segments = path.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        if segments[0].hasPrefix("vendors["), let index = Int(segments[0].dropFirst(8).dropLast()), index < vendorTypes.count {
            if segments.count > 1, ["quota", "breaker", "tls"].contains(segments[1]) {
                segments[0] = "vendors[]"
            } else {
                segments[0] = "vendors[type=\(vendorTypes[index])]"
            }
        }
        if segments.count == 3, segments[0] == "alerts", segments[1] == "environment" { segments[2] = "<key>" }
        if segments.count == 4, segments[0] == "alerts", segments[1] == "rooms" { segments[2] = "<room>"; segments[3] = "<key>" }
        return segments.map { segment in
            guard let open = segment.firstIndex(of: "["), !segment.hasPrefix("vendors[type=") else { return segment }
            return segment[..<open] + "[]"
        }.joined(separator: ".")
    }

    @Test func referencePathsNameVendorsByType() {
        let types = ["demo", "powerwall", "awair_local"]
        #expect(Self.referencePath("", vendorTypes: types) == "(top)")
        #expect(Self.referencePath("vendors[1]", vendorTypes: types) == "vendors[type=powerwall]")
        #expect(Self.referencePath("vendors[1].breaker", vendorTypes: types) == "vendors[].breaker")
        #expect(Self.referencePath("vendors[2].devices[4]", vendorTypes: types) == "vendors[type=awair_local].devices[]")
        #expect(Self.referencePath("scenes[3]", vendorTypes: types) == "scenes[]")
        #expect(Self.referencePath("alerts.rooms.Bedroom.co2", vendorTypes: types) == "alerts.rooms.<room>.<key>")
    }

    // MARK: - Troubleshooting

    @Test func everyErrorCodeHasATroubleshootingEntry() {
        let page = Self.text("docs/troubleshooting.md")
        let headings = Set(Markdown.headings(in: page))
        let missing = GatewayError.Code.allCases.map(\.rawValue).filter { !headings.contains("`\($0)`") }
        #expect(missing.isEmpty, "docs/troubleshooting.md has no '### `code`' entry for: \(missing.joined(separator: ", "))")
    }
}

/// A YAML example made checkable: the files it names exist (stubbed in a temporary folder), the environment
/// variables it names are set, and a minimal `mqtt` / `vendors` is added when the example shows only other parts.
struct StubbedExample {
    let yaml: String
    let directory: String
    let environment: [String: String]

    init(_ block: String) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("docs-example-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var yaml = block
        var environment: [String: String] = [:]
        // `<key>: <value>` in block or flow style.
        let pattern = try NSRegularExpression(pattern: #"([A-Za-z_]+):[ ]*"?([^\s,}"\]]+)"?"#)
        var replacements: [(NSRange, String)] = []
        for match in pattern.matches(in: block, range: NSRange(block.startIndex..., in: block)) {
            guard let keyRange = Range(match.range(at: 1), in: block), let valueRange = Range(match.range(at: 2), in: block) else { continue }
            let key = String(block[keyRange]), value = String(block[valueRange])
            if key.hasSuffix("_env") {
                environment[value] = Self.stubSecret(for: String(key.dropLast(4)))
                continue
            }
            guard key.hasSuffix("_file") || key == "ca_path" || key == "path" else { continue }
            let stub = directory + "/" + value.replacingOccurrences(of: "/", with: "_")
            if key == "ca_path" {
                try FileManager.default.createDirectory(atPath: stub, withIntermediateDirectories: true)
            } else if key.hasSuffix("_file") {
                try Data(Self.stubSecret(for: String(key.dropLast(5))).utf8).write(to: URL(fileURLWithPath: stub))
                chmod(stub, 0o600)
            }
            replacements.append((match.range(at: 2), stub))
        }
        for (range, stub) in replacements.reversed() {
            if let swiftRange = Range(range, in: yaml) { yaml.replaceSubrange(swiftRange, with: stub) }
        }
        if !Self.hasTopLevel("mqtt", in: yaml) { yaml = "mqtt: {url: mqtt://localhost:1883}\n" + yaml }
        if !Self.hasTopLevel("vendors", in: yaml) { yaml += "\nvendors: [{type: demo, id: demo}]\n" }
        self.yaml = yaml
        self.directory = directory
        self.environment = environment
    }

    func load() -> Result<GatewayConfig, ConfigLoader.Failure> {
        ConfigLoader.parse(yaml: yaml, environment: environment, baseDirectory: directory)
    }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }

    static func hasTopLevel(_ key: String, in yaml: String) -> Bool {
        yaml.split(separator: "\n").contains { $0.hasPrefix("\(key):") }
    }

    /// A value each kind of secret accepts: a TOTP secret is base32, a lock PIN digits.
    static func stubSecret(for name: String) -> String {
        switch name {
        case "totp_secret": "JBSWY3DPEHPK3PXP"
        case "pin_code": "1234"
        case "setup_code": "031-45-154"
        default: "stub-secret-for-\(name)"
        }
    }
}

/// Just enough Markdown for the docs checks: fenced code blocks, links outside them, headings and their
/// GitHub anchors, and the reference's key tables.
enum Markdown {
    /// Lines outside fenced code blocks.
    static func proseLines(_ text: String) -> [Substring] {
        var inFence = false
        var lines: [Substring] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.trimmingCharacters(in: .whitespaces).hasPrefix("```") { inFence.toggle(); continue }
            if !inFence { lines.append(line) }
        }
        return lines
    }

    static func codeBlocks(in text: String, language: String) -> [String] {
        var blocks: [String] = []
        var current: [Substring]?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if let lines = current {
                if trimmed == "```" { blocks.append(lines.joined(separator: "\n")); current = nil } else { current?.append(line) }
            } else if trimmed == "```\(language)" {
                current = []
            }
        }
        return blocks
    }

    static func links(in text: String) -> [String] {
        let prose = proseLines(text).joined(separator: "\n").replacingOccurrences(of: #"`[^`\n]*`"#, with: "", options: .regularExpression)
        guard let pattern = try? NSRegularExpression(pattern: #"\]\(([^)\s]+)\)"#) else { return [] }
        return pattern.matches(in: prose, range: NSRange(prose.startIndex..., in: prose)).compactMap { match in
            Range(match.range(at: 1), in: prose).map { String(prose[$0]) }
        }
    }

    static func headings(in text: String) -> [String] {
        proseLines(text).compactMap { line in
            guard line.hasPrefix("#") else { return nil }
            return line.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces)
        }
    }

    /// GitHub's anchors: lower case, punctuation but `-` and `_` dropped, spaces to `-`, repeats numbered.
    static func anchors(in text: String) -> Set<String> {
        var seen: [String: Int] = [:]
        var anchors: Set<String> = []
        for heading in headings(in: text) {
            let slug = String(heading.lowercased().compactMap { character -> Character? in
                if character == " " { return "-" }
                if character.isLetter || character.isNumber || character == "-" || character == "_" { return character }
                return nil
            })
            let count = seen[slug, default: 0]
            anchors.insert(count == 0 ? slug : "\(slug)-\(count)")
            seen[slug] = count + 1
        }
        return anchors
    }

    /// `a/b/../c.md` → `a/c.md`.
    static func normalize(_ path: String) -> String {
        var parts: [Substring] = []
        for part in path.split(separator: "/") {
            if part == "." { continue }
            if part == "..", !parts.isEmpty { parts.removeLast() } else { parts.append(part) }
        }
        return parts.joined(separator: "/")
    }

    /// The tables after each `<!-- keys: PATH -->`: the backticked names in their first column, by PATH.
    static func keyTables(in text: String) -> [String: Set<String>] {
        var tables: [String: Set<String>] = [:]
        var current: String?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("<!-- keys:"), trimmed.hasSuffix("-->") {
                let path = trimmed.dropFirst("<!-- keys:".count).dropLast(3).trimmingCharacters(in: .whitespaces)
                current = path
                tables[path, default: []] = tables[path, default: []]
                continue
            }
            guard let path = current else { continue }
            if trimmed.hasPrefix("#") { current = nil; continue }
            guard trimmed.hasPrefix("|"), !trimmed.hasPrefix("|---"), !trimmed.hasPrefix("| key ") else { continue }
            let firstColumn = trimmed.dropFirst().prefix { $0 != "|" }
            for piece in firstColumn.split(separator: "`").enumerated() where piece.offset % 2 == 1 {
                tables[path, default: []].insert(String(piece.element))
            }
        }
        return tables
    }
}
