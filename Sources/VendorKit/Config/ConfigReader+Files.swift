#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

extension ConfigReader {
    /// Reads a secret file (surrounding newlines trimmed). Relative paths are relative to the config file.
    public mutating func readSecretFile(_ file: String, at path: String, baseDirectory: String) -> VendorSecret? {
        let resolved = Self.resolve(file, baseDirectory: baseDirectory)
        namesFile(resolved)
        guard let data = FileManager.default.contents(atPath: resolved), let text = String(data: data, encoding: .utf8) else {
            problem(path, "cannot read '\(file)'", fix: "check the path and that the gateway's user may read it")
            return nil
        }
        // As ssh does for keys: a secret that every local user can read is no secret. It still works (an
        // existing install keeps running), but check-config and the start log say so.
        var status = stat()
        if stat(resolved, &status) == 0, status.st_mode & S_IROTH != 0 {
            let mode = String(status.st_mode & 0o777, radix: 8)
            warning(path, "'\(file)' is readable by every user on this machine (mode 0\(mode))",
                    fix: "chmod 600 '\(resolved)' (or 640 with the gateway's group)")
        }
        return VendorSecret(file: resolved, value: VendorSecret.trimmed(text))
    }

    /// A secret a vendor needs, named `name` (`password`, `token`, `api_key` …). It comes from
    /// `<name>_file` (relative to the config file), `<name>_env`, or else the variable `LBS_<ID>_<NAME>`;
    /// `<name>` itself in the file is refused, so a secret never sits in the config.
    /// Returns nil (with a problem when `required`) when there is none.
    public mutating func secret(
        _ name: String, of settings: VendorSettings, environment: [String: String], required: Bool = true
    ) -> VendorSecret? {
        let path = settings.path
        let node = settings.options
        if node[name] != nil {
            problem("\(path).\(name)", "\(name.replacingUnderscores)s are not read from the config file", fix: "use \(name)_file or \(name)_env")
        }
        let file = string(node["\(name)_file"], at: "\(path).\(name)_file")
        let variable = string(node["\(name)_env"], at: "\(path).\(name)_env")
        if file != nil, variable != nil {
            problem("\(path).\(name)_env", "\(name)_file and \(name)_env are both set", fix: "keep only one of them")
            return nil
        }
        if let file {
            guard let secret = readSecretFile(file, at: "\(path).\(name)_file", baseDirectory: settings.baseDirectory) else { return nil }
            if secret.isEmpty {
                problem("\(path).\(name)_file", "'\(file)' is empty", fix: "write the \(name.replacingUnderscores) into the file")
                return nil
            }
            return secret
        }
        let variableName = variable ?? Self.defaultSecretVariable(name, vendorID: settings.id)
        if let value = environment[variableName], !value.isEmpty { return VendorSecret(value) }
        if required || variable != nil {
            problem(
                "\(path).\(variable == nil ? "\(name)_file" : "\(name)_env")",
                "no \(name.replacingUnderscores): the environment variable \(variableName) is not set",
                fix: "set \(variableName), or point \(name)_file at a file holding the \(name.replacingUnderscores)"
            )
        }
        return nil
    }

    /// The keys `secret(name, …)` reads, for `rejectUnknownKeys`.
    public static func secretKeys(_ name: String) -> [String] { [name, "\(name)_file", "\(name)_env"] }

    /// The environment variable read when neither `<name>_file` nor `<name>_env` is given: `LBS_<ID>_<NAME>`.
    public static func defaultSecretVariable(_ name: String, vendorID: String) -> String {
        let id = vendorID.uppercased().map { $0.isLetter || $0.isNumber ? $0 : "_" }
        return "LBS_\(String(id))_\(name.uppercased())"
    }

    /// A path from the config file: absolute as given, relative to the file's directory otherwise.
    public static func resolve(_ path: String, baseDirectory: String) -> String {
        if path.hasPrefix("/") || baseDirectory.isEmpty { return path }
        return baseDirectory + "/" + path
    }

    /// The URL without any user-info part, fit for logs, errors and `bridge/info`.
    public static func redactURL(_ url: String) -> String {
        let characters = Array(url)
        guard let colon = characters.indices.first(where: { characters[$0...].starts(with: "://") }) else { return url }
        let rest = characters[(colon + 3)...]
        // User info ends at the last '@' before the path.
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard let at = authority.lastIndex(of: "@") else { return url }
        return String(characters[..<(colon + 3)]) + String(characters[(at + 1)...])
    }
}

extension String {
    /// `api_key` → `api key`, for messages.
    fileprivate var replacingUnderscores: String { split(separator: "_").joined(separator: " ") }
}
