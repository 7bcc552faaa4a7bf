#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension UUID {
    /// A random (version 4) UUID from the system generator (`getrandom`, one call). `UUID()` opens, reads and
    /// closes /dev/urandom each time on Linux: three system calls on every command's path.
    public static func random() -> UUID {
        var generator = SystemRandomNumberGenerator()
        var value = (generator.next() as UInt64, generator.next() as UInt64)
        withUnsafeMutableBytes(of: &value) { bytes in
            bytes[6] = (bytes[6] & 0x0F) | 0x40 // version 4
            bytes[8] = (bytes[8] & 0x3F) | 0x80 // RFC 4122 variant
        }
        // Sixteen random bytes either way: the tuple of two words and `uuid_t` have the same size and layout.
        return UUID(uuid: unsafeBitCast(value, to: uuid_t.self))
    }

    /// `random()` as the lowercase text commands and replies carry.
    public static func randomText() -> String { random().uuidString.lowercased() }
}
