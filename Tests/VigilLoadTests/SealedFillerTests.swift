import Testing
@testable import VigilLoad

@Suite struct SealedFillerTests {
    @Test func valuesHaveTheSizeOfARealSealedUpdateAndDiffer() {
        var filler = SealedFiller(seed: 1, sealedBytes: SealedFiller.sealedBytes(roundCoordinates: false))
        let first = filler.next(), second = filler.next()
        #expect(first.utf8.count == 208)   // 156 bytes: 128 of padded plaintext, nonce and tag
        #expect(first != second)
        #expect(filler.kid().utf8.count == 22)
        #expect(SealedFiller.sealedBytes(roundCoordinates: true) == 92)
    }
}
