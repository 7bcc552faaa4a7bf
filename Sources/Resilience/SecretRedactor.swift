import GatewayModel
import Synchronization

/// Removes a vendor's secrets (password, API key, the current bearer token) from text the vendor sent back,
/// before it becomes part of a message that is logged, published or stored. Backends echo credentials in
/// 401 details, pydantic 422 `input` fields and HTML debug pages; the generic token heuristic of
/// `ErrorClassifier.sanitized` misses short or punctuated passwords, so the configured values are cut out by name.
///
/// Each secret is also matched in its JSON-escaped, HTML-escaped and percent-encoded forms. Values shorter than
/// `minimumLength` are not redacted (cutting every "ab" would garble messages and hide nothing).
public final class SecretRedactor: Sendable {
    public static let replacement = "[redacted]"
    public static let minimumLength = 4

    private let secrets = Mutex<[String: [String]]>([:])

    public init() {}

    /// Sets (or with nil removes) the secret called `name`, e.g. "password" or "token".
    public func set(_ name: String, _ value: String?) {
        let forms = value.map(Self.forms) ?? []
        secrets.withLock { $0[name] = forms.isEmpty ? nil : forms }
    }

    /// Adds a further value of the secret called `name` (a password changed in its file: the old one stays
    /// redacted as well).
    public func add(_ name: String, _ value: String) {
        let forms = Self.forms(value)
        guard !forms.isEmpty else { return }
        secrets.withLock { $0[name, default: []].append(contentsOf: forms) }
    }

    /// `text` with every known secret form replaced by `[redacted]`.
    public func redact(_ text: String) -> String {
        let forms = secrets.withLock { $0.values.flatMap { $0 } }.sorted { $0.count > $1.count }
        var out = text
        for form in forms where out.contains(form) {
            out = out.replacing(form, with: Self.replacement)
        }
        return out
    }

    /// `error` with its message and suggestion redacted.
    public func redact(_ error: GatewayError) -> GatewayError {
        var copy = error
        copy.message = redact(error.message)
        copy.suggestion = redact(error.suggestion)
        return copy
    }

    static func forms(_ value: String) -> [String] {
        guard value.count >= minimumLength else { return [] }
        var forms: Set<String> = [value]
        // Inside JSON, and inside a JSON string that quotes a JSON body (pydantic's `input`); with and
        // without `\/` (Foundation's encoder escapes slashes).
        for inner in [false, true] {
            let once = jsonEscaped(value, escapeSlash: inner)
            forms.insert(once)
            for outer in [false, true] { forms.insert(jsonEscaped(once, escapeSlash: outer)) }
        }
        forms.insert(htmlEscaped(value))
        forms.insert(htmlEscaped(value).replacing("&#39;", with: "&#x27;"))
        forms.insert(URLText.percentEncoded(value))
        return Array(forms)
    }

    /// The JSON string-literal form of `value` without its quotes (as a vendor echoing it in JSON writes it);
    /// `escapeSlash` for serializers that write `/` as `\/`.
    static func jsonEscaped(_ value: String, escapeSlash: Bool = false) -> String {
        let escaped = String(JSONText.quoted(value).dropFirst().dropLast())
        return escapeSlash ? escaped.replacing("/", with: "\\/") : escaped
    }

    static func htmlEscaped(_ value: String) -> String {
        value.replacing("&", with: "&amp;").replacing("<", with: "&lt;").replacing(">", with: "&gt;")
            .replacing("\"", with: "&quot;").replacing("'", with: "&#39;")
    }
}
