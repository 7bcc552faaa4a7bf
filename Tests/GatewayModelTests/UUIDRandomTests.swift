import FoundationEssentials
import GatewayModel
import Testing

@Suite("Random UUIDs")
struct UUIDRandomTests {
    @Test func areVersion4WithTheRFCVariantAndDistinct() {
        var seen = Set<UUID>()
        for _ in 0 ..< 2_000 {
            let id = UUID.random()
            #expect(id.uuid.6 >> 4 == 4)
            #expect(id.uuid.8 >> 6 == 0b10)
            seen.insert(id)
        }
        #expect(seen.count == 2_000)
        let text = UUID.randomText()
        #expect(text == text.lowercased())
        #expect(UUID(uuidString: text) != nil)
    }
}
