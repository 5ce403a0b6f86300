import Testing
import VigilGeo
@testable import VigilCore
import VigilTestSupport

@Suite struct PinStoreTests {
    let secrets = TestSecrets(seed: 17)

    func pin(_ lat: Double, _ lon: Double, expiresAt: Int64 = 10_000) -> Pin {
        Pin(id: PinID(random: secrets.randomBytes(16)), point: GeoPoint(lat: lat, lon: lon), title: "t", description: "",
            category: "general", createdAt: 0, expiresAt: expiresAt, editDigest: secrets.digest(ofToken: "tok"))
    }

    @Test func insertReturnsThePinAsStoredWithTheNextSequence() {
        var store = PinStore()
        let inserted = (0..<5).map { i in store.insert(pin(Double(i), Double(i))) }
        #expect(inserted.map(\.sequence) == [1, 2, 3, 4, 5])
        for returned in inserted {
            let stored = store[returned.id]
            #expect(stored == returned && stored?.sequence == returned.sequence && stored?.cell == returned.cell)
        }
        // Numbering goes on after a removal: sequences are never reused.
        store.remove(inserted[4].id)
        #expect(store.insert(pin(1, 1)).sequence == 6)
    }
}
