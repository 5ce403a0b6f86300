import Testing
@testable import VigilWire

/// The packed first-byte views of `FrameHeader`.
@Suite struct FrameHeaderTests {
    @Test func bitsOfTheFirstByte() {
        let h = FrameHeader(firstByte: 0xC1, masked: false, payloadLength: 0, maskKey: 0)
        #expect(h.fin && h.rsv1 && h.rsv == 0x40 && h.opcode == .text && h.opcodeBits == 1)
        let c = FrameHeader(firstByte: 0x00, masked: true, payloadLength: 9, maskKey: 7)
        #expect(!c.fin && !c.rsv1 && c.opcode == .continuation)
        #expect(FrameHeader(firstByte: 0x83, masked: false, payloadLength: 0, maskKey: 0).opcode == nil)
    }
}
