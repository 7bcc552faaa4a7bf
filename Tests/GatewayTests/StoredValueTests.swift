@testable import GatewayCore
@testable import LBSGatewayApp
import GatewayModel
import Testing

/// Values read back from the cache at start-up: scalars, and values with parts (`color`) one level deep.
@Suite struct StoredValueTests {
    @Test func scalarsAndValuesWithPartsComeBackAsTheyWereStored() {
        #expect(Persistence.stateValue(.number(21.5)) == .number(21.5))
        #expect(Persistence.stateValue(.string("ON")) == .string("ON"))
        #expect(Persistence.stateValue(.bool(true)) == .bool(true))
        #expect(Persistence.stateValue(.object(["hue": .number(120), "s": .number(100), "deeper": .object([:]), "list": .array([])]))
            == .object(["hue": .number(120), "s": .number(100)]))
        #expect(Persistence.stateValue(.null) == nil && Persistence.stateValue(.array([.number(1)])) == nil)
    }
}
