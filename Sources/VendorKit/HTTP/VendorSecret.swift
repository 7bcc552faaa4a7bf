#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif
import Resilience
import Synchronization

/// A credential (a vendor's password or API key, the broker's password). Every textual form is redacted, so it cannot leak
/// through logs, errors, `dump` or string interpolation; only `reveal()` hands out the value.
///
/// A secret read from a file follows the file: when it changes (a password fixed after a refused sign-in), the next
/// `reveal()` returns the new value, so a sign-in after a refusal uses what the file says now, without a restart.
public struct VendorSecret: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    private let value: String
    private let file: SecretFile?

    public init(_ value: String) {
        self.value = value
        file = nil
    }

    /// A secret read from `path` (already read: `value`, trimmed of surrounding newlines).
    public init(file path: String, value: String) {
        self.value = value
        file = SecretFile(path: path, value: value)
    }

    /// The secret itself, for the one place that sends it to the vendor.
    public func reveal() -> String { file?.current() ?? value }

    /// True when the secret is empty.
    public var isEmpty: Bool { reveal().isEmpty }

    /// Calls `body` with each new value the file takes (a redactor learns the new password too).
    public func whenChanged(_ body: @escaping @Sendable (String) -> Void) {
        file?.observe(body)
    }

    public static func == (lhs: VendorSecret, rhs: VendorSecret) -> Bool { lhs.reveal() == rhs.reveal() }
    public func hash(into hasher: inout Hasher) { hasher.combine(reveal()) }

    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }

    /// Surrounding newlines trimmed (an editor's final newline is not part of a password).
    static func trimmed(_ text: String) -> String {
        var trimmed = Substring(text)
        while let last = trimmed.last, last.isNewline { trimmed.removeLast() }
        while let first = trimmed.first, first.isNewline { trimmed.removeFirst() }
        return String(trimmed)
    }
}

/// The file behind a secret: re-read when its inode, size or modification time change (one `stat` per use).
/// A file that cannot be read any more keeps the last value.
final class SecretFile: Sendable {
    private struct Stamp: Equatable {
        var inode: UInt64
        var size: Int64
        var seconds: Int
        var nanoseconds: Int
    }
    private struct State {
        var stamp: Stamp?
        var value: String
        var observers: [@Sendable (String) -> Void] = []
    }
    let path: String
    private let state: Mutex<State>

    init(path: String, value: String) {
        self.path = path
        state = Mutex(State(stamp: Self.stamp(path), value: value))
    }

    func current() -> String {
        let now = Self.stamp(path)
        let (value, changed, observers): (String, Bool, [@Sendable (String) -> Void]) = state.withLock { state in
            guard let now, now != state.stamp else { return (state.value, false, []) }
            guard let data = FileManager.default.contents(atPath: path) else { return (state.value, false, []) }
            state.stamp = now
            let fresh = VendorSecret.trimmed(String(decoding: data, as: UTF8.self))
            let changed = fresh != state.value
            state.value = fresh
            return (fresh, changed, state.observers)
        }
        if changed { for observer in observers { observer(value) } }
        return value
    }

    func observe(_ body: @escaping @Sendable (String) -> Void) {
        state.withLock { $0.observers.append(body) }
    }

    private static func stamp(_ path: String) -> Stamp? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return Stamp(inode: UInt64(status.st_ino), size: Int64(status.st_size),
                     seconds: Int(status.st_mtim.tv_sec), nanoseconds: Int(status.st_mtim.tv_nsec))
    }
}

extension SecretRedactor {
    /// Redacts `secret` under `name`, and each value its file takes later (the old ones stay redacted too).
    public func set(_ name: String, _ secret: VendorSecret) {
        set(name, secret.reveal())
        secret.whenChanged { [self] fresh in add(name, fresh) }
    }
}
