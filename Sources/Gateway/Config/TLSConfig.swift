import GatewayModel
import Vendors

/// The `tls` key of network vendors: `system` (default), `first_use`, or `{pin: "<base64 SPKI SHA-256>"}`.
extension VendorCatalog {
    /// Vendor types that talk HTTP(S) and read `url` and `tls`.
    public static let networkTypes: Set<String> = ["consciousness"]

    static let tlsFix = "use tls: system (CA store), tls: first_use (pin the key seen first), or tls: {pin: \"<base64 SPKI SHA-256>\"}"

    /// Reads a `tls` value; problems go to `reader` with their key path. `url` is the vendor's URL, if any.
    static func tlsPolicy(_ node: ConfigNode?, at path: String, url: String?, reader: inout ConfigReader) -> TLSPolicy {
        let policy: TLSPolicy
        switch node {
        case .none, .null?:
            return .system
        case .scalar(let text, _)?:
            switch text {
            case "system": policy = .system
            case "first_use": policy = .firstUse
            default:
                let hint = TLSPolicy.normalizedPin(text) != nil ? "write it as tls: {pin: \"\(text)\"}" : tlsFix
                reader.problem(path, "'\(GatewayError.clip(text))' is not supported", fix: hint)
                return .system
            }
        case .mapping?:
            reader.rejectUnknownKeys(in: node, at: path, allowed: ["pin"])
            guard let text = reader.string(node?["pin"], at: "\(path).pin", required: true), !text.isEmpty else { return .system }
            guard let pin = TLSPolicy.normalizedPin(text) else {
                reader.problem(
                    "\(path).pin", "'\(GatewayError.clip(text))' is not a SHA-256 public-key pin",
                    fix: "give the base64 SHA-256 of the server's SubjectPublicKeyInfo (44 characters ending in '=', optionally "
                        + "prefixed sha256//); 'lbs-gateway tls-pin' prints the key a server presents"
                )
                return .system
            }
            policy = .pinned(pin)
        case let other?:
            reader.problem(path, "expected a value or a mapping, found \(other.kindName)", fix: tlsFix)
            return .system
        }
        if policy != .system, let url, !url.isEmpty, !TLSTrustResolver.isHTTPS(url) {
            reader.problem(
                path, "tls: \(policy == .firstUse ? "first_use" : "pin") needs an https:// url (plain http has no certificate to pin)",
                fix: "use https:// in url, or remove tls"
            )
        }
        return policy
    }

    /// Problems that span a vendor entry and the rest of the file (`ConfigLoader` checks entries one by one):
    /// `tls: first_use` needs `storage:`, since a pin kept only in memory would be re-learned, from whoever
    /// answers, after every restart.
    public static func crossCheck(_ config: GatewayConfig) -> [ConfigProblem] {
        guard config.storage == nil else { return [] }
        var problems: [ConfigProblem] = []
        for vendor in config.vendors where networkTypes.contains(vendor.type) {
            guard case .scalar("first_use", _)? = vendor.options["tls"] else { continue }
            problems.append(ConfigProblem(
                path: "\(vendor.path).tls", message: "tls: first_use needs storage: the pin must survive a restart",
                fix: "add 'storage: {path: /var/lib/lbs-gateway/gateway.sqlite}', or give the key with tls: {pin: \"<base64>\"}"
            ))
        }
        return problems
    }

    /// The URL and TLS policy of a network vendor entry (nil for other types or an unusable entry).
    public static func tlsEndpoint(_ settings: VendorSettings) -> (url: String, policy: TLSPolicy)? {
        guard networkTypes.contains(settings.type) else { return nil }
        var reader = ConfigReader()
        guard let url = reader.string(settings.options["url"], at: "url"), !url.isEmpty else { return nil }
        let policy = tlsPolicy(settings.options["tls"], at: "tls", url: url, reader: &reader)
        return reader.problems.isEmpty ? (url, policy) : nil
    }
}
