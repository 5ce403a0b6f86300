/// A heap block of bytes with a stable address, written once and then read by one or many queues.
///
/// Why a module of its own: the JSON writer (VigilCore) encodes an event straight into a chunk,
/// and the loop (VigilLoop) queues that same chunk on every recipient, so both need the type and
/// neither may import the other. The chunk knows nothing of sockets or JSON.
///
/// The bytes that matter are `base[start ..< count]`: a writer may keep `start` bytes of headroom
/// in front (a frame header is written there once the payload's length is known).
///
/// Ownership rule: a chunk is mutable while one owner writes it (a queue's own tail chunk, or a
/// writer's current chunk); once it is shared (queued on a second connection, or handed out by a
/// writer) it is never written again, except that an arena writer (`JSONWriter(arenaCapacity:)`)
/// goes on writing past the ranges it handed out (`ChunkSlice`), never in them. Nothing enforces
/// this at run time; the two writers that write chunks (`OutputQueue.reserve`, `JSONWriter`) keep
/// it by construction.
public final class ByteChunk {
    public let base: UnsafeMutableRawPointer
    public let capacity: Int
    /// Offset of the first byte that belongs to the content (headroom before it is unused).
    public var start: Int = 0
    /// End of the content: bytes written so far, counted from `base`.
    public var count: Int = 0
    /// Output-queue entries referring to this chunk, on any connection (`QueuedChunk` in
    /// VigilLoop): the queues hold one counted reference among them while this is above zero.
    /// Touched by the event loop's thread only.
    public var queuedEntries: Int = 0

    public init(capacity: Int) {
        self.capacity = capacity
        self.base = UnsafeMutableRawPointer.allocate(byteCount: max(capacity, 1), alignment: 16)
    }

    /// A chunk holding a copy of `bytes` (for frames shared by many connections, and tests).
    public convenience init(copying bytes: UnsafeRawBufferPointer) {
        self.init(capacity: bytes.count)
        if let src = bytes.baseAddress, bytes.count > 0 {
            base.copyMemory(from: src, byteCount: bytes.count)
        }
        count = bytes.count
    }

    /// Appends bytes; the caller guarantees they fit and that the chunk is not yet shared.
    public func append(_ bytes: UnsafeRawBufferPointer) {
        precondition(count + bytes.count <= capacity, "ByteChunk overflow")
        if let src = bytes.baseAddress, bytes.count > 0 {
            (base + count).copyMemory(from: src, byteCount: bytes.count)
        }
        count += bytes.count
    }

    /// Marks `n` more bytes, written directly at `base + count`, as part of the chunk.
    public func commit(_ n: Int) {
        precondition(count + n <= capacity, "ByteChunk overflow")
        count += n
    }

    /// The content, `base[start ..< count]`.
    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base + start, count: count - start) }

    deinit { base.deallocate() }
}

/// Bytes `start ..< end` of a chunk: a frame handed out by an arena writer, queued by reference
/// (`OutputQueue.append(shared:from:to:)`).
public struct ChunkSlice {
    public let chunk: ByteChunk
    public let start: Int
    public let end: Int

    public init(_ chunk: ByteChunk, from start: Int, to end: Int) {
        self.chunk = chunk
        self.start = start
        self.end = end
    }

    /// A whole chunk's content, `start ..< count`.
    public init(_ chunk: ByteChunk) {
        self.init(chunk, from: chunk.start, to: chunk.count)
    }

    public var count: Int { end - start }
    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: chunk.base + start, count: end - start) }
}
