import CZlib
import VigilBytes

/// Compresses whole messages for permessage-deflate (RFC 7692 §7.2.1): raw DEFLATE, flushed
/// with Z_SYNC_FLUSH, the trailing 0x00 0x00 0xff 0xff removed, written into memory the caller
/// owns. No allocation per message: zlib's buffers are allocated once, in `init`.
///
/// One deflater per configuration, not per connection: with no context takeover
/// (`server_no_context_takeover`, which Vigil always negotiates) it resets after every
/// message, so a message's compressed bytes depend only on the message and the configuration,
/// and the same frame can be queued on every connection that agreed that configuration. With
/// context takeover the window carries over (§7.2.3.2), so such a deflater belongs to one
/// connection and must see all of that connection's compressed messages, in order.
///
/// Memory (zlib's formula; `DeflaterTests.memoryPerConfiguration` measures it): about
/// 2^(windowBits+2) + 2^(memoryLevel+9) bytes plus ~6 KiB of state; 15 and 8 hold ~262 KiB.
///
/// A class: the zlib stream lives at a fixed address. Not thread-safe: one loop owns it.
public final class Deflater {
    /// What shapes the compressed bytes; deflaters with equal configurations are
    /// interchangeable, which is what lets one serve many connections.
    public struct Configuration: Hashable, Sendable {
        /// 9...15.
        public var windowBits: Int
        /// zlib memLevel, 1...9.
        public var memoryLevel: Int
        /// zlib level, 1...9.
        public var compressionLevel: Int
        /// Reset after every message.
        public var noContextTakeover: Bool

        public init(windowBits: Int, memoryLevel: Int, compressionLevel: Int, noContextTakeover: Bool) {
            self.windowBits = DeflateSettings.clamp(windowBits, 9, 15)
            self.memoryLevel = DeflateSettings.clamp(memoryLevel, 1, 9)
            self.compressionLevel = DeflateSettings.clamp(compressionLevel, 1, 9)
            self.noContextTakeover = noContextTakeover
        }

        /// The configuration a negotiated connection's messages are compressed with.
        public init(_ parameters: DeflateParameters, _ settings: DeflateSettings) {
            self.init(windowBits: parameters.serverMaxWindowBits, memoryLevel: settings.memoryLevel,
                      compressionLevel: settings.compressionLevel,
                      noContextTakeover: parameters.serverNoContextTakeover)
        }
    }

    public let configuration: Configuration
    /// Messages shorter than this are not worth compressing (`shouldCompress`).
    public let minimumMessageBytes: Int
    private let zlib: ZlibStream

    /// Allocates zlib's state; nil only if zlib cannot (out of memory).
    public init?(_ configuration: Configuration, minimumMessageBytes: Int = 0) {
        self.configuration = configuration
        self.minimumMessageBytes = max(0, minimumMessageBytes)
        zlib = ZlibStream()
        let status = vigil_deflate_init_raw(zlib.stream, Int32(configuration.compressionLevel),
                                            Int32(configuration.windowBits), Int32(configuration.memoryLevel))
        guard status == Z_OK else {
            zlib.deallocate()
            return nil
        }
    }

    deinit {
        deflateEnd(zlib.stream)
        zlib.deallocate()
    }

    /// Heap bytes zlib holds for this deflater.
    public var heapBytes: Int { zlib.heapBytes }

    /// zlib allocations so far: all made by `init` (tests hold later messages to none).
    var zlibAllocations: Int { zlib.allocations }

    /// Whether a message of `count` bytes should be sent compressed.
    @inlinable
    public func shouldCompress(_ count: Int) -> Bool { count >= minimumMessageBytes }

    /// Output room that always suffices for a message of `count` bytes: zlib's bound for this
    /// stream plus the sync flush's empty stored block (≤ 5 bytes with its bit padding) and a
    /// margin; the 4 bytes of tail removed afterwards are not subtracted.
    public func maxCompressedCount(_ count: Int) -> Int {
        Int(deflateBound(zlib.stream, UInt(count))) + 16
    }

    /// Compresses one whole message into `output` and returns the compressed length, or nil
    /// when `output` is too small (`maxCompressedCount` never is). On nil the stream is reset,
    /// which is always safe: a reset deflater just stops referring to earlier messages.
    public func compress(_ message: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) -> Int? {
        guard let out = output.baseAddress, output.count > 0 else { return nil }
        if message.count == 0 {
            // §7.2.3.6: a single 0x00 (an empty stored block's header, BFINAL 0, whose
            // LEN/NLEN are the removed tail) is an empty message. zlib itself returns
            // Z_BUF_ERROR for an empty sync flush that follows another one, and this byte is
            // valid whatever the window holds.
            out.storeBytes(of: 0, as: UInt8.self)
            return 1
        }
        guard message.count <= Int(UInt32.max) && output.count >= 5 else { return nil }
        let z = zlib.stream
        z.pointee.next_in = UnsafeMutablePointer(mutating: message.baseAddress!.assumingMemoryBound(to: UInt8.self))
        z.pointee.avail_in = UInt32(message.count)
        z.pointee.next_out = out.assumingMemoryBound(to: UInt8.self)
        z.pointee.avail_out = UInt32(min(output.count, Int(UInt32.max)))
        let status = deflate(z, Z_SYNC_FLUSH)
        let written = output.count - Int(z.pointee.avail_out)
        // avail_out == 0 means zlib may hold more output: the buffer was too small.
        // §7.2.1: the sync flush ends in an empty stored block, 0x00 0x00 0xff 0xff, removed.
        guard status == Z_OK, z.pointee.avail_in == 0, z.pointee.avail_out > 0, written >= 4,
              UInt32(littleEndian: (out + written - 4).loadUnaligned(as: UInt32.self)) == 0xFFFF_0000
        else {
            reset()
            return nil
        }
        if configuration.noContextTakeover { reset() }
        return written - 4
    }

    /// Compresses one whole message and appends it to `chunk` (after any headroom a
    /// `SharedFrame` header will use). False, with the chunk unchanged, when it does not fit.
    public func compress(_ message: UnsafeRawBufferPointer, appendingTo chunk: ByteChunk) -> Bool {
        let room = UnsafeMutableRawBufferPointer(start: chunk.base + chunk.count, count: chunk.capacity - chunk.count)
        guard let written = compress(message, into: room) else { return false }
        chunk.commit(written)
        return true
    }

    /// Forgets the window: the next message is compressed from scratch. No allocation.
    public func reset() {
        deflateReset(zlib.stream)
    }
}
