@testable import VigilWire
import VigilTestSupport

/// The RFC 7692 §7.2.3 example payloads (frame payloads, tail already removed).
enum RFC7692 {
    /// §7.2.3.1: "Hello" in one compressed block.
    static let hello: [UInt8] = [0xF2, 0x48, 0xCD, 0xC9, 0xC9, 0x07, 0x00]
    /// §7.2.3.2: the second "Hello" of a connection with context takeover.
    static let helloAgain: [UInt8] = [0xF2, 0x00, 0x11, 0x00, 0x00]
    /// §7.2.3.3: "Hello" in a stored (uncompressed) block.
    static let helloStored: [UInt8] = [0x00, 0x05, 0x00, 0xFA, 0xFF, 0x48, 0x65, 0x6C, 0x6C, 0x6F, 0x00]
    /// §7.2.3.4: "Hello" in a block with BFINAL set, then a padding byte.
    static let helloFinal: [UInt8] = [0xF3, 0x48, 0xCD, 0xC9, 0xC9, 0x07, 0x00, 0x00]
    /// §7.2.3.5: "He" and "llo" in two blocks.
    static let helloTwoBlocks: [UInt8] = [0xF2, 0x48, 0x05, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xCA, 0xC9, 0xC9, 0x07, 0x00]
    /// §7.2.3.6: an empty message.
    static let empty: [UInt8] = [0x00]
}

/// Inflates one whole message given as chunks; the output or the first error.
func inflate(_ inflater: Inflater, _ chunks: [[UInt8]]) -> Result<[UInt8], WireError> {
    for chunk in chunks {
        if let error = chunk.withUnsafeBytes({ inflater.inflate($0) }) { return .failure(error) }
    }
    if let error = inflater.finishMessage() { return .failure(error) }
    let out = Array(inflater.output)
    inflater.releaseOutput()
    return .success(out)
}

func inflate(_ inflater: Inflater, _ payload: [UInt8]) -> Result<[UInt8], WireError> {
    inflate(inflater, [payload])
}

/// Compresses one message with a deflater, sized by its own bound.
func deflate(_ deflater: Deflater, _ message: [UInt8]) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: deflater.maxCompressedCount(message.count))
    let n = message.withUnsafeBytes { m in out.withUnsafeMutableBytes { deflater.compress(m, into: $0) } }
    precondition(n != nil, "the bound did not suffice")
    return Array(out[..<n!])
}

func makeDeflater(window: Int = 15, memory: Int = 8, level: Int = 6, noContextTakeover: Bool = true) -> Deflater {
    Deflater(Deflater.Configuration(windowBits: window, memoryLevel: memory, compressionLevel: level,
                                    noContextTakeover: noContextTakeover))!
}

/// A message that compresses somewhat, like JSON events: words from a small vocabulary,
/// numbers and punctuation, with some random bytes for binary messages.
func sampleMessage(_ rng: inout SplitMix64, count: Int, binary: Bool = false) -> [UInt8] {
    let words = ["{\"type\":", "\"pin\"", ",\"lat\":", "48.8566", ",\"id\":", "\"é€𝄞\"", "}", " ", "panic", "κόσμε"]
    var out: [UInt8] = []
    out.reserveCapacity(count + 16)
    while out.count < count {
        if binary && Int.random(in: 0..<4, using: &rng) == 0 {
            out.append(UInt8.random(in: 0...255, using: &rng))
        } else {
            out += Array(words.randomElement(using: &rng)!.utf8)
        }
    }
    if binary { return Array(out[..<count]) }
    return out
}

extension Result where Success == [UInt8], Failure == WireError {
    var bytes: [UInt8]? {
        if case .success(let b) = self { return b }
        return nil
    }

    var error: WireError? {
        if case .failure(let e) = self { return e }
        return nil
    }
}
