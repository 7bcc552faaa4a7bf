import CurlHTTP

/// The session cookies a login answer sets (`Set-Cookie`), as name/value pairs, for the vendors that keep a
/// session in a cookie (a Powerwall's `AuthCookie`, an Envoy's `sessionId`).
public enum SessionCookies {
    /// The cookies called one of `names` in `headers`, in the order they came; attributes (`Path`, `HttpOnly`) dropped.
    public static func named(_ names: Set<String>, in headers: HTTPHeaderFields) -> [(name: String, value: String)] {
        var cookies: [(name: String, value: String)] = []
        for field in headers where field.name.lowercased() == "set-cookie" {
            guard let pair = field.value.split(separator: ";", maxSplits: 1).first else { continue }
            let parts = pair.split(separator: "=", maxSplits: 1).map { String($0.drop { $0 == " " }) }
            guard parts.count == 2, names.contains(parts[0]), !parts[1].isEmpty else { continue }
            cookies.append((name: parts[0], value: parts[1]))
        }
        return cookies
    }

    /// `name=value; name=value`, the `Cookie` request header.
    public static func header(_ cookies: [(name: String, value: String)]) -> String {
        cookies.map { "\($0.name)=\($0.value)" }.joined(separator: "; ")
    }
}
