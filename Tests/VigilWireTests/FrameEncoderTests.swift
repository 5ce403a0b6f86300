import Testing
@testable import VigilWire
import VigilTestSupport

/// Header encoding, masking and close payloads.
@Suite struct FrameEncoderTests {
    @Test func headerSizes() {
        #expect(FrameEncoder.headerSize(payloadCount: 0, masked: false) == 2)
        #expect(FrameEncoder.headerSize(payloadCount: 125, masked: false) == 2)
        #expect(FrameEncoder.headerSize(payloadCount: 126, masked: false) == 4)
        #expect(FrameEncoder.headerSize(payloadCount: 65535, masked: true) == 8)
        #expect(FrameEncoder.headerSize(payloadCount: 65536, masked: false) == 10)
        #expect(FrameEncoder.headerSize(payloadCount: 65536, masked: true) == 14)
    }

    @Test func headerBytes() {
        var out = [UInt8](repeating: 0, count: 14)
        let n = out.withUnsafeMutableBytes {
            FrameEncoder.writeHeader(into: $0.baseAddress!, opcode: .text, fin: true, rsv1: true,
                                     payloadCount: 70_000, maskKey: 0x4433_2211)
        }
        #expect(n == 14)
        #expect(out == [0xC1, 0xFF, 0, 0, 0, 0, 0, 0x01, 0x11, 0x70, 0x11, 0x22, 0x33, 0x44])
        let m = out.withUnsafeMutableBytes {
            FrameEncoder.writeHeader(into: $0.baseAddress!, opcode: .continuation, fin: false, rsv1: false,
                                     payloadCount: 300, maskKey: nil)
        }
        #expect(m == 4 && Array(out[..<4]) == [0x00, 0x7E, 0x01, 0x2C])
    }

    @Test func maskMatchesBytewiseDefinition() {
        var rng = SplitMix64(state: 42)
        for _ in 0..<300 {
            let count = Int.random(in: 0...100, using: &rng)
            let key = UInt32.random(in: 0...UInt32.max, using: &rng)
            let phase = Int.random(in: 0...7, using: &rng)
            let original = (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
            // §5.3: octet i is XORed with key octet (i mod 4); key octet j = byte j of key (LE).
            let expected = original.enumerated().map { i, b in
                b ^ UInt8(truncatingIfNeeded: key >> (8 * UInt32((i + phase) % 4)))
            }
            var bytes = original
            bytes.withUnsafeMutableBytes { FrameEncoder.applyMask($0, key: key, phase: phase) }
            #expect(bytes == expected)
            bytes.withUnsafeMutableBytes { FrameEncoder.applyMask($0, key: key, phase: phase) }
            #expect(bytes == original)
        }
    }

    @Test func maskResumesWithPhase() {
        let payload = (0..<97).map { UInt8(truncatingIfNeeded: $0 * 3) }
        var whole = payload
        whole.withUnsafeMutableBytes { FrameEncoder.applyMask($0, key: 0x1234_5678, phase: 0) }
        for cut in 0...payload.count {
            var pieces = payload
            pieces.withUnsafeMutableBytes { all in
                FrameEncoder.applyMask(UnsafeMutableRawBufferPointer(rebasing: all[..<cut]), key: 0x1234_5678, phase: 0)
                FrameEncoder.applyMask(UnsafeMutableRawBufferPointer(rebasing: all[cut...]), key: 0x1234_5678, phase: cut)
            }
            #expect(pieces == whole)
        }
    }

    @Test func encodeDecodeRoundTrip() {
        for key: UInt32 in [0x0000_0001, 0x8000_0000, 0xFFFF_FFFF, 0x3D21_FA37] {
            for length in [0, 1, 125, 126, 127, 65535, 65536] {
                let payload = (0..<length).map { UInt8(truncatingIfNeeded: $0 ^ 0x5A) }
                let frame = FrameEncoder.frame(opcode: .binary, payload: payload, maskKey: key)
                var expected: [Ev] = [.start(.binary, compressed: false)]
                if length > 0 { expected.append(.data(payload)) }
                expected.append(.end)
                #expect(read([frame]) == expected)
            }
        }
    }

    @Test func closePayloads() {
        #expect(FrameEncoder.closePayload(code: .normal, reason: "") == [0x03, 0xE8])
        #expect(FrameEncoder.closePayload(code: .goingAway, reason: "bye") == [0x03, 0xE9] + Array("bye".utf8))
        // 122 ASCII bytes + a 2-byte character would be 124: cut before the character.
        let reason = String(repeating: "a", count: 122) + "é"
        let payload = FrameEncoder.closePayload(code: .normal, reason: reason)
        #expect(payload.count == 2 + 122)
        // 4-byte characters only: 123 bytes allow 30 of them (120 bytes).
        let emoji = FrameEncoder.closePayload(code: .normal, reason: String(repeating: "😀", count: 40))
        #expect(emoji.count == 2 + 120)
        #expect(Array(emoji[2...]).withUnsafeBytes { UTF8Validator.validate($0) })
        let exact = FrameEncoder.closePayload(code: .normal, reason: String(repeating: "x", count: 200))
        #expect(exact.count == 125)
        // The result is a valid close frame payload.
        #expect(read([masked(.close, payload)]) == [.close(1000, String(repeating: "a", count: 122))])
    }
}
