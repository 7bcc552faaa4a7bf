import GatewayModel

/// A parsed YAML value with its position, so every problem can name its key path. Vendors read their
/// options from it; the gateway builds it from the file (`ConfigNode+YAML`).
public indirect enum ConfigNode: Sendable, Equatable {
    case scalar(String, line: Int)
    case mapping([(key: String, value: ConfigNode)])
    case sequence([ConfigNode])
    case null

    public static func == (lhs: ConfigNode, rhs: ConfigNode) -> Bool {
        switch (lhs, rhs) {
        case (.scalar(let a, _), .scalar(let b, _)): a == b
        case (.sequence(let a), .sequence(let b)): a == b
        case (.null, .null): true
        case (.mapping(let a), .mapping(let b)):
            a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        default: false
        }
    }

    public subscript(key: String) -> ConfigNode? {
        guard case .mapping(let pairs) = self else { return nil }
        return pairs.first { $0.key == key }?.value
    }

    public var keys: [String] {
        guard case .mapping(let pairs) = self else { return [] }
        return pairs.map(\.key)
    }

    public var kindName: String {
        switch self {
        case .scalar: "a value"
        case .mapping: "a mapping"
        case .sequence: "a list"
        case .null: "nothing"
        }
    }
}

/// One thing wrong in a config file: where, what, and how to fix it.
public struct ConfigProblem: Sendable, Hashable, CustomStringConvertible {
    public var path: String
    public var message: String
    public var fix: String

    public init(path: String, message: String, fix: String) {
        self.path = path
        self.message = message
        self.fix = fix
    }

    public var description: String { "\(path): \(message) (\(fix))" }
}

/// Reads typed values out of a `ConfigNode`, collecting every problem instead of stopping at the first.
public struct ConfigReader {
    public private(set) var problems: [ConfigProblem] = []
    /// What works but should be changed (a secret file every user may read): `check-config` prints these and
    /// `run` logs them at start.
    public private(set) var warnings: [ConfigProblem] = []
    /// Every key each mapping read so far accepts, by its key path (`vendors[3].tls`): the schema the
    /// configuration reference in docs/ is checked against, so the two cannot drift apart.
    public private(set) var acceptedKeys: [String: Set<String>] = [:]
    /// Every file outside the config the gateway reads (secrets, certificates, one-time-code files), resolved
    /// against the config's folder, whether readable or not: `lbs-gateway config-paths` lists them, so an
    /// installer can hand each to a sandboxed service (install.sh: systemd credentials).
    public private(set) var namedFiles: [String] = []

    public init() {}

    public mutating func namesFile(_ resolved: String) {
        if !namedFiles.contains(resolved) { namedFiles.append(resolved) }
    }

    public mutating func problem(_ path: String, _ message: String, fix: String) {
        problems.append(ConfigProblem(path: path, message: message, fix: fix))
    }

    public mutating func warning(_ path: String, _ message: String, fix: String) {
        warnings.append(ConfigProblem(path: path, message: message, fix: fix))
    }

    /// Reports keys the schema does not know (typos), suggesting the closest known key.
    public mutating func rejectUnknownKeys(in node: ConfigNode?, at path: String, allowed: [String]) {
        guard let node else { return }
        acceptedKeys[path, default: []].formUnion(allowed)
        for key in node.keys where !allowed.contains(key) {
            // An empty key (`"": x`, or `: x`) has no name to point at: say so, with a path that shows it.
            if key.isEmpty {
                problem(join(path, "\"\""), "an empty key", fix: "give the key a name, or remove the line")
                continue
            }
            let suggestion = allowed.min { editDistance($0, key) < editDistance($1, key) }
            let fix = suggestion.map { editDistance($0, key) <= 3 ? "did you mean '\($0)'?" : "known keys: \(allowed.joined(separator: ", "))" }
                ?? "remove it"
            problem(join(path, key), "unknown key", fix: fix)
        }
    }

    public mutating func mapping(_ node: ConfigNode?, at path: String, required: Bool = false) -> ConfigNode? {
        switch node {
        case .none, .null?:
            if required { problem(path, "missing", fix: "add a '\(lastComponent(path)):' section") }
            return nil
        case .mapping?: return node
        case let other?:
            problem(path, "expected a mapping, found \(other.kindName)", fix: "write it as 'key: value' lines indented under '\(lastComponent(path)):'")
            return nil
        }
    }

    public mutating func string(_ node: ConfigNode?, at path: String, required: Bool = false) -> String? {
        switch node {
        case .none, .null?:
            if required { problem(path, "missing", fix: "set '\(lastComponent(path)): <value>'") }
            return nil
        case .scalar(let text, _)?:
            if text.isEmpty, required { problem(path, "is empty", fix: "set a value") }
            return text
        case let other?:
            problem(path, "expected a single value, found \(other.kindName)", fix: "write '\(lastComponent(path)): <value>'")
            return nil
        }
    }

    public mutating func number(_ node: ConfigNode?, at path: String, range: ClosedRange<Double>? = nil) -> Double? {
        guard let text = string(node, at: path) else { return nil }
        guard let value = Double(text), value.isFinite else {
            problem(path, "expected a number, found '\(text)'", fix: "write a number such as 10")
            return nil
        }
        if let range, !range.contains(value) {
            problem(path, "\(text) is out of range", fix: "use a value from \(JSONText.number(range.lowerBound)) to \(JSONText.number(range.upperBound))")
            return nil
        }
        return value
    }

    public mutating func bool(_ node: ConfigNode?, at path: String) -> Bool? {
        guard let text = string(node, at: path) else { return nil }
        switch text.lowercased() {
        case "true", "yes", "on": return true
        case "false", "no", "off": return false
        default:
            problem(path, "expected true or false, found '\(text)'", fix: "write true or false")
            return nil
        }
    }

    public mutating func oneOf(_ node: ConfigNode?, at path: String, _ allowed: [String]) -> String? {
        guard let text = string(node, at: path) else { return nil }
        guard allowed.contains(text) else {
            problem(path, "'\(text)' is not supported", fix: "use one of: \(allowed.joined(separator: ", "))")
            return nil
        }
        return text
    }

    public func join(_ path: String, _ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    private func lastComponent(_ path: String) -> String {
        String(path.split(separator: ".").last ?? Substring(path))
    }
}

private func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a), b = Array(b)
    guard !a.isEmpty else { return b.count }
    guard !b.isEmpty else { return a.count }
    var previous = Array(0...b.count)
    for i in 1...a.count {
        var current = [i] + Array(repeating: 0, count: b.count)
        for j in 1...b.count {
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
        }
        previous = current
    }
    return previous[b.count]
}
