import Testing
@testable import VigilWire
import VigilTestSupport

/// Message-level rules of RFC 6455 §5 as enforced by `MessageReader`.
@Suite struct MessageReaderTests {
    let hello = Array("Hello".utf8)

    @Test func storedSize() {
        let size = MemoryLayout<MessageReader>.size
        print("MemoryLayout<MessageReader>.size = \(size), stride = \(MemoryLayout<MessageReader>.stride)")
        #expect(size <= 96)
    }

    // MARK: RFC 6455 §5.7 examples

    @Test func rfcSingleFrameUnmaskedText() {
        let bytes: [UInt8] = [0x81, 0x05, 0x48, 0x65, 0x6C, 0x6C, 0x6F]
        #expect(read(.client, [bytes]) == [.start(.text, compressed: false), .data(hello), .end])
    }

    @Test func rfcSingleFrameMaskedText() {
        let bytes: [UInt8] = [0x81, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58]
        #expect(read(.server, [bytes]) == [.start(.text, compressed: false), .data(hello), .end])
        // The key maps to the UInt32 whose little-endian bytes are the wire bytes.
        #expect(masked(.text, hello) == bytes)
    }

    @Test func rfcFragmentedUnmaskedText() {
        let bytes: [UInt8] = [0x01, 0x03, 0x48, 0x65, 0x6C, 0x80, 0x02, 0x6C, 0x6F]
        #expect(read(.client, [bytes]) == [
            .start(.text, compressed: false), .data(Array("Hel".utf8)), .data(Array("lo".utf8)), .end,
        ])
    }

    @Test func rfcPingAndMaskedPong() {
        #expect(read(.client, [[0x89, 0x05] + hello]) == [.ping(hello)])
        let pong: [UInt8] = [0x8A, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58]
        #expect(read(.server, [pong]) == [.pong(hello)])
    }

    @Test func rfc256BytesSixteenBitLength() {
        let payload = (0..<256).map { UInt8(truncatingIfNeeded: $0) }
        let bytes: [UInt8] = [0x82, 0x7E, 0x01, 0x00] + payload
        #expect(read(.client, [bytes]) == [.start(.binary, compressed: false), .data(payload), .end])
        #expect(FrameEncoder.frame(opcode: .binary, payload: payload) == bytes)
    }

    @Test func rfc64KiBSixtyFourBitLength() {
        let payload = (0..<65536).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let bytes: [UInt8] = [0x82, 0x7F, 0, 0, 0, 0, 0, 1, 0, 0] + payload
        #expect(read(.client, [bytes]) == [.start(.binary, compressed: false), .data(payload), .end])
        #expect(FrameEncoder.frame(opcode: .binary, payload: payload) == bytes)
        // Masked and split in odd places: the mask phase carries across reads.
        let frame = masked(.binary, payload, key: 0xA1B2_C3D4)
        for cut in [1, 7, 13, 14, 15, 1001, 65537, frame.count - 1] {
            let events = coalesce(read(.server, split(frame, at: [cut, cut + 3])))
            #expect(events == [.start(.binary, compressed: false), .data(payload), .end], "cut \(cut)")
        }
    }

    // MARK: Splits

    /// A stream mixing fragments, an interleaved ping and pong, and a close.
    var mixedStream: [UInt8] {
        masked(.text, Array("Héllo ".utf8), fin: false, key: 0x0102_0304)
            + masked(.ping, Array("p".utf8), key: 0xDEAD_BEEF)
            + masked(.continuation, Array("wörld €𝄞".utf8), fin: false, key: 0x8899_AABB)
            + masked(.pong, [], key: 0x1)
            + masked(.continuation, [], fin: true, key: 0x2)
            + masked(.binary, (0..<300).map { UInt8(truncatingIfNeeded: $0) }, key: 0x1234_5678)
            + masked(.text, [], key: 0x55)
            + masked(.close, FrameEncoder.closePayload(code: .normal, reason: "bye"), key: 0x7788_99AA)
    }

    var mixedExpected: [Ev] {
        [
            .start(.text, compressed: false), .data(Array("Héllo ".utf8)), .ping(Array("p".utf8)),
            .data(Array("wörld €𝄞".utf8)), .pong([]), .end,
            .start(.binary, compressed: false), .data((0..<300).map { UInt8(truncatingIfNeeded: $0) }), .end,
            .start(.text, compressed: false), .end,
            .close(1000, "bye"),
        ]
    }

    @Test func everyTwoWaySplitGivesTheSameEvents() {
        let stream = mixedStream
        let expected = mixedExpected
        #expect(coalesce(read([stream])) == expected)
        for cut in 0...stream.count {
            let events = coalesce(read(split(stream, at: [cut])))
            #expect(events == expected, "split at \(cut)")
        }
    }

    @Test func oneByteAtATime() {
        let stream = mixedStream
        let events = coalesce(read(stream.map { [$0] }))
        #expect(events == mixedExpected)
    }

    @Test func splitControlPayloadIsAccumulated() {
        let ping = masked(.ping, Array("0123456789".utf8))
        for cut in 0...ping.count {
            #expect(read(split(ping, at: [cut])) == [.ping(Array("0123456789".utf8))])
        }
    }

    @Test func idleReaderOwnsNoControlBuffer() {
        var reader = MessageReader(role: .server, maxMessageBytes: 100)
        let ping = masked(.ping, Array("abc".utf8))
        _ = drive(&reader, [Array(ping[0..<8]), Array(ping[8...])])
        #expect(reader.control.capacity == 0)
    }

    // MARK: Frame-level rules surfaced through the reader

    @Test func serverRejectsUnmaskedFrame() {
        let events = read(.server, [FrameEncoder.frame(opcode: .text, payload: hello)])
        #expect(events == [.failure(.unmaskedFrame)])
        #expect(WireError.unmaskedFrame.closeCode == .protocolError)
    }

    @Test func clientRejectsMaskedFrame() {
        #expect(read(.client, [masked(.text, hello)]) == [.failure(.maskedFrameFromServer)])
        #expect(WireError.maskedFrameFromServer.closeCode.rawValue == 1002)
    }

    @Test func reservedBits() {
        for bit: UInt8 in [0x40, 0x20, 0x10] {
            var frame = masked(.text, hello)
            frame[0] |= bit
            #expect(read([frame]) == [.failure(.reservedBitsSet)])
        }
        #expect(WireError.reservedBitsSet.closeCode.rawValue == 1002)
    }

    @Test func rsv1WhenNegotiated() {
        // Allowed on the first frame of a data message...
        let first = masked(.text, hello, fin: false, rsv1: true)
        let cont = masked(.continuation, hello, rsv1: false)
        #expect(read(rsv: 0x40, [first + cont]) == [
            .start(.text, compressed: true), .data(hello), .data(hello), .end,
        ])
        // ...not on continuation or control frames.
        let badCont = masked(.continuation, hello, rsv1: true)
        #expect(read(rsv: 0x40, [first + badCont]) == [
            .start(.text, compressed: true), .data(hello), .failure(.reservedBitsSet),
        ])
        #expect(read(rsv: 0x40, [masked(.ping, [], rsv1: true)]) == [.failure(.reservedBitsSet)])
        // RSV2 is still refused when only RSV1 is allowed.
        var rsv2 = masked(.binary, hello)
        rsv2[0] |= 0x20
        #expect(read(rsv: 0x40, [rsv2]) == [.failure(.reservedBitsSet)])
    }

    @Test func reservedOpcodes() {
        for op: UInt8 in [3, 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF] {
            var frame = masked(.binary, hello)
            frame[0] = 0x80 | op
            let events = read([frame])
            #expect(events == [.failure(.reservedOpcode(op))])
            #expect(WireError.reservedOpcode(op).closeCode.rawValue == 1002)
        }
    }

    @Test func controlFrameRules() {
        #expect(read([masked(.ping, [UInt8](repeating: 1, count: 125))]) == [.ping([UInt8](repeating: 1, count: 125))])
        #expect(read([masked(.ping, [UInt8](repeating: 1, count: 126))]) == [.failure(.controlFrameTooLong)])
        #expect(read([masked(.pong, [], fin: false)]) == [.failure(.fragmentedControlFrame)])
        #expect(read([masked(.close, [], fin: false)]) == [.failure(.fragmentedControlFrame)])
        #expect(WireError.controlFrameTooLong.closeCode.rawValue == 1002)
        #expect(WireError.fragmentedControlFrame.closeCode.rawValue == 1002)
    }

    @Test func controlTooLongFailsOnTwoBytes() {
        // 0x89 0xFE: masked ping with a 16-bit length; known bad from two bytes.
        var reader = MessageReader(role: .server, maxMessageBytes: 10)
        var bytes: [UInt8] = [0x89, 0xFE]
        let event = bytes.withUnsafeMutableBytes { buffer -> Ev? in
            var offset = 0
            return Ev(reader.next(buffer, offset: &offset))
        }
        #expect(event == .failure(.controlFrameTooLong))
    }

    @Test func continuationOrder() {
        #expect(read([masked(.continuation, hello)]) == [.failure(.unexpectedContinuation)])
        let events = read([masked(.text, hello, fin: false) + masked(.binary, hello)])
        #expect(events == [.start(.text, compressed: false), .data(hello), .failure(.expectedContinuation)])
        #expect(WireError.unexpectedContinuation.closeCode.rawValue == 1002)
        #expect(WireError.expectedContinuation.closeCode.rawValue == 1002)
    }

    @Test func lengthEncodingRules() {
        // 64-bit length with the most significant bit set.
        let high: [UInt8] = [0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 1, 1, 2, 3, 4]
        #expect(read([high]) == [.failure(.lengthHighBitSet)])
        // 16-bit form for a length below 126, 64-bit form for one below 65536.
        let short16: [UInt8] = [0x82, 0xFE, 0x00, 0x05, 1, 2, 3, 4] + [UInt8](repeating: 0, count: 5)
        #expect(read([short16]) == [.failure(.nonMinimalLength)])
        let short64: [UInt8] = [0x82, 0xFF, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 1, 2, 3, 4]
        #expect(read([short64]) == [.failure(.nonMinimalLength)])
        #expect(WireError.lengthHighBitSet.closeCode.rawValue == 1002)
        #expect(WireError.nonMinimalLength.closeCode.rawValue == 1002)
    }

    // MARK: Message size

    @Test func messageExactlyAtLimitIsAccepted() {
        let payload = [UInt8](repeating: 0x61, count: 1000)
        let events = coalesce(read(max: 1000, [masked(.binary, payload)]))
        #expect(events == [.start(.binary, compressed: false), .data(payload), .end])
        let fragmented = masked(.text, Array(payload[..<600]), fin: false) + masked(.continuation, Array(payload[600...]))
        #expect(coalesce(read(max: 1000, [fragmented])) == [.start(.text, compressed: false), .data(payload), .end])
    }

    @Test func messageOverLimitFailsOnTheHeader() {
        let frame = masked(.binary, [UInt8](repeating: 0x61, count: 1001))
        var reader = MessageReader(role: .server, maxMessageBytes: 1000)
        var bytes = frame
        bytes.withUnsafeMutableBytes { buffer in
            var offset = 0
            let event = Ev(reader.next(buffer, offset: &offset))
            #expect(event == .failure(.messageTooBig))
            // Only the 8-byte header (2 + 2 length + 4 key) was consumed.
            #expect(offset == 8)
            #expect(Ev(reader.next(buffer, offset: &offset)) == .failure(.messageTooBig))
        }
        #expect(WireError.messageTooBig.closeCode.rawValue == 1009)
    }

    @Test func cumulativeSizeOverLimit() {
        let first = masked(.text, [UInt8](repeating: 0x61, count: 600), fin: false)
        let second = masked(.continuation, [UInt8](repeating: 0x61, count: 401))
        let events = coalesce(read(max: 1000, [first + second]))
        #expect(events == [.start(.text, compressed: false), .data([UInt8](repeating: 0x61, count: 600)), .failure(.messageTooBig)])
    }

    @Test func hugeAnnouncedLengthDoesNotTrap() {
        // 2^63 - 1 announced: must fail cleanly, never overflow.
        let header: [UInt8] = [0x82, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3, 4]
        #expect(read(max: Int.max, [header]) == [.start(.binary, compressed: false)])
        #expect(read(max: 1 << 30, [header]) == [.failure(.messageTooBig)])
        let cont: [UInt8] = [0x80, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3, 4]
        // 5 bytes already in the message + (2^63 - 1) exceeds even Int.max.
        #expect(read(max: Int.max, [masked(.binary, hello, fin: false) + cont])
            == [.start(.binary, compressed: false), .data(hello), .failure(.messageTooBig)])
    }

    // MARK: UTF-8

    @Test func invalidUTF8FailsFastMidFrame() {
        // A 100-byte text frame whose 11th byte is invalid; only 20 bytes arrive.
        var payload = [UInt8](repeating: 0x61, count: 100)
        payload[10] = 0xFF
        let frame = masked(.text, payload)
        let events = read([Array(frame[..<(6 + 20)])])
        // No data event for the bad chunk, and the failure comes before the frame ends.
        #expect(events == [.start(.text, compressed: false), .failure(.invalidUTF8)])
        #expect(WireError.invalidUTF8.closeCode.rawValue == 1007)
    }

    @Test func invalidUTF8FailsAcrossFragments() {
        // E0 starts a 3-byte sequence; 0x80 after it would be overlong.
        let events = read([masked(.text, [0x61, 0xE0], fin: false), masked(.continuation, [0x80, 0x80])])
        #expect(events == [.start(.text, compressed: false), .data([0x61, 0xE0]), .failure(.invalidUTF8)])
    }

    @Test func codePointSplitBetweenFragmentsIsValid() {
        let euro: [UInt8] = [0xE2, 0x82, 0xAC]
        let stream = masked(.text, [euro[0]], fin: false) + masked(.continuation, [euro[1]], fin: false)
            + masked(.continuation, [euro[2]])
        #expect(coalesce(read([stream])) == [.start(.text, compressed: false), .data(euro), .end])
    }

    @Test func textEndingMidCodePointFails() {
        let events = read([masked(.text, [0x61, 0xE2, 0x82])])
        #expect(events == [.start(.text, compressed: false), .data([0x61, 0xE2, 0x82]), .failure(.invalidUTF8)])
    }

    @Test func binaryIsNotValidated() {
        let events = read([masked(.binary, [0xFF, 0xFE])])
        #expect(events == [.start(.binary, compressed: false), .data([0xFF, 0xFE]), .end])
    }

    @Test func validationCanBeTurnedOff() {
        var reader = MessageReader(role: .server, maxMessageBytes: 100, allowedRSV: 0x40)
        var bytes = masked(.text, [0xFF, 0xC0], rsv1: true)
        var events: [Ev] = []
        bytes.withUnsafeMutableBytes { buffer in
            var offset = 0
            while let ev = Ev(reader.next(buffer, offset: &offset)) {
                events.append(ev)
                if case .start(_, compressed: true) = ev { reader.validatesText = false }
            }
        }
        #expect(events == [.start(.text, compressed: true), .data([0xFF, 0xC0]), .end])
    }

    // MARK: Empty frames

    @Test func emptyMessages() {
        #expect(read([masked(.text, [])]) == [.start(.text, compressed: false), .end])
        #expect(read([masked(.binary, [], fin: false) + masked(.continuation, [], fin: false) + masked(.continuation, [])])
            == [.start(.binary, compressed: false), .end])
        #expect(read([masked(.ping, [])]) == [.ping([])])
    }

    // MARK: Close frames

    @Test func closeFrames() {
        #expect(read([masked(.close, [])]) == [.close(nil, "")])
        #expect(read([masked(.close, [0x03, 0xE8])]) == [.close(1000, "")])
        #expect(read([masked(.close, [0x03, 0xE8] + Array("done ✓".utf8))]) == [.close(1000, "done ✓")])
        #expect(read([masked(.close, [0x03])]) == [.failure(.closePayloadTooShort)])
        #expect(WireError.closePayloadTooShort.closeCode.rawValue == 1002)
    }

    @Test(arguments: [UInt16(0), 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000, 65535])
    func invalidCloseCodes(_ code: UInt16) {
        let payload = [UInt8(code >> 8), UInt8(code & 0xFF)]
        #expect(read([masked(.close, payload)]) == [.failure(.invalidCloseCode(code))])
        #expect(WireError.invalidCloseCode(code).closeCode.rawValue == 1002)
    }

    @Test(arguments: [UInt16(1000), 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 3999, 4000, 4999])
    func validCloseCodes(_ code: UInt16) {
        let payload = [UInt8(code >> 8), UInt8(code & 0xFF)]
        #expect(read([masked(.close, payload)]) == [.close(code, "")])
    }

    @Test func closeWithInvalidUTF8Reason() {
        let payload: [UInt8] = [0x03, 0xE8, 0xCE, 0xBA, 0xED, 0xA0, 0x80]
        #expect(read([masked(.close, payload)]) == [.failure(.invalidUTF8)])
    }

    // MARK: Terminal failure

    @Test func failureIsSticky() {
        var reader = MessageReader(role: .server, maxMessageBytes: 100)
        let first = drive(&reader, [FrameEncoder.frame(opcode: .text, payload: hello)])
        #expect(first == [.failure(.unmaskedFrame)])
        let later = drive(&reader, [masked(.text, hello)])
        #expect(later == [.failure(.unmaskedFrame)])
    }

    @Test func emptyBufferIsNeedMore() {
        var reader = MessageReader(role: .server, maxMessageBytes: 100)
        var offset = 0
        let event = reader.next(UnsafeMutableRawBufferPointer(start: nil, count: 0), offset: &offset)
        #expect(Ev(event) == nil)
    }
}
