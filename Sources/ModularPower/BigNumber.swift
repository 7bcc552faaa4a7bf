import COpenSSLCrypto

/// A non-negative integer of any size on OpenSSL's `BIGNUM` (libcrypto, there for libcurl anyway): what SRP-6a
/// needs (Emporia's Cognito sign-in, HomeKit pair setup), without a big-integer package of its own.
///
/// Immutable: every operation returns a new value. A subtraction below zero stops the program, as for unsigned
/// integers (SRP's arithmetic never does: it adds the modulus first). So does running out of memory.
public final class BigNumber: @unchecked Sendable {
    // @unchecked: the BIGNUM is written only while it is made (in `init`), then only read.
    let handle: OpaquePointer

    private init(taking handle: OpaquePointer) {
        self.handle = handle
    }

    deinit { BN_clear_free(handle) }

    /// A fresh BIGNUM that `write` filled; `write` returns libcrypto's status (1: done). With the preconditions the
    /// operators check (no negative result, no zero modulus), libcrypto fails only when it cannot allocate: this is
    /// the one place that stops the program for it, as a failed Swift allocation would.
    private static func made(_ what: String, _ write: (OpaquePointer) -> Int32) -> OpaquePointer {
        guard let handle = BN_new() else { outOfMemory(what) }
        guard write(handle) == 1 else {
            BN_free(handle)
            outOfMemory(what)
        }
        return handle
    }

    private static func outOfMemory(_ what: String) -> Never {
        fatalError("BigNumber: libcrypto could not allocate for \(what)")
    }

    /// A value `write` computes into a fresh BIGNUM.
    private static func make(_ what: String, _ write: (OpaquePointer) -> Int32) -> BigNumber {
        BigNumber(taking: made(what, write))
    }

    /// A value `write` computes with a scratch context.
    private static func make(_ what: String, _ write: (OpaquePointer, OpaquePointer) -> Int32) -> BigNumber {
        guard let context = BN_CTX_new() else { outOfMemory(what) }
        defer { BN_CTX_free(context) }
        return make(what) { write($0, context) }
    }

    public convenience init(_ value: UInt) {
        self.init(taking: Self.made("a number") { BN_set_word($0, value) })
    }

    /// The number whose big-endian bytes these are (leading zeros allowed; empty is 0).
    public convenience init(bytes: some Collection<UInt8>) {
        let array = Array(bytes)
        self.init(taking: Self.made("a number") { BN_bin2bn(array, Int32(array.count), $0) == nil ? 0 : 1 })
    }

    /// The number written in hexadecimal (either case, no prefix or sign); nil for anything else or an empty text.
    public convenience init?(hex: some StringProtocol) {
        guard !hex.isEmpty, hex.utf8.allSatisfy({ $0 < 0x80 && ($0 >= 0x30 && $0 <= 0x39 || ($0 | 0x20) >= 0x61 && ($0 | 0x20) <= 0x66) })
        else { return nil }
        var handle: OpaquePointer?
        guard BN_hex2bn(&handle, String(hex)) == Int32(hex.utf8.count), let handle else { return nil }
        self.init(taking: handle)
    }

    /// Big-endian bytes without leading zeros (empty for 0).
    public var bytes: [UInt8] {
        var bytes = [UInt8](repeating: 0, count: Int((BN_num_bits(handle) + 7) / 8))
        _ = BN_bn2bin(handle, &bytes)
        return bytes
    }

    /// Lower-case hexadecimal without leading zeros ("0" for 0).
    public var hex: String {
        let digits = "0123456789abcdef".utf8.map { $0 }
        var text: [UInt8] = []
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0f)])
        }
        let trimmed = text.drop { $0 == UInt8(ascii: "0") }
        return trimmed.isEmpty ? "0" : String(decoding: trimmed, as: UTF8.self)
    }

    public var isZero: Bool { BN_is_zero(handle) == 1 }

    public static func + (lhs: BigNumber, rhs: BigNumber) -> BigNumber {
        make("a sum") { BN_add($0, lhs.handle, rhs.handle) }
    }

    public static func - (lhs: BigNumber, rhs: BigNumber) -> BigNumber {
        precondition(lhs >= rhs, "BigNumber: subtraction below zero")
        return make("a difference") { BN_sub($0, lhs.handle, rhs.handle) }
    }

    public static func * (lhs: BigNumber, rhs: BigNumber) -> BigNumber {
        make("a product") { result, context in BN_mul(result, lhs.handle, rhs.handle, context) }
    }

    public static func % (lhs: BigNumber, rhs: BigNumber) -> BigNumber {
        precondition(!rhs.isZero, "BigNumber: remainder by zero")
        return make("a remainder") { result, context in BN_div(nil, result, lhs.handle, rhs.handle, context) }
    }

    /// self^exponent mod modulus. For an odd modulus (SRP's prime) by `BN_mod_exp_mont_consttime`, whose time does
    /// not depend on the exponent's bits (the secret); for an even one by the general `BN_mod_exp`.
    public func power(_ exponent: BigNumber, oddModulus modulus: BigNumber) -> BigNumber {
        precondition(!modulus.isZero, "BigNumber: power modulo zero")
        let reduced = self % modulus
        if BN_is_odd(modulus.handle) == 1 {
            return Self.make("a power") { result, context in
                BN_mod_exp_mont_consttime(result, reduced.handle, exponent.handle, modulus.handle, context, nil)
            }
        }
        return Self.make("a power") { result, context in BN_mod_exp(result, reduced.handle, exponent.handle, modulus.handle, context) }
    }
}

extension BigNumber: Equatable, Comparable {
    public static func == (lhs: BigNumber, rhs: BigNumber) -> Bool { BN_cmp(lhs.handle, rhs.handle) == 0 }
    public static func < (lhs: BigNumber, rhs: BigNumber) -> Bool { BN_cmp(lhs.handle, rhs.handle) < 0 }
}

extension BigNumber: CustomStringConvertible {
    public var description: String { "0x" + hex }
}
