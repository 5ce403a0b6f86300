import Testing
@testable import VigilPush

/// The RFC 8188 header: the RFC 8291 example's header bytes, round trips, and a body cut at every
/// length refused without reading past it.
@Suite struct ContentCodingHeaderTests {
    @Test func encodesTheRFCHeader() throws {
        let header = ContentCodingHeader(salt: RFC8291Vector.bytes(RFC8291Vector.salt), recordSize: 4096,
                                         keyID: RFC8291Vector.bytes(RFC8291Vector.applicationServerPublic))
        var out: [UInt8] = []
        header.encode(into: &out)
        #expect(out == RFC8291Vector.bytes(RFC8291Vector.header))
        #expect(header.byteCount == 86)
        let (parsed, consumed) = try ContentCodingHeader.parse(out + [1, 2, 3])
        #expect(parsed == header)
        #expect(consumed == 86)
    }

    @Test func everyTruncationIsRefused() {
        let bytes = RFC8291Vector.bytes(RFC8291Vector.header)
        for count in 0..<bytes.count {
            #expect(throws: WebPushError.truncatedHeader(count: count)) { try ContentCodingHeader.parse(Array(bytes.prefix(count))) }
        }
    }

    @Test func recordSizeBelowMinimumIsRefused() throws {
        for size: UInt32 in [0, 1, 17] {
            var out: [UInt8] = []
            ContentCodingHeader(salt: [UInt8](repeating: 7, count: 16), recordSize: size, keyID: []).encode(into: &out)
            #expect(throws: WebPushError.badRecordSize(size)) { try ContentCodingHeader.parse(out) }
        }
        var out: [UInt8] = []
        ContentCodingHeader(salt: [UInt8](repeating: 7, count: 16), recordSize: 0xFFFF_FFFF, keyID: [9]).encode(into: &out)
        #expect(try ContentCodingHeader.parse(out).header.recordSize == 0xFFFF_FFFF)
    }
}
