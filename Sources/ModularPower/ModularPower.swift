import BigInt
import COpenSSLCrypto
import Foundation

extension BigUInt {
    /// self^exponent mod modulus for an odd modulus (SRP's prime), by OpenSSL's `BN_mod_exp_mont_consttime`: its
    /// time does not depend on the exponent's bits (the secret), and it is many times faster than BigInt's generic
    /// `power(_:modulus:)` (tests sign in with SRP in debug builds). Falls back to BigInt's own for an even modulus
    /// or if libcrypto fails (out of memory).
    public func power(_ exponent: BigUInt, oddModulus modulus: BigUInt) -> BigUInt {
        guard modulus.words.first.map({ $0 & 1 == 1 }) == true, let context = BN_CTX_new() else {
            return power(exponent, modulus: modulus)
        }
        defer { BN_CTX_free(context) }
        let base = Self.bignum(self % modulus), power = Self.bignum(exponent), odd = Self.bignum(modulus), result = BN_new()
        defer {
            BN_clear_free(base)
            BN_clear_free(power)
            BN_free(odd)
            BN_clear_free(result)
        }
        guard let base, let power, let odd, let result,
              BN_mod_exp_mont_consttime(result, base, power, odd, context, nil) == 1 else {
            return self.power(exponent, modulus: modulus)
        }
        let count = (Int(BN_num_bits(result)) + 7) / 8
        var bytes = [UInt8](repeating: 0, count: count)
        _ = BN_bn2bin(result, &bytes)
        return BigUInt(Data(bytes))
    }

    /// A libcrypto copy of `value` (big-endian bytes), or nil when it cannot allocate.
    private static func bignum(_ value: BigUInt) -> OpaquePointer? {
        let bytes = [UInt8](value.serialize())
        return BN_bin2bn(bytes, Int32(bytes.count), nil)
    }
}
