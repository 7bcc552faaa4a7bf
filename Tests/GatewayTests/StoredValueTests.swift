@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayModel
import Testing

/// Values read back from the cache at start-up: scalars, and values with parts (`color`) one level deep.
@Suite struct StoredValueTests {
    @Test func scalarsAndValuesWithPartsComeBackAsTheyWereStored() {
        #expect(CacheLink.stateValue(.number(21.5)) == .number(21.5))
        #expect(CacheLink.stateValue(.string("ON")) == .string("ON"))
        #expect(CacheLink.stateValue(.bool(true)) == .bool(true))
        #expect(CacheLink.stateValue(.object(["hue": .number(120), "s": .number(100), "deeper": .object([:]), "list": .array([])]))
            == .object(["hue": .number(120), "s": .number(100)]))
        #expect(CacheLink.stateValue(.null) == nil && CacheLink.stateValue(.array([.number(1)])) == nil)
    }
}
