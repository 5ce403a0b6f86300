import Testing
@testable import VigilState
import VigilTestSupport

@Suite struct CRC32CTests {
    /// Bit by bit, straight from the definition: the reference the table-driven code must match.
    static func reference(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = ~0
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
        }
        return ~crc
    }

    @Test func standardCheckValue() {
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
    }

    @Test func publishedVectors() {
        // RFC 3720 (iSCSI) appendix B.4.
        #expect(CRC32C.checksum([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
        #expect(CRC32C.checksum([UInt8](repeating: 0xFF, count: 32)) == 0x62A8_AB43)
        #expect(CRC32C.checksum((0..<32).map { UInt8($0) }) == 0x46DD_794E)
        #expect(CRC32C.checksum((0..<32).map { UInt8(31 - $0) }) == 0x113F_DB5C)
        #expect(CRC32C.checksum([]) == 0)
    }

    /// Every length around the 8-byte stride, at every alignment, against the bitwise reference.
    @Test func matchesTheReferenceAtEveryLengthAndAlignment() {
        let secrets = TestSecrets(seed: 3)
        let data = secrets.randomBytes(200)
        for start in 0..<8 {
            for length in 0...(data.count - start) where length < 40 || length % 17 == 0 {
                let slice = Array(data[start..<(start + length)])
                #expect(CRC32C.checksum(data, range: start..<(start + length)) == Self.reference(slice))
                #expect(CRC32C.checksum(slice) == Self.reference(slice))
            }
        }
    }
}
