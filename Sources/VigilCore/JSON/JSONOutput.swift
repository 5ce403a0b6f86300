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
    /// Bytes kept free in front of the document (in arena mode, the guess for the next frame
    /// header: the last one's size).
    private(set) var headroom: Int
    /// Where the current document's headroom begins: 0, or in arena mode the end of the frame
    /// taken last.
    private(set) var documentStart = 0
    /// Arena mode's chunk size (0: one chunk per document, `take`).
    let arenaCapacity: Int

    init(capacity: Int, headroom: Int, arenaCapacity: Int = 0) {
        let chunk = ByteChunk(capacity: max(capacity, headroom + 16))
        self.chunk = chunk
        base = chunk.base
        self.capacity = chunk.capacity
        self.headroom = headroom
        self.arenaCapacity = arenaCapacity
        count = headroom
    }

    /// The payload written so far (after the headroom).
    var payload: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: base + documentStart + headroom, count: count - documentStart - headroom)
    }

    /// Bytes of the current document written so far, headroom included (a `Mark`'s position:
    /// growth and arenas move the document, never this).
    var documentCount: Int { count - documentStart }

    mutating func reset() {
        count = documentStart + headroom
    }

    /// Forgets the bytes after `end` (a `documentCount`).
    mutating func truncate(to end: Int) {
        precondition(end >= headroom && documentStart + end <= count)
        count = documentStart + end
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
        precondition(arenaCapacity == 0, "an arena writer hands over frames (takeFrame)")
        let taken = chunk
        taken.start = headroom
        taken.count = count
        self = JSONOutput(capacity: capacity, headroom: headroom)
        return taken
    }

    /// Arena mode: makes the document's headroom exactly `headerSize` bytes (moving the payload
    /// when the guess was wrong) and hands over `frame start ..< end`, the header's room followed
    /// by the payload, which begins where the frame taken last ended. The next document follows
    /// it in the same chunk; a fresh arena is started when less than `minimumRoom` is left, or
    /// after a document that outgrew the arena (it keeps its chunk to itself). The bytes handed
    /// over are never written here again; the writer only writes past them.
    mutating func takeFrame(headerSize: Int) -> ChunkSlice {
        precondition(arenaCapacity > 0, "takeFrame is the arena writer's")
        if headerSize != headroom {
            if headerSize > headroom, capacity - count < headerSize - headroom { grow(toHold: headerSize - headroom) }
            let n = count - documentStart - headroom
            (base + documentStart + headerSize).copyMemory(from: base + documentStart + headroom, byteCount: n)
            count = documentStart + headerSize + n
            headroom = headerSize
        }
        let frame = ChunkSlice(chunk, from: documentStart, to: count)
        chunk.count = count
        if capacity - count < Self.minimumRoom || capacity > arenaCapacity {
            startArena(capacity: arenaCapacity)
        } else {
            documentStart = count
        }
        count = documentStart + headroom
        return frame
    }

    /// Arena mode: the least room worth starting a document in.
    static let minimumRoom = 256

    private mutating func startArena(capacity: Int) {
        chunk = ByteChunk(capacity: capacity)
        base = chunk.base
        self.capacity = capacity
        documentStart = 0
    }

    private mutating func grow(toHold extra: Int) {
        if arenaCapacity > 0 {
            // The document moves to the front of a new arena (a larger chunk of its own if it
            // does not fit one); the frames already taken stay where they are.
            let old = chunk, from = base + documentStart, n = count - documentStart
            startArena(capacity: max(arenaCapacity, (n + extra) * 2))
            withExtendedLifetime(old) { base.copyMemory(from: from, byteCount: n) }
            count = n
            return
        }
        let bigger = ByteChunk(capacity: max(capacity * 2, count + extra))
        bigger.base.copyMemory(from: base, byteCount: count)
        chunk = bigger
        base = bigger.base
        capacity = bigger.capacity
    }
}
