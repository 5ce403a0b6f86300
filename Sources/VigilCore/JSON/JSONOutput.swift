import VigilBytes

/// Where `JSONWriter` puts its bytes: a `ByteChunk` that can be handed over whole.
///
/// An event for many subscribers is written straight into the chunk the loop then queues on
/// every recipient: `headroom` bytes are kept free in front for the frame header, written once the
/// payload's length is known, so the event is never copied from a writer buffer into a frame.
///
/// The pointer, count and capacity are mirrored here (in the writer's own stack frame while it
/// writes) rather than read through the chunk on every byte: a class's stored properties are
/// reloaded, and access-checked, at every append; a struct's are not.
struct JSONOutput {
    private(set) var chunk: ByteChunk
    private(set) var base: UnsafeMutableRawPointer
    /// End of the written bytes, from `base` (headroom included).
    private(set) var count: Int
    private(set) var capacity: Int
    let headroom: Int

    init(capacity: Int, headroom: Int) {
        let chunk = ByteChunk(capacity: max(capacity, headroom + 16))
        self.chunk = chunk
        base = chunk.base
        self.capacity = chunk.capacity
        self.headroom = headroom
        count = headroom
    }

    /// The payload written so far (after the headroom).
    var payload: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base + headroom, count: count - headroom) }

    mutating func reset() {
        count = headroom
    }

    /// Forgets the bytes after `end` (an absolute count, headroom included).
    mutating func truncate(to end: Int) {
        precondition(end >= headroom && end <= count)
        count = end
    }

    @inline(__always)
    mutating func append(_ byte: UInt8) {
        if count == capacity { grow(toHold: 1) }
        base.storeBytes(of: byte, toByteOffset: count, as: UInt8.self)
        count &+= 1
    }

    @inline(__always)
    mutating func append(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let src = bytes.baseAddress, bytes.count > 0 else { return }
        if capacity - count < bytes.count { grow(toHold: bytes.count) }
        (base + count).copyMemory(from: src, byteCount: bytes.count)
        count &+= bytes.count
    }

    /// Hands the written chunk over (content = the payload, `start` at the headroom) and starts a
    /// fresh one of the same capacity. The taken chunk is never written here again.
    mutating func take() -> ByteChunk {
        let taken = chunk
        taken.start = headroom
        taken.count = count
        self = JSONOutput(capacity: capacity, headroom: headroom)
        return taken
    }

    private mutating func grow(toHold extra: Int) {
        let bigger = ByteChunk(capacity: max(capacity * 2, count + extra))
        bigger.base.copyMemory(from: base, byteCount: count)
        chunk = bigger
        base = bigger.base
        capacity = bigger.capacity
    }
}
