import Testing
@testable import VigilWire
import VigilTestSupport

/// RFC 7692 §7.2.2 decompression: known vectors, every split, limits, corruption, context.
@Suite struct InflaterTests {
    let hello = Array("Hello".utf8)

    func inflater(window: Int = 15, noContextTakeover: Bool = true, max: Int = 1 << 20) -> Inflater {
        Inflater(windowBits: window, noContextTakeover: noContextTakeover, maxMessageBytes: max)
    }

    @Test func rfcExamples() {
        for payload in [RFC7692.hello, RFC7692.helloStored, RFC7692.helloFinal, RFC7692.helloTwoBlocks] {
            #expect(inflate(inflater(), payload).bytes == hello, "\(payload)")
        }
        #expect(inflate(inflater(), RFC7692.empty).bytes == [])
        // A message with no payload at all is the tail alone: an empty stored block.
        #expect(inflate(inflater(), [[UInt8]]()).bytes == [])
    }

    @Test func everySplitOfTheExamples() {
        for payload in [RFC7692.hello, RFC7692.helloStored, RFC7692.helloFinal, RFC7692.helloTwoBlocks] {
            let inf = inflater(noContextTakeover: false)
            for a in 0...payload.count {
                for b in a...payload.count {
                    #expect(inflate(inf, split(payload, at: [a, b])).bytes == hello, "\(payload) at \(a), \(b)")
                }
            }
            // One byte at a time.
            #expect(inflate(inf, payload.map { [$0] }).bytes == hello)
        }
    }

    @Test func contextTakeoverCarriesTheWindow() {
        // §7.2.3.2: the second message refers to the first one's bytes.
        let keep = inflater(noContextTakeover: false)
        #expect(inflate(keep, RFC7692.hello).bytes == hello)
        #expect(keep.hasStream)
        #expect(inflate(keep, RFC7692.helloAgain).bytes == hello)
        // Without it, the window is gone after each message: the back-reference is invalid.
        let fresh = inflater(noContextTakeover: true)
        #expect(inflate(fresh, RFC7692.hello).bytes == hello)
        #expect(!fresh.hasStream)
        #expect(inflate(fresh, RFC7692.helloAgain).error == .invalidCompressedData)
    }

    @Test func finalBlockStartsAFreshStream() {
        // After a BFINAL block (§7.2.3.4) the next message still inflates.
        let keep = inflater(noContextTakeover: false)
        #expect(inflate(keep, RFC7692.helloFinal).bytes == hello)
        #expect(inflate(keep, RFC7692.hello).bytes == hello)
        #expect(inflate(keep, RFC7692.helloFinal + [0xFF, 0xFF, 0x12]).bytes == hello) // ignored after the end
        #expect(inflate(keep, RFC7692.helloTwoBlocks).bytes == hello)
    }

    @Test func lazyStateAndMemoryPerWindow() {
        for window in 9...15 {
            let inf = inflater(window: window, noContextTakeover: false)
            #expect(!inf.hasStream)
            #expect(inf.heapBytes == 0)
            var rng = SplitMix64(state: UInt64(window))
            let message = sampleMessage(&rng, count: 4 << window)
            let deflater = makeDeflater(window: window)
            #expect(inflate(inf, deflate(deflater, message)).bytes == message)
            // Kept between messages with context takeover: zlib's state and its window.
            let held = inf.heapBytes
            print("inflater window \(window): \(held) bytes held between messages")
            #expect(held >= (1 << window) + 7 * 1024)
            #expect(held <= (1 << window) + 8 * 1024)
            inf.discard()
            #expect(inf.heapBytes == 0)
        }
    }

    @Test func noContextTakeoverFreesEverythingAfterEachMessage() {
        let inf = inflater(noContextTakeover: true)
        let deflater = makeDeflater()
        var rng = SplitMix64(state: 5)
        for _ in 0..<3 {
            let message = sampleMessage(&rng, count: 3000)
            #expect(inflate(inf, deflate(deflater, message)).bytes == message)
            #expect(!inf.hasStream)
            #expect(inf.heapBytes == 0)
        }
    }

    @Test func contextTakeoverAllocatesNothingAfterTheFirstMessage() {
        let inf = inflater(noContextTakeover: false)
        let deflater = makeDeflater(noContextTakeover: false)
        var rng = SplitMix64(state: 6)
        #expect(inflate(inf, deflate(deflater, sampleMessage(&rng, count: 500))).bytes != nil)
        let first = inf.zlibAllocations
        #expect(first == 2) // state, then window
        for _ in 0..<100 {
            let message = sampleMessage(&rng, count: 500)
            #expect(inflate(inf, deflate(deflater, message)).bytes == message)
        }
        #expect(inf.zlibAllocations == first)
    }

    @Test func windowBitsAreApplied() {
        // 2 KiB of random bytes, repeated: the repeat is matches 2048 bytes back, which an
        // 11-bit window just reaches and a 9- or 10-bit one cannot.
        var rng = SplitMix64(state: 7)
        let block = (0..<2048).map { _ in UInt8.random(in: 0...255, using: &rng) }
        let payload = deflate(makeDeflater(window: 15), block + block)
        #expect(payload.count < 2048 + 100)
        for window in 9...15 {
            let result = inflate(inflater(window: window), payload)
            if window >= 11 {
                #expect(result.bytes == block + block, "window \(window)")
            } else {
                #expect(result.error == .invalidCompressedData, "window \(window)")
            }
        }
    }

    @Test func zipBombStopsAtExactlyTheLimit() {
        let size = 100_000
        let zeros = [UInt8](repeating: 0, count: size)
        let payload = deflate(makeDeflater(), zeros)
        #expect(payload.count < 200)
        // At the limit: accepted, in any split.
        for cut in [0, 1, payload.count / 2, payload.count - 1] {
            #expect(inflate(inflater(max: size), split(payload, at: [cut])).bytes == zeros)
        }
        // One byte under: refused, having written no more than the limit.
        for cut in [0, 1, payload.count / 2, payload.count] {
            let inf = inflater(max: size - 1)
            #expect(inflate(inf, split(payload, at: [cut])).error == .messageTooBig)
            #expect(inf.heapBytes == 0) // everything freed on failure
        }
        let limit = inflater(max: 0)
        #expect(inflate(limit, RFC7692.hello).error == .messageTooBig)
        #expect(inflate(inflater(max: 0), RFC7692.empty).bytes == [])
    }

    @Test func largeBombCostsAtMostTheLimit() {
        // 64 MiB of zeros as one DEFLATE stream of ~64 KiB, fed as 64 chunks; the limit is 1 MiB.
        let block = [UInt8](repeating: 0, count: 1 << 20)
        let streaming = makeDeflater(level: 9, noContextTakeover: false)
        // Each piece ends in a sync flush whose tail goes back in, so the pieces are one stream.
        let chunks = (0..<64).map { _ in deflate(streaming, block) + [0x00, 0x00, 0xFF, 0xFF] }
        #expect(chunks.reduce(0) { $0 + $1.count } < 80 * 1024)
        let inf = Inflater(windowBits: 15, noContextTakeover: true, maxMessageBytes: 1 << 20)
        var peak = 0
        var result: WireError?
        for chunk in chunks {
            result = chunk.withUnsafeBytes { inf.inflate($0) }
            peak = max(peak, inf.heapBytes)
            if result != nil { break }
        }
        #expect(result == .messageTooBig)
        #expect(peak <= (1 << 20) + 48 * 1024)
    }

    @Test func corruptData() {
        let cases: [[UInt8]] = [
            [0xFF],                          // BTYPE 11: reserved
            [0x07, 0x00],                    // BTYPE 11 with BFINAL
            [0x00, 0x05, 0x00, 0x00, 0x00],  // stored block whose NLEN is not ~LEN
            RFC7692.hello + [0x01, 0x00, 0x00, 0x00], // good block, then a stored block with NLEN != ~LEN
            [0x02, 0x00, 0x11],              // a distance before any output
        ]
        for payload in cases {
            let inf = inflater(noContextTakeover: false)
            #expect(inflate(inf, payload).error == .invalidCompressedData, "\(payload)")
            #expect(!inf.hasStream)
        }
        #expect(WireError.invalidCompressedData.closeCode == .invalidPayload)
    }

    @Test func randomRoundTripsInRandomChunks() {
        var rng = SplitMix64(state: 0xDEF1A7E)
        for iteration in 0..<300 {
            let window = Int.random(in: 9...15, using: &rng)
            let takeover = Bool.random(using: &rng)
            let deflater = makeDeflater(window: window, memory: Int.random(in: 1...9, using: &rng),
                                        level: Int.random(in: 1...9, using: &rng), noContextTakeover: !takeover)
            let inf = inflater(window: window, noContextTakeover: !takeover)
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                let message = sampleMessage(&rng, count: Int.random(in: 0...5000, using: &rng), binary: Bool.random(using: &rng))
                let payload = deflate(deflater, message)
                let cuts = (0..<Int.random(in: 0...6, using: &rng)).map { _ in Int.random(in: 0...payload.count, using: &rng) }
                let result = inflate(inf, split(payload, at: cuts))
                if result.bytes != message {
                    Issue.record("iteration \(iteration): window \(window) takeover \(takeover): \(result.error.map { "\($0)" } ?? "wrong bytes")")
                    return
                }
            }
        }
    }
}

/// The loop's pool of inflate streams and output buffers.
@Suite struct InflaterPoolTests {
    @Test func streamsAndBuffersGoBackToThePool() {
        let pool = InflaterPool(maxStreams: 2, maxBuffers: 2, maxBufferBytes: 4096)
        let a = Inflater(windowBits: 15, noContextTakeover: true, maxMessageBytes: 1 << 20, pool: pool)
        let b = Inflater(windowBits: 15, noContextTakeover: true, maxMessageBytes: 1 << 20, pool: pool)
        let hello = Array("Hello".utf8)
        #expect(inflate(a, RFC7692.hello).bytes == hello)
        // The stream and the buffer are parked, not freed; the connection holds nothing.
        #expect(a.heapBytes == 0)
        let parked = pool.heapBytes
        #expect(parked > 32 * 1024)
        // Another connection's message reuses them: the pool neither grows nor shrinks.
        for _ in 0..<10 {
            #expect(inflate(b, RFC7692.hello).bytes == hello)
            #expect(inflate(a, RFC7692.helloStored).bytes == hello)
        }
        #expect(pool.heapBytes == parked)
        // A parked stream was reset: a back-reference into the last message's window fails.
        #expect(inflate(b, RFC7692.helloAgain).error == .invalidCompressedData)
        let again = inflate(b, RFC7692.hello)
        #expect(again.bytes == hello, "\(String(describing: again.error))") // and a failed stream is reusable too
    }

    @Test func windowSizesAreKeptApartAndThePoolIsBounded() {
        let pool = InflaterPool(maxStreams: 1, maxBuffers: 1, maxBufferBytes: 2048)
        let small = Inflater(windowBits: 9, noContextTakeover: true, maxMessageBytes: 1 << 20, pool: pool)
        let large = Inflater(windowBits: 15, noContextTakeover: true, maxMessageBytes: 1 << 20, pool: pool)
        var rng = SplitMix64(state: 31)
        let big = sampleMessage(&rng, count: 10_000)
        #expect(inflate(small, deflate(makeDeflater(window: 9), big)).bytes == big)
        // One 9-bit stream parked; its grown output buffer is over the size kept, so it was freed.
        #expect(pool.heapBytes < 9 * 1024)
        #expect(pool.takeStream(windowBits: 15) == nil)
        #expect(inflate(large, RFC7692.hello).bytes == Array("Hello".utf8))
        // The pool holds one stream at most: the 15-bit one was freed, the 9-bit one stays.
        #expect(pool.heapBytes < 9 * 1024)
        #expect(pool.takeStream(windowBits: 9) != nil)
    }
}
