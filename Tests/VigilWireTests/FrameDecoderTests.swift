import Testing
@testable import VigilWire

/// Header decoding, resumable at every byte.
@Suite struct FrameDecoderTests {
    func decodeWhole(_ bytes: [UInt8], role: Role = .server, rsv: UInt8 = 0) -> (FrameDecoder.Result, Int) {
        var decoder = FrameDecoder(role: role, allowedRSV: rsv)
        var offset = 0
        let result = bytes.withUnsafeBytes { decoder.decodeHeader($0, offset: &offset) }
        return (result, offset)
    }

    @Test func headerFields() {
        let frame = FrameEncoder.frame(opcode: .binary, payload: [1, 2, 3], fin: false, maskKey: 0x0403_0201)
        #expect(Array(frame[2..<6]) == [0x01, 0x02, 0x03, 0x04])
        let (result, offset) = decodeWhole(frame)
        #expect(offset == 6)
        guard case .header(let h) = result else {
            Issue.record("expected a header")
            return
        }
        #expect(!h.fin && h.opcode == .binary && h.masked && h.payloadLength == 3 && h.maskKey == 0x0403_0201)
    }

    @Test(arguments: [0, 125, 126, 65535, 65536, 100_000])
    func headerSplitAtEveryByte(_ length: Int) {
        var header = [UInt8](repeating: 0, count: 14)
        let written = header.withUnsafeMutableBytes {
            FrameEncoder.writeHeader(into: $0.baseAddress!, opcode: .binary, fin: true, rsv1: false,
                                     payloadCount: length, maskKey: 0xCAFE_BABE)
        }
        header.removeLast(14 - written)
        let expected = FrameHeader(firstByte: 0x82, masked: true, payloadLength: UInt64(length), maskKey: 0xCAFE_BABE)
        for cut in 0...header.count {
            var decoder = FrameDecoder(role: .server)
            var offset = 0
            let first = Array(header[..<cut])
            let r1 = first.withUnsafeBytes { decoder.decodeHeader($0, offset: &offset) }
            if cut == header.count {
                #expect(r1 == .header(expected))
                continue
            }
            #expect(r1 == .needMore && offset == cut)
            offset = 0
            let second = Array(header[cut...]) + [0xEE] // a payload byte must stay unread
            let r2 = second.withUnsafeBytes { decoder.decodeHeader($0, offset: &offset) }
            #expect(r2 == .header(expected))
            #expect(offset == header.count - cut)
        }
        // One byte at a time.
        var decoder = FrameDecoder(role: .server)
        var last = FrameDecoder.Result.needMore
        for byte in header {
            var offset = 0
            last = [byte].withUnsafeBytes { decoder.decodeHeader($0, offset: &offset) }
        }
        #expect(last == .header(expected))
    }

    @Test func prefixRulesFailOnTwoBytesEvenWhenSplit() {
        // Reserved opcode with a 64-bit length: fails before the length arrives.
        var decoder = FrameDecoder(role: .server)
        var offset = 0
        #expect([UInt8(0x83)].withUnsafeBytes { decoder.decodeHeader($0, offset: &offset) } == .needMore)
        offset = 0
        #expect([UInt8(0xFF)].withUnsafeBytes { decoder.decodeHeader($0, offset: &offset) } == .failure(.reservedOpcode(3)))
    }

    @Test func roles() {
        let unmasked = FrameEncoder.frame(opcode: .text, payload: [])
        let maskedFrame = FrameEncoder.frame(opcode: .text, payload: [], maskKey: 1)
        #expect(decodeWhole(unmasked, role: .server).0 == .failure(.unmaskedFrame))
        #expect(decodeWhole(maskedFrame, role: .client).0 == .failure(.maskedFrameFromServer))
        if case .header = decodeWhole(unmasked, role: .client).0 {} else { Issue.record("client must accept unmasked") }
    }

    @Test func emptyInput() {
        #expect(decodeWhole([]).0 == .needMore)
    }
}
