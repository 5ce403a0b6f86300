import Testing
import VigilBytes
@testable import VigilWire
import VigilTestSupport

/// RFC 7692 §7.2.1 compression into caller-owned memory.
@Suite struct DeflaterTests {
    let hello = Array("Hello".utf8)

    @Test func rfcExamples() {
        // §7.2.3.1, and §7.2.3.2 with context takeover: zlib produces the RFC's own bytes.
        let keep = makeDeflater(noContextTakeover: false)
        #expect(deflate(keep, hello) == RFC7692.hello)
        #expect(deflate(keep, hello) == RFC7692.helloAgain)
        // Without context takeover every "Hello" is the first one.
        let fresh = makeDeflater(noContextTakeover: true)
        for _ in 0..<3 { #expect(deflate(fresh, hello) == RFC7692.hello) }
        // §7.2.3.6: the empty message, also right after another message.
        #expect(deflate(fresh, []) == RFC7692.empty)
        #expect(deflate(keep, []) == RFC7692.empty)
        #expect(deflate(keep, hello) != RFC7692.hello) // the window still holds "Hello"
    }

    @Test func noContextTakeoverOutputDependsOnlyOnTheMessage() {
        // What lets one compressed frame be shared by every subscriber of a configuration.
        var rng = SplitMix64(state: 11)
        let messages = (0..<20).map { _ in sampleMessage(&rng, count: Int.random(in: 1...3000, using: &rng)) }
        let a = makeDeflater()
        let b = makeDeflater()
        let first = messages.map { deflate(a, $0) }
        for (i, message) in messages.enumerated().reversed() {
            #expect(deflate(b, message) == first[i])
        }
    }

    @Test func outputTooSmall() {
        var rng = SplitMix64(state: 12)
        let message = sampleMessage(&rng, count: 4000, binary: true)
        let deflater = makeDeflater(noContextTakeover: false)
        let whole = deflate(makeDeflater(), message)
        for room in [0, 1, 4, whole.count / 2, whole.count + 3] {
            var out = [UInt8](repeating: 0, count: room)
            let n = message.withUnsafeBytes { m in out.withUnsafeMutableBytes { deflater.compress(m, into: $0) } }
            #expect(n == nil, "room \(room)")
        }
        // The stream was reset, so the next message is still right and stands alone.
        let next = deflate(deflater, message)
        #expect(inflate(Inflater(windowBits: 15, noContextTakeover: true, maxMessageBytes: 1 << 20), next).bytes == message)
    }

    @Test func boundSufficesForIncompressibleData() {
        var rng = SplitMix64(state: 13)
        for window in [9, 12, 15] {
            for memory in [1, 8, 9] {
                let deflater = makeDeflater(window: window, memory: memory, noContextTakeover: false)
                for count in [1, 2, 100, 1000, 65_535, 65_536, 200_000] {
                    let noise = (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
                    let payload = deflate(deflater, noise) // preconditions that the bound sufficed
                    #expect(payload.count <= deflater.maxCompressedCount(count))
                }
            }
        }
    }

    @Test func memoryPerConfigurationAndNoAllocationPerMessage() {
        for (window, memory) in [(9, 1), (10, 8), (12, 8), (15, 1), (15, 8), (15, 9)] {
            let deflater = makeDeflater(window: window, memory: memory)
            let formula = (1 << (window + 2)) + (1 << (memory + 9))
            print("deflater window \(window) memLevel \(memory): \(deflater.heapBytes) bytes (formula \(formula) + state)")
            #expect(deflater.heapBytes >= formula)
            #expect(deflater.heapBytes <= formula + 8 * 1024)
            let allocations = deflater.zlibAllocations
            var rng = SplitMix64(state: UInt64(window))
            var out = [UInt8](repeating: 0, count: 1 << 16)
            for _ in 0..<200 {
                let message = sampleMessage(&rng, count: 2000)
                _ = message.withUnsafeBytes { m in out.withUnsafeMutableBytes { deflater.compress(m, into: $0) } }
            }
            #expect(deflater.zlibAllocations == allocations)
        }
    }

    @Test func shouldCompress() {
        let deflater = Deflater(Deflater.Configuration(DeflateParameters(serverNoContextTakeover: true, clientNoContextTakeover: true,
                                                                         serverMaxWindowBits: 11, clientMaxWindowBits: 15),
                                                       DeflateSettings(memoryLevel: 4, compressionLevel: 3, minimumMessageBytes: 64)),
                                minimumMessageBytes: 64)!
        #expect(deflater.configuration == Deflater.Configuration(windowBits: 11, memoryLevel: 4, compressionLevel: 3, noContextTakeover: true))
        #expect(!deflater.shouldCompress(63))
        #expect(deflater.shouldCompress(64))
    }

    @Test func sharedCompressedFrame() {
        // A payload compressed into a chunk with frame headroom, framed once with RSV1.
        var rng = SplitMix64(state: 14)
        let message = sampleMessage(&rng, count: 1000)
        let deflater = makeDeflater()
        let chunk = ByteChunk(capacity: SharedFrame.headroom + deflater.maxCompressedCount(message.count))
        chunk.start = SharedFrame.headroom
        chunk.count = SharedFrame.headroom
        #expect(message.withUnsafeBytes { deflater.compress($0, appendingTo: chunk) })
        let frame = Array(SharedFrame.text(chunk, compressed: true).bytes)
        #expect(frame[0] == 0xC1) // FIN, RSV1, text
        var assembler = MessageAssembler(role: .client, maxMessageBytes: 1 << 20,
                                         inflation: DeflateParameters(serverNoContextTakeover: true, clientNoContextTakeover: true,
                                                                      serverMaxWindowBits: 15, clientMaxWindowBits: 15))
        var bytes = frame
        let got: [UInt8]? = bytes.withUnsafeMutableBytes { buffer in
            var offset = 0
            if case .message(.text, let m) = assembler.next(buffer, offset: &offset) { return Array(m) }
            return nil
        }
        #expect(got == message)
        // A chunk without room is left as it was.
        let small = ByteChunk(capacity: 8)
        #expect(!message.withUnsafeBytes { deflater.compress($0, appendingTo: small) })
        #expect(small.count == 0)
    }
}
