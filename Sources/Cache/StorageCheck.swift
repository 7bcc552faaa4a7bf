#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import GatewayModel
#if canImport(Glibc)
import Glibc
#endif

/// What `check-config` can tell about a cache path without changing it: the gateway would refuse a
/// path that fails here at start (or lose its outbox on the first write).
public enum StorageCheck {
    /// Below this much free space the cache cannot take a day of readings; commands would be refused.
    public static let minimumFreeBytes: UInt64 = 1 << 20

    /// Problems with the cache at `path`, in words a user can act on; empty when it looks usable.
    public static func problems(path: String) -> [String] {
        var problems: [String] = []
        let manager = FileManager.default
        let directory = path.deletingLastPathComponent.isEmpty ? "." : path.deletingLastPathComponent
        var isDirectory = false
        if manager.fileExists(atPath: path, isDirectory: &isDirectory) {
            if isDirectory { return ["'\(path)' is a directory; storage.path names the database file"] }
            if !manager.isReadableFile(atPath: path) || !manager.isWritableFile(atPath: path) {
                problems.append("'\(path)' is not readable and writable by this user")
            }
            if let reason = databaseProblem(path) { problems.append(reason) }
        } else {
            var existing = directory
            while !manager.fileExists(atPath: existing), existing != "/", !existing.isEmpty {
                existing = existing.deletingLastPathComponent
                if existing.isEmpty { existing = "." }
            }
            if !manager.isWritableFile(atPath: existing) {
                problems.append("cannot create '\(path)': '\(existing)' is not writable by this user")
            }
            directoryProblems(existing, into: &problems)
            return problems
        }
        directoryProblems(directory, into: &problems)
        return problems
    }

    private static func directoryProblems(_ directory: String, into problems: inout [String]) {
        var stats = statvfs()
        guard statvfs(directory, &stats) == 0 else { return }
        if stats.f_flag & UInt(ST_RDONLY) != 0 {
            problems.append("'\(directory)' is on a read-only file system")
            return
        }
        let free = UInt64(stats.f_bavail) * UInt64(stats.f_frsize)
        if free < minimumFreeBytes {
            problems.append("only \(free / 1024) KiB free under '\(directory)'; the cache needs room for its outbox and readings")
        }
    }

    /// Opens the file read-only and runs SQLite's quick check.
    private static func databaseProblem(_ path: String) -> String? {
        do {
            let db = try SQLiteConnection(path: path, readOnly: true, busyTimeoutSeconds: 5)
            defer { db.close() }
            let result = try String.fetchAll(db, sql: "PRAGMA quick_check").joined(separator: "; ")
            return result == "ok" ? nil : "'\(path)' is damaged (SQLite quick_check: \(result.prefix(200)))"
        } catch {
            return "'\(path)' is not a usable SQLite database: \(error)"
        }
    }
}
