import BigInt
import Foundation
import ModularPower
import Testing

/// ModularPower's `BigNumber` (OpenSSL's BIGNUM) against BigInt, an independent implementation: the arithmetic SRP
/// uses, at SRP's sizes, and the byte and hex forms the protocols hash.
@Suite struct BigNumberTests {
    static func big(_ value: BigUInt) -> BigNumber { BigNumber(bytes: [UInt8](value.serialize())) }
    static func reference(_ value: BigNumber) -> BigUInt { BigUInt(Data(value.bytes)) }

    @Test func arithmeticAgreesWithBigIntAtSRPSizes() {
        for width in [1, 63, 64, 65, 256, 3072, 3100] {
            let a = BigUInt.randomInteger(withMaximumWidth: width), b = BigUInt.randomInteger(withMaximumWidth: width) + 1
            let (x, y) = (Self.big(a), Self.big(b))
            #expect(Self.reference(x + y) == a + b, "\(width)")
            #expect(Self.reference(x * y) == a * b, "\(width)")
            #expect(Self.reference(x % y) == a % b, "\(width)")
            let (large, small) = a >= b ? (a, b) : (b, a)
            #expect(Self.reference(Self.big(large) - Self.big(small)) == large - small, "\(width)")
            #expect((x < y) == (a < b) && (x == y) == (a == b), "\(width)")
        }
    }

    @Test func bytesAndHexRoundTrip() {
        for width in [0, 1, 8, 9, 255, 3072] {
            let value = BigUInt.randomInteger(withExactWidth: max(width, 1)) >> (width == 0 ? 1 : 0)
            let number = Self.big(value)
            #expect(number.bytes == [UInt8](value.serialize()), "\(width): minimal big-endian")
            #expect(number.hex == String(value, radix: 16), "\(width): lower-case hex, no leading zeros")
            #expect(BigNumber(hex: number.hex) == number && BigNumber(hex: number.hex.uppercased()) == number)
        }
        #expect(BigNumber(0).bytes.isEmpty && BigNumber(0).hex == "0" && BigNumber(0).isZero)
        #expect(BigNumber(bytes: [0, 0, 1, 2]) == BigNumber(0x0102) && BigNumber(bytes: []).isZero)
        for bad in ["", "0x12", "-1", "12g", " 1", "1 ", "１"] {
            #expect(BigNumber(hex: bad) == nil, "\(bad)")
        }
    }

    @Test func powerAgreesWithBigIntForOddAndEvenModuli() {
        for (width, odd) in [(64, true), (521, true), (1024, true), (64, false), (200, false)] {
            var modulus = BigUInt.randomInteger(withExactWidth: width)
            modulus = odd ? modulus | 1 : ((modulus >> 1) << 1) | 2
            let base = BigUInt.randomInteger(withMaximumWidth: width + 20), exponent = BigUInt.randomInteger(withMaximumWidth: 200)
            let power = Self.big(base).power(Self.big(exponent), oddModulus: Self.big(modulus))
            #expect(Self.reference(power) == base.power(exponent, modulus: modulus), "\(width) bits, odd \(odd)")
        }
    }
}
