import Testing
@testable import VigilWire

/// RAND_bytes wrapper.
@Suite struct SecureRandomTests {
    @Test func sizesAndVariety() {
        #expect(SecureRandom.bytes(count: 0).isEmpty)
        let a = SecureRandom.bytes(count: 32)
        let b = SecureRandom.bytes(count: 32)
        #expect(a.count == 32 && b.count == 32 && a != b)
        #expect(Set((0..<16).map { _ in SecureRandom.uint32() }).count > 1)
    }
}
