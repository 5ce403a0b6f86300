import VigilBytes

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
            chunk.start = 0
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
