import Glibc
import VigilBytes

/// What a flush achieved.
public enum FlushResult: Equatable {
    /// Every queued byte is in the kernel.
    case drained
    /// The socket is full; wait for EPOLLOUT and flush again.
    case pending
    /// The peer is gone (EPIPE, ECONNRESET, ...).
    case failed(Int32)
}

/// One connection's outbound bytes: a FIFO of byte ranges over chunks.
///
/// The common case, many small frames in one loop turn, lands in a single pooled chunk held in the
/// inline `first` entry, so a steady stream allocates nothing. Shared chunks (one encoded event for
/// many connections) are referenced, never copied. `byteCount` is what the slow-consumer policy reads.
public struct OutputQueue {
    struct Entry {
        let chunk: ByteChunk
        var start: Int
        var end: Int
        /// Ours alone: may grow while it is the tail, and goes back to the pool when drained.
        let owned: Bool
    }

    private var first: Entry?
    private var rest: [Entry] = []
    public private(set) var byteCount = 0

    public init() {}

    public var isEmpty: Bool { first == nil }

    /// Returns a pointer where `n` contiguous bytes may be written; call `commit(n)` after writing.
    /// Small writes share the tail's pooled chunk; a write larger than a pool chunk gets its own.
    public mutating func reserve(_ n: Int, pool: ChunkPool) -> UnsafeMutableRawPointer {
        if let tail = rest.last ?? first, tail.owned, tail.end == tail.chunk.count, tail.chunk.capacity - tail.chunk.count >= n {
            return tail.chunk.base + tail.chunk.count
        }
        let chunk = n <= pool.chunkSize ? pool.take() : ByteChunk(capacity: n)
        push(Entry(chunk: chunk, start: 0, end: 0, owned: true))
        return chunk.base
    }

    /// Adds `n` bytes written at the pointer the last `reserve` returned.
    public mutating func commit(_ n: Int) {
        if rest.isEmpty {
            first!.chunk.commit(n)
            first!.end += n
        } else {
            rest[rest.count - 1].chunk.commit(n)
            rest[rest.count - 1].end += n
        }
        byteCount += n
    }

    /// Copies `bytes` into the queue.
    public mutating func append(_ bytes: UnsafeRawBufferPointer, pool: ChunkPool) {
        guard bytes.count > 0 else { return }
        let p = reserve(bytes.count, pool: pool)
        p.copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
        commit(bytes.count)
    }

    /// Queues a reference to an immutable shared chunk's content, `start ..< count` (no copy).
    public mutating func append(shared chunk: ByteChunk) {
        let length = chunk.count - chunk.start
        guard length > 0 else { return }
        push(Entry(chunk: chunk, start: chunk.start, end: chunk.count, owned: false))
        byteCount += length
    }

    private mutating func push(_ entry: Entry) {
        if first == nil { first = entry } else { rest.append(entry) }
    }

    /// Drops everything queued (the connection is going away), returning owned chunks to the pool.
    public mutating func removeAll(pool: ChunkPool) {
        if let f = first, f.owned { pool.give(f.chunk) }
        for e in rest where e.owned { pool.give(e.chunk) }
        first = nil
        rest = []
        byteCount = 0
    }

    /// Writes as much as the socket takes with one `writev` per call (looping while it keeps taking
    /// everything offered). `iovecs` is scratch space of `maxIovecs` entries owned by the loop.
    public mutating func flush(fd: Int32, iovecs: UnsafeMutablePointer<iovec>, maxIovecs: Int, pool: ChunkPool) -> FlushResult {
        while let head = first {
            var n = 0
            iovecs[0] = iovec(iov_base: head.chunk.base + head.start, iov_len: head.end - head.start)
            n = 1
            var offered = head.end - head.start
            for e in rest where n < maxIovecs {
                iovecs[n] = iovec(iov_base: e.chunk.base + e.start, iov_len: e.end - e.start)
                offered += e.end - e.start
                n += 1
            }
            let written = writev(fd, iovecs, Int32(n))
            if written < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { return .pending }
                return .failed(errno)
            }
            consume(written, pool: pool)
            if written < offered { return .pending }
        }
        return .drained
    }

    /// The first bytes to send, as one contiguous region of at most `limit` bytes: when the head
    /// entry is shorter than that and more entries follow, they are first copied together into one
    /// pooled chunk. For a transport that must hand over one buffer per call (TLS: one record per
    /// `SSL_write`), so that many small frames become one record instead of one record each.
    public mutating func coalescedHead(limit: Int, pool: ChunkPool) -> UnsafeRawBufferPointer {
        guard let head = first else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        let headLength = head.end - head.start
        if headLength < limit && !rest.isEmpty {
            let merged = pool.take()
            let room = min(limit, merged.capacity)
            var taken = 0
            while let entry = first, taken < room {
                let length = min(entry.end - entry.start, room - taken)
                (merged.base + taken).copyMemory(from: entry.chunk.base + entry.start, byteCount: length)
                taken += length
                if length < entry.end - entry.start {
                    first!.start += length
                    break
                }
                if entry.owned { pool.give(entry.chunk) }
                first = rest.isEmpty ? nil : rest.removeFirst()
            }
            merged.count = taken
            let entry = Entry(chunk: merged, start: 0, end: taken, owned: true)
            if let next = first { rest.insert(next, at: 0) }
            first = entry
        }
        let entry = first!
        return UnsafeRawBufferPointer(start: entry.chunk.base + entry.start, count: min(entry.end - entry.start, limit))
    }

    /// Marks the first `count` bytes as sent (after a transport wrote them from `coalescedHead`).
    public mutating func consumeSent(_ count: Int, pool: ChunkPool) {
        consume(count, pool: pool)
    }

    private mutating func consume(_ count: Int, pool: ChunkPool) {
        var left = count
        byteCount -= count
        while left > 0, var head = first {
            let available = head.end - head.start
            if left < available {
                head.start += left
                first = head
                return
            }
            left -= available
            if head.owned { pool.give(head.chunk) }
            first = rest.isEmpty ? nil : rest.removeFirst()
        }
        if first == nil, rest.capacity > 0 { rest = [] }  // an idle connection keeps no array storage
    }
}
