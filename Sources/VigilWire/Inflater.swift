import CZlib
#if canImport(Glibc)
import Glibc
#endif

/// Inflates the compressed messages of one connection (RFC 7692 §7.2.2), chunk by chunk as
/// `MessageReader` hands them out, into an output buffer the caller reads.
///
/// Bounded: the output never exceeds `maxMessageBytes`; the byte that would is detected with
/// a one-byte probe and reported as `messageTooBig`, so a zip bomb costs at most that much
/// memory and CPU linear in what was read. Corrupt DEFLATE data is `invalidCompressedData`
/// (1007). After either failure the zlib state is freed (or parked) and the inflater must not
/// be fed the rest of that message (the connection is failing anyway). A message cut short
/// inside a DEFLATE block is not detected (neither do other servers): its text is still
/// UTF-8-checked, and without context takeover nothing of it reaches the next message.
///
/// Memory, all lazy: no zlib state until the first compressed message; then zlib's inflate
/// state (~7 KiB) plus, from the first output, its window (2^windowBits bytes), plus the
/// output buffer while a message is assembled and handed out. With no context takeover the
/// zlib state is freed at the end of every message, so an idle connection holds none; with
/// context takeover the window must survive between messages (§7.2.3.2) and is kept. Measured
/// per window size in `InflaterTests.lazyStateAndMemoryPerWindow`. With an `InflaterPool`, what
/// is "freed" goes back to the loop's pool instead, so the steady state allocates nothing.
///
/// A class: the zlib stream lives at a fixed address and has exactly one owner, the
/// connection's `MessageAssembler`.
public final class Inflater {
    /// The window zlib inflates with (9...15; see `DeflateParameters.inflateWindowBits`).
    public let windowBits: Int
    /// Free the zlib state after each message (`client_no_context_takeover` was agreed).
    public let noContextTakeover: Bool
    /// Largest inflated message, in bytes.
    public let maxMessageBytes: Int

    private var zlib: ZlibStream?
    /// Where freed streams and buffers go, and come from; nil: malloc and free.
    private let pool: InflaterPool?
    /// A message's input has been fed since the last `finishMessage`.
    private var inMessage = false
    /// The DEFLATE stream ended (a block with BFINAL set, §7.2.3.4): the rest of the message's
    /// bytes are ignored and the next message starts a fresh stream.
    private var streamEnded = false

    private var buffer: UnsafeMutableRawPointer?
    private var capacity = 0
    /// Inflated bytes of the current message.
    public private(set) var count = 0

    public init(windowBits: Int, noContextTakeover: Bool, maxMessageBytes: Int, pool: InflaterPool? = nil) {
        self.windowBits = DeflateSettings.clamp(windowBits, 9, 15)
        self.noContextTakeover = noContextTakeover
        self.maxMessageBytes = max(0, maxMessageBytes)
        self.pool = pool
    }

    deinit {
        endStream()
        releaseOutput()
    }

    /// The inflated bytes of the current message so far, valid until the next call that
    /// inflates, `finishMessage` excepted, or `releaseOutput`.
    public var output: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: buffer, count: count)
    }

    /// Heap bytes held now: zlib's state and window, and the output buffer.
    public var heapBytes: Int { (zlib?.heapBytes ?? 0) + capacity }

    /// Whether zlib state is allocated (for tests and memory accounting).
    public var hasStream: Bool { zlib != nil }

    /// zlib allocations over this inflater's life (tests count them per message).
    var zlibAllocations: Int { retiredAllocations + (zlib?.allocations ?? 0) }
    private var retiredAllocations = 0

    /// Inflates the next piece of the current message's compressed payload, appending to
    /// `output`. Returns nil, or the error that ends the connection.
    public func inflate(_ chunk: UnsafeRawBufferPointer) -> WireError? {
        if let error = begin() { return fail(error) }
        guard chunk.count > 0, let base = chunk.baseAddress else { return nil }
        if let error = run(base, chunk.count) { return fail(error) }
        return nil
    }

    /// The message's compressed payload is complete: inflates the 0x00 0x00 0xff 0xff tail
    /// the sender removed (§7.2.2), then, without context takeover, frees the zlib state.
    /// `output` then holds the whole message.
    public func finishMessage() -> WireError? {
        if let error = begin() { return fail(error) }
        var tail: (UInt8, UInt8, UInt8, UInt8) = (0x00, 0x00, 0xFF, 0xFF)
        let error = withUnsafeBytes(of: &tail) { run($0.baseAddress!, 4) }
        if let error { return fail(error) }
        inMessage = false
        if noContextTakeover { endStream() }
        return nil
    }

    /// Forgets the output (the caller is done with it) and frees its buffer (or parks it in the
    /// pool), so an idle connection keeps none.
    public func releaseOutput() {
        if let buffer { give(UnsafeMutableRawBufferPointer(start: buffer, count: capacity)) }
        buffer = nil
        capacity = 0
        count = 0
    }

    private func give(_ old: UnsafeMutableRawBufferPointer) {
        if let pool { pool.park(old) } else { old.deallocate() }
    }

    /// Drops a part-way message and all zlib state (the connection is closing, or failed).
    public func discard() {
        endStream()
        releaseOutput()
        inMessage = false
    }

    // MARK: zlib

    /// Readies the stream for input: created on first use, restarted after a final block.
    private func begin() -> WireError? {
        if inMessage { return nil }
        inMessage = true
        count = 0
        if streamEnded, let zlib {
            streamEnded = false
            // Keeps the allocations; inflateReset only fails on a broken stream.
            return inflateReset(zlib.stream) == Z_OK ? nil : .invalidCompressedData
        }
        guard zlib == nil else { return nil }
        if let parked = pool?.takeStream(windowBits: windowBits) {
            zlib = parked
            return nil
        }
        let stream = ZlibStream()
        guard vigil_inflate_init_raw(stream.stream, Int32(windowBits)) == Z_OK else {
            stream.deallocate()
            // Only Z_MEM_ERROR is possible with valid arguments.
            return .compressionFailed
        }
        zlib = stream
        return nil
    }

    /// Feeds `n` bytes at `input` to zlib until it has taken them all and has nothing more to
    /// write, growing the output up to the limit. zlib's input fields are always set from
    /// `input` here, never trusted from an earlier call: a stream that failed (and was parked)
    /// still points at that call's bytes.
    private func run(_ input: UnsafeRawPointer, _ n: Int) -> WireError? {
        guard let z = zlib?.stream else { return .invalidCompressedData }
        var input = input
        var left = n
        while left > 0 && !streamEnded {
            // avail_in is 32-bit: feed at most 1 GiB at a time; drain takes all of it.
            let take = min(left, 1 << 30)
            z.pointee.next_in = UnsafeMutablePointer(mutating: input.assumingMemoryBound(to: UInt8.self))
            z.pointee.avail_in = UInt32(take)
            input += take
            left -= take
            if let error = drain(z) { return error }
        }
        return nil
    }

    /// Inflates the bytes zlib has been given until they are consumed and zlib's output is
    /// flushed, or the message is too big, or the data is corrupt.
    private func drain(_ z: UnsafeMutablePointer<z_stream>) -> WireError? {
        var spare: UInt8 = 0
        return withUnsafeMutablePointer(to: &spare) { probe in
            while true {
                // Once the output holds exactly maxMessageBytes, zlib is offered one more byte,
                // in a local: if it writes it, the message is too big.
                let atLimit = count == capacity && !grow()
                let room = atLimit ? 1 : min(capacity - count, Int(UInt32.max))
                z.pointee.next_out = atLimit ? probe : (buffer! + count).assumingMemoryBound(to: UInt8.self)
                z.pointee.avail_out = UInt32(room)
                let status = CZlib.inflate(z, Z_SYNC_FLUSH)
                let produced = room - Int(z.pointee.avail_out)
                if atLimit && produced > 0 { return .messageTooBig }
                count += produced
                switch status {
                case Z_OK, Z_BUF_ERROR:
                    // Output full: grow (or probe) and go on. Room left: zlib stopped for want of
                    // input, so all of it was taken; input left as well cannot happen with a
                    // sound stream, and is not looped on.
                    if z.pointee.avail_out > 0 {
                        return z.pointee.avail_in == 0 ? nil : .invalidCompressedData
                    }
                case Z_STREAM_END:
                    // A final block (§7.2.3.4): what follows it in this message is ignored, as
                    // the RFC's own example has a byte after it.
                    streamEnded = true
                    z.pointee.avail_in = 0
                    return nil
                case Z_MEM_ERROR:
                    return .compressionFailed
                default:
                    // Z_DATA_ERROR (corrupt), Z_NEED_DICT (a preset dictionary: not in RFC
                    // 7692), Z_STREAM_ERROR.
                    return .invalidCompressedData
                }
            }
        }
    }

    /// Doubles the output buffer, at most to the limit (or takes a pool's buffer for the first
    /// bytes of a message). False when already at the limit.
    private func grow() -> Bool {
        guard capacity < maxMessageBytes else { return false }
        if buffer == nil, let parked = pool?.takeBuffer() {
            if parked.count > 0 {
                buffer = parked.baseAddress
                capacity = min(parked.count, maxMessageBytes)
                return true
            }
            parked.deallocate()
        }
        let wanted = max(capacity * 2, Inflater.initialCapacity)
        let next = min(wanted, maxMessageBytes)
        let grown = UnsafeMutableRawPointer.allocate(byteCount: next, alignment: 16)
        if let old = buffer {
            grown.copyMemory(from: old, byteCount: count)
            give(UnsafeMutableRawBufferPointer(start: old, count: capacity))
        }
        buffer = grown
        capacity = next
        return true
    }

    /// First output buffer: most compressed messages are small events and requests.
    static let initialCapacity = 1024

    private func fail(_ error: WireError) -> WireError {
        discard()
        return error
    }

    private func endStream() {
        guard let zlib else { return }
        self.zlib = nil
        streamEnded = false
        if let pool {
            pool.park(zlib, windowBits: windowBits)
            return
        }
        retiredAllocations += zlib.allocations
        inflateEnd(zlib.stream)
        zlib.deallocate()
    }
}
