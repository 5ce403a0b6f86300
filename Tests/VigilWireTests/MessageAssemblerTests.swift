import Testing
@testable import VigilWire
import VigilTestSupport

/// Whole messages out of chunked input, with and without permessage-deflate (RFC 7692).
@Suite struct MessageAssemblerTests {
    /// An owned copy of an assembler event.
    enum Out: Equatable {
        case message(MessageKind, [UInt8])
        case ping([UInt8])
        case pong([UInt8])
        case close(UInt16?, String)
        case failure(WireError)
    }

    static let agreed = DeflateParameters(serverNoContextTakeover: true, clientNoContextTakeover: true,
                                          serverMaxWindowBits: 15, clientMaxWindowBits: 15)

    /// Feeds chunks the way a connection does; stops at a failure or close.
    func assemble(_ assembler: inout MessageAssembler, _ chunks: [[UInt8]]) -> [Out] {
        var out: [Out] = []
        for chunk in chunks {
            var bytes = chunk
            let stop: Bool = bytes.withUnsafeMutableBytes { buffer in
                var offset = 0
                while true {
                    switch assembler.next(buffer, offset: &offset) {
                    case .needMore:
                        precondition(offset == buffer.count)
                        return false
                    case .message(let kind, let m): out.append(.message(kind, Array(m)))
                    case .ping(let p): out.append(.ping(p))
                    case .pong(let p): out.append(.pong(p))
                    case .close(let c, let r):
                        out.append(.close(c, r))
                        return true
                    case .failure(let e):
                        out.append(.failure(e))
                        return true
                    }
                }
            }
            if stop { break }
        }
        return out
    }

    func assemble(inflation: DeflateParameters? = agreed, max: Int = 1 << 20, _ chunks: [[UInt8]]) -> [Out] {
        var assembler = MessageAssembler(role: .server, maxMessageBytes: max, inflation: inflation)
        return assemble(&assembler, chunks)
    }

    let hello = Array("Hello".utf8)

    @Test func rfcCompressedFrames() {
        // §7.2.3.1, masked as a client sends it: one frame, and fragmented in two.
        #expect(assemble([masked(.text, RFC7692.hello, rsv1: true)]) == [.message(.text, hello)])
        let p = RFC7692.hello
        let fragmented = masked(.text, Array(p[..<3]), fin: false, rsv1: true) + masked(.continuation, Array(p[3...]))
        #expect(assemble([fragmented]) == [.message(.text, hello)])
        // §7.2.3.3-6.
        for payload in [RFC7692.helloStored, RFC7692.helloFinal, RFC7692.helloTwoBlocks] {
            #expect(assemble([masked(.text, payload, rsv1: true)]) == [.message(.text, hello)])
        }
        #expect(assemble([masked(.binary, RFC7692.empty, rsv1: true)]) == [.message(.binary, [])])
        #expect(assemble([masked(.text, [], rsv1: true)]) == [.message(.text, [])])
    }

    @Test func contextTakeoverAcrossMessages() {
        // §7.2.3.2 needs the window kept: agreed without client_no_context_takeover.
        var keep = MessageAssemblerTests.agreed
        keep.clientNoContextTakeover = false
        let stream = masked(.text, RFC7692.hello, rsv1: true) + masked(.text, RFC7692.helloAgain, rsv1: true)
        #expect(assemble(inflation: keep, [stream]) == [.message(.text, hello), .message(.text, hello)])
        #expect(assemble([stream]) == [.message(.text, hello), .failure(.invalidCompressedData)])
    }

    @Test func everySplitOfAMixedStream() {
        // Compressed and plain messages, fragments, a ping between fragments.
        var rng = SplitMix64(state: 21)
        let text = sampleMessage(&rng, count: 300)
        let deflater = makeDeflater()
        let payload = deflate(deflater, text)
        let half = payload.count / 2
        var stream = masked(.text, Array(payload[..<half]), fin: false, rsv1: true)
        stream += masked(.ping, [1, 2, 3])
        stream += masked(.continuation, Array(payload[half...]))
        stream += masked(.binary, [9, 8, 7])
        stream += masked(.text, RFC7692.hello, rsv1: true)
        stream += masked(.text, hello)
        let expected: [Out] = [.ping([1, 2, 3]), .message(.text, text), .message(.binary, [9, 8, 7]),
                               .message(.text, hello), .message(.text, hello)]
        #expect(assemble([stream]) == expected)
        for a in stride(from: 0, through: stream.count, by: 3) {
            for b in stride(from: a, through: stream.count, by: 7) {
                let got = assemble(split(stream, at: [a, b]))
                if got != expected {
                    Issue.record("split at \(a), \(b): \(got)")
                    return
                }
            }
        }
    }

    @Test func invalidUTF8InInflatedTextFailsAtOnce() {
        // A message whose first inflated chunk is already invalid fails on that chunk,
        // before the rest of the message arrives.
        let bad: [UInt8] = [0x48, 0xC0, 0x80] + [UInt8](repeating: 0x41, count: 200)
        let payload = deflate(makeDeflater(), bad)
        let frame = masked(.text, payload, rsv1: true)
        var assembler = MessageAssembler(role: .server, maxMessageBytes: 1 << 20, inflation: MessageAssemblerTests.agreed)
        let out = assemble(&assembler, [Array(frame[..<(frame.count - 1)])])
        #expect(out == [.failure(.invalidUTF8)])
        #expect(WireError.invalidUTF8.closeCode == .invalidPayload)
        // Terminal: later bytes are not read.
        #expect(assemble(&assembler, [masked(.text, hello)]) == [.failure(.invalidUTF8)])
        // A code point cut at the message's end.
        #expect(assemble([masked(.text, deflate(makeDeflater(), [0x41, 0xE2, 0x82]), rsv1: true)]) == [.failure(.invalidUTF8)])
        // Binary is not validated; a code point split between inflated chunks is fine.
        #expect(assemble([masked(.binary, deflate(makeDeflater(), [0xC0]), rsv1: true)]) == [.message(.binary, [0xC0])])
        let euro = Array("€€€".utf8)
        let euroPayload = deflate(makeDeflater(), euro)
        for cut in 0...euroPayload.count {
            let f = masked(.text, Array(euroPayload[..<cut]), fin: false, rsv1: true) + masked(.continuation, Array(euroPayload[cut...]))
            #expect(assemble(split(f, at: [cut + 6])) == [.message(.text, euro)])
        }
    }

    @Test func readerValidationIsRestoredAfterACompressedMessage() {
        // Plain invalid text after a compressed message is still caught by the reader.
        let stream = masked(.text, RFC7692.hello, rsv1: true) + masked(.text, [0xFF])
        #expect(assemble([stream]) == [.message(.text, hello), .failure(.invalidUTF8)])
        // A reader with validation off (a load client) stays off, compressed or not.
        var reader = MessageReader(role: .server, maxMessageBytes: 1 << 20, allowedRSV: 0x40)
        reader.validatesText = false
        var assembler = MessageAssembler(reader: reader, inflation: MessageAssemblerTests.agreed)
        let bad = deflate(makeDeflater(), [0xFF])
        #expect(assemble(&assembler, [masked(.text, bad, rsv1: true) + masked(.text, [0xFE])])
            == [.message(.text, [0xFF]), .message(.text, [0xFE])])
        #expect(!assembler.reader.validatesText)
    }

    @Test func inflatedSizeIsLimited() {
        let zeros = [UInt8](repeating: 0x20, count: 10_000)
        let frame = masked(.text, deflate(makeDeflater(), zeros), rsv1: true)
        #expect(assemble(max: 10_000, [frame]) == [.message(.text, zeros)])
        #expect(assemble(max: 9_999, [frame]) == [.failure(.messageTooBig)])
        #expect(WireError.messageTooBig.closeCode == .messageTooBig)
    }

    @Test func corruptPayloadIs1007() {
        #expect(assemble([masked(.binary, [0xFF, 0x00], rsv1: true)]) == [.failure(.invalidCompressedData)])
        #expect(WireError.invalidCompressedData.closeCode.rawValue == 1007)
    }

    @Test func rsv1WithoutAnAgreementIs1002() {
        #expect(assemble(inflation: nil, [masked(.text, RFC7692.hello, rsv1: true)]) == [.failure(.reservedBitsSet)])
        // A reader that allows RSV1 without an inflater still refuses compressed messages.
        var assembler = MessageAssembler(reader: MessageReader(role: .server, maxMessageBytes: 100, allowedRSV: 0x40))
        #expect(assemble(&assembler, [masked(.text, RFC7692.hello, rsv1: true)]) == [.failure(.reservedBitsSet)])
        // RSV1 on a continuation frame stays a 1002 with compression agreed (RFC 7692 §6.1).
        let cont = masked(.text, [0xF2], fin: false, rsv1: true) + masked(.continuation, [0x48], rsv1: true)
        #expect(assemble([cont]) == [.failure(.reservedBitsSet)])
    }

    @Test func uncompressedPathIsZeroCopy() {
        // With compression agreed, a plain message arriving whole still points into the buffer.
        var assembler = MessageAssembler(role: .server, maxMessageBytes: 1 << 20, inflation: MessageAssemblerTests.agreed)
        var bytes = masked(.text, hello)
        bytes.withUnsafeMutableBytes { buffer in
            var offset = 0
            guard case .message(_, let m) = assembler.next(buffer, offset: &offset) else {
                Issue.record("no message")
                return
            }
            #expect(m.baseAddress == UnsafeRawPointer(buffer.baseAddress! + buffer.count - 5))
        }
    }

    @Test func inflaterMemoryIsReleased() {
        var assembler = MessageAssembler(role: .server, maxMessageBytes: 1 << 20, inflation: MessageAssemblerTests.agreed)
        #expect(assembler.inflater?.heapBytes == 0)
        var rng = SplitMix64(state: 22)
        let text = sampleMessage(&rng, count: 3000)
        var frame = masked(.text, deflate(makeDeflater(), text), rsv1: true)
        frame.withUnsafeMutableBytes { buffer in
            var offset = 0
            guard case .message(.text, let m) = assembler.next(buffer, offset: &offset) else { return }
            #expect(Array(m) == text)
            #expect(assembler.inflater!.heapBytes > 0) // the output, until the next call
            #expect(!assembler.inflater!.hasStream)    // zlib freed at the message's end
            #expect(assembler.next(buffer, offset: &offset).isNeedMore)
            #expect(assembler.inflater!.heapBytes == 0)
        }
        // Mid-message: reset drops everything.
        let half = masked(.text, Array(deflate(makeDeflater(), text).prefix(20)), fin: false, rsv1: true)
        _ = assemble(&assembler, [half])
        #expect(assembler.isMidMessage)
        #expect(assembler.inflater!.hasStream)
        assembler.reset()
        #expect(!assembler.isMidMessage)
        #expect(assembler.inflater!.heapBytes == 0)
    }

    @Test func randomCompressedStreamsInRandomChunks() {
        var rng = SplitMix64(state: 0xA55E)
        for iteration in 0..<300 {
            let takeover = Bool.random(using: &rng)
            var params = MessageAssemblerTests.agreed
            params.clientNoContextTakeover = !takeover
            params.clientMaxWindowBits = Int.random(in: 9...15, using: &rng)
            let deflater = makeDeflater(window: params.clientMaxWindowBits, noContextTakeover: !takeover)
            var stream: [UInt8] = []
            var expected: [Out] = []
            for _ in 0..<Int.random(in: 1...5, using: &rng) {
                let binary = Bool.random(using: &rng)
                let message = sampleMessage(&rng, count: Int.random(in: 0...3000, using: &rng), binary: binary)
                let compress = Bool.random(using: &rng)
                let payload = compress ? deflate(deflater, message) : message
                var cuts = (0..<Int.random(in: 0...3, using: &rng)).map { _ in Int.random(in: 0...payload.count, using: &rng) }
                cuts.sort()
                let fragments = split(payload, at: cuts)
                for (i, fragment) in fragments.enumerated() {
                    let opcode: Opcode = i > 0 ? .continuation : (binary ? .binary : .text)
                    stream += masked(opcode, fragment, fin: i == fragments.count - 1, rsv1: compress && i == 0,
                                     key: UInt32.random(in: 0...UInt32.max, using: &rng))
                }
                expected.append(.message(binary ? .binary : .text, message))
            }
            let cuts = (0..<Int.random(in: 0...8, using: &rng)).map { _ in Int.random(in: 0...stream.count, using: &rng) }
            let got = assemble(inflation: params, split(stream, at: cuts))
            if got != expected {
                Issue.record("iteration \(iteration): \(got.count) events, expected \(expected.count)")
                return
            }
        }
    }

    /// Feeds chunks as vigild's connection does: after each chunk an assembler at rest is let go
    /// and the next chunk gets a new one (an idle connection keeps none).
    func assembleParking(max: Int, _ chunks: [[UInt8]], parked: inout Int) -> [Out] {
        var out: [Out] = []
        var kept: MessageAssembler?
        for chunk in chunks {
            var assembler = kept ?? MessageAssembler(role: .server, maxMessageBytes: max, inflation: nil)
            let got = assemble(&assembler, [chunk])
            out += got
            if let last = got.last, case .failure = last { break }
            if let last = got.last, case .close = last { break }
            kept = assembler.isAtRest ? nil : assembler
            if kept != nil { parked += 1 }
        }
        return out
    }

    @Test func atRestOnlyBetweenWholeFrames() {
        var a = MessageAssembler(role: .server, maxMessageBytes: 100, inflation: nil)
        #expect(a.isAtRest)
        let text = masked(.text, hello)
        #expect(assemble(&a, [text + masked(.ping, [1])]) == [.message(.text, hello), .ping([1])])
        #expect(a.isAtRest)
        _ = assemble(&a, [Array(text[..<1])])  // one byte of a header
        #expect(!a.isAtRest)
        _ = assemble(&a, [Array(text[1...])])
        #expect(a.isAtRest)
        _ = assemble(&a, [Array(text[..<(text.count - 1)])])  // inside a payload
        #expect(!a.isAtRest)
        _ = assemble(&a, [Array(text[(text.count - 1)...])])
        #expect(a.isAtRest)
        _ = assemble(&a, [masked(.text, hello, fin: false)])  // between fragments
        #expect(!a.isAtRest)
        _ = assemble(&a, [masked(.continuation, hello)])
        #expect(a.isAtRest)
        let ping = masked(.ping, [1, 2, 3])
        _ = assemble(&a, [Array(ping[..<(ping.count - 1)])])  // inside a control payload
        #expect(!a.isAtRest)
        _ = assemble(&a, [Array(ping[(ping.count - 1)...])])
        #expect(a.isAtRest)
        _ = assemble(&a, [masked(.continuation, hello)])  // failed: terminal, so never let go
        #expect(!a.isAtRest)
        // Compression's state lives in the assembler: one with an agreement is never at rest.
        #expect(!MessageAssembler(role: .server, maxMessageBytes: 100, inflation: MessageAssemblerTests.agreed).isAtRest)
    }

    @Test func aNewAssemblerStandsInForOneAtRest() {
        var rng = SplitMix64(state: 0x1D1E)
        var parkedReads = 0
        for iteration in 0..<400 {
            var stream: [UInt8] = []
            for _ in 0..<Int.random(in: 1...6, using: &rng) {
                let binary = Bool.random(using: &rng)
                let message = sampleMessage(&rng, count: Int.random(in: 0...300, using: &rng), binary: binary)
                var cuts = (0..<Int.random(in: 0...3, using: &rng)).map { _ in Int.random(in: 0...message.count, using: &rng) }
                cuts.sort()
                let fragments = split(message, at: cuts)
                for (i, fragment) in fragments.enumerated() {
                    let opcode: Opcode = i > 0 ? .continuation : (binary ? .binary : .text)
                    stream += masked(opcode, fragment, fin: i == fragments.count - 1, key: UInt32.random(in: 0...UInt32.max, using: &rng))
                    if Int.random(in: 0..<4, using: &rng) == 0 { stream += masked(.ping, [UInt8(i)]) }
                }
            }
            switch Int.random(in: 0..<8, using: &rng) {
            case 0: stream += masked(.close, [0x03, 0xE8])
            case 1: stream += masked(.continuation, [1])  // a protocol violation
            case 2: stream += masked(.text, [0xC3, 0x28])  // invalid UTF-8
            case 3: stream += masked(.binary, [UInt8](repeating: 7, count: 301))  // over the limit
            default: break
            }
            let cuts = (0..<Int.random(in: 0...10, using: &rng)).map { _ in Int.random(in: 0...stream.count, using: &rng) }
            let chunks = split(stream, at: cuts)
            var kept = MessageAssembler(role: .server, maxMessageBytes: 300, inflation: nil)
            let expected = assemble(&kept, chunks)
            let got = assembleParking(max: 300, chunks, parked: &parkedReads)
            if got != expected {
                Issue.record("iteration \(iteration): \(got) against \(expected)")
                return
            }
        }
        #expect(parkedReads > 100)  // the random cuts did leave assemblers mid-message
    }

    @Test func garbageNeverCrashes() {
        var rng = SplitMix64(state: 0xBADF)
        for _ in 0..<3_000 {
            var bytes = (0..<Int.random(in: 0...200, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            if bytes.count > 2 {
                bytes[0] = [0xC1, 0xC2, 0x41, 0x00, 0x80].randomElement(using: &rng)!
                bytes[1] = UInt8.random(in: 0...127, using: &rng)
            }
            let cuts = (0..<Int.random(in: 0...5, using: &rng)).map { _ in Int.random(in: 0...bytes.count, using: &rng) }
            var assembler = MessageAssembler(role: .client, maxMessageBytes: 1000, inflation: MessageAssemblerTests.agreed)
            let out = assemble(&assembler, split(bytes, at: cuts))
            for event in out.dropLast() {
                if case .failure = event { Issue.record("event after failure") }
            }
        }
    }
}

extension MessageAssembler.Event {
    var isNeedMore: Bool {
        if case .needMore = self { return true }
        return false
    }
}
