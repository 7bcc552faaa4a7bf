import BigInt
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ModularPower

extension BigUInt {
    /// self^exponent mod modulus through libcrypto (`BigNumber`). The simulators and tests keep BigInt as an
    /// implementation of SRP independent of the gateway's; BigInt's own `power(_:modulus:)` is many times slower in
    /// the debug builds the tests run, where every sign-in does two or three 3072-bit exponentiations.
    public func power(_ exponent: BigUInt, oddModulus modulus: BigUInt) -> BigUInt {
        let result = BigNumber(bytes: [UInt8](serialize())).power(BigNumber(bytes: [UInt8](exponent.serialize())),
                                                                  oddModulus: BigNumber(bytes: [UInt8](modulus.serialize())))
        return BigUInt(Data(result.bytes))
    }
}
