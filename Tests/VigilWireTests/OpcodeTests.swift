import Testing
@testable import VigilWire

@Suite struct OpcodeTests {
    @Test func controlBit() {
        #expect(!Opcode.continuation.isControl)
        #expect(!Opcode.text.isControl)
        #expect(!Opcode.binary.isControl)
        #expect(Opcode.close.isControl)
        #expect(Opcode.ping.isControl)
        #expect(Opcode.pong.isControl)
    }

    @Test func reservedHaveNoCase() {
        for raw in [3, 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF] as [UInt8] {
            #expect(Opcode(rawValue: raw) == nil)
        }
    }
}
