import Glibc

/// A heap block of bytes with a stable address, written once then read by one or many queues.
///
/// A chunk owned by one connection's queue (`OutputQueue.reserve`) may keep growing while it is the
/// tail; a chunk shared between queues (one encoded event for many subscribers) must not be
/// written after it is first appended anywhere.
public final class ByteChunk {
    public let base: UnsafeMutableRawPointer
    public let capacity: Int
    /// Bytes written so far, from `base`.
    public internal(set) var count: Int = 0

    public init(capacity: Int) {
        self.capacity = capacity
        self.base = UnsafeMutableRawPointer.allocate(byteCount: max(capacity, 1), alignment: 16)
    }

    /// A chunk holding a copy of `bytes` (for frames shared by many connections).
    public convenience init(copying bytes: UnsafeRawBufferPointer) {
        self.init(capacity: bytes.count)
        if let src = bytes.baseAddress, bytes.count > 0 {
            base.copyMemory(from: src, byteCount: bytes.count)
        }
        count = bytes.count
    }

    /// Appends bytes; the caller guarantees they fit and that the chunk is not yet shared.
    public func append(_ bytes: UnsafeRawBufferPointer) {
        precondition(count + bytes.count <= capacity)
        if let src = bytes.baseAddress, bytes.count > 0 {
            (base + count).copyMemory(from: src, byteCount: bytes.count)
        }
        count += bytes.count
    }

    /// Marks `n` more bytes, written directly at `base + count`, as part of the chunk.
    public func commit(_ n: Int) {
        precondition(count + n <= capacity)
        count += n
    }

    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    deinit { base.deallocate() }
}

/// Free fixed-size chunks for one loop, so a busy connection's output needs no malloc per turn and an
/// idle connection holds none: a queue takes a chunk when it has something to send and gives it
/// back as soon as the socket has taken every byte.
public final class ChunkPool {
    public let chunkSize: Int
    private let maxPooled: Int
    private var free: [ByteChunk] = []
    public private(set) var allocated = 0

    public init(chunkSize: Int = 16 * 1024, maxPooled: Int = 256) {
        self.chunkSize = chunkSize
        self.maxPooled = maxPooled
        free.reserveCapacity(maxPooled)
    }

    public func take() -> ByteChunk {
        if let chunk = free.popLast() {
            chunk.count = 0
            return chunk
        }
        allocated += 1
        return ByteChunk(capacity: chunkSize)
    }

    /// Returns a chunk; only pool-sized chunks that nobody else references are kept.
    public func give(_ chunk: ByteChunk) {
        guard chunk.capacity == chunkSize, free.count < maxPooled else { return }
        free.append(chunk)
    }

    public var pooledCount: Int { free.count }
}
