import DequeModule
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
/// many connections) are referenced, never copied. `byteCount` is what the send policies read.
///
/// The entries after the first sit in a `Deque`, so a slow consumer's long queue costs O(1) per
/// entry sent (an array's `removeFirst` would make draining it quadratic). An entry may carry a
/// tag (a panic stream's number) so that a newer location can replace an older one still unsent
/// (`removeUnsent(tag:)`): conflation for slow watchers.
public struct OutputQueue {
    struct Entry {
        let chunk: ByteChunk
        var start: Int32
        var end: Int32
        /// What the bytes are, for conflation (0: untagged).
        let tag: UInt64
        /// Ours alone: may grow while it is the tail, and goes back to the pool when drained.
        let owned: Bool

        var length: Int { Int(end - start) }
    }

    private var first: Entry?
    private var rest = Deque<Entry>()
    public private(set) var byteCount = 0
    /// Some of `first` has been sent: it must go out whole before anything may be dropped or replaced.
    private var headStarted = false

    public init() {}

    public var isEmpty: Bool { first == nil }

    /// Returns a pointer where `n` contiguous bytes may be written; call `commit(n)` after writing.
    /// Small writes share the tail's pooled chunk; a write larger than a pool chunk gets its own.
    public mutating func reserve(_ n: Int, pool: ChunkPool) -> UnsafeMutableRawPointer {
        if let tail = rest.last ?? first, tail.owned, tail.tag == 0, Int(tail.end) == tail.chunk.count,
           tail.chunk.capacity - tail.chunk.count >= n {
            return tail.chunk.base + tail.chunk.count
        }
        let chunk = n <= pool.chunkSize ? pool.take() : ByteChunk(capacity: n)
        push(Entry(chunk: chunk, start: 0, end: 0, tag: 0, owned: true))
        return chunk.base
    }

    /// Adds `n` bytes written at the pointer the last `reserve` returned.
    public mutating func commit(_ n: Int) {
        if rest.isEmpty {
            first!.chunk.commit(n)
            first!.end += Int32(n)
        } else {
            rest[rest.count - 1].chunk.commit(n)
            rest[rest.count - 1].end += Int32(n)
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
    public mutating func append(shared chunk: ByteChunk, tag: UInt64 = 0) {
        let length = chunk.count - chunk.start
        guard length > 0 else { return }
        push(Entry(chunk: chunk, start: Int32(chunk.start), end: Int32(chunk.count), tag: tag, owned: false))
        byteCount += length
    }

    private mutating func push(_ entry: Entry) {
        if first == nil {
            first = entry
            headStarted = false
        } else {
            rest.append(entry)
        }
    }

    /// Drops everything queued (the connection is going away), returning owned chunks to the pool.
    public mutating func removeAll(pool: ChunkPool) {
        if let f = first, f.owned { pool.give(f.chunk) }
        for e in rest where e.owned { pool.give(e.chunk) }
        first = nil
        rest = Deque()
        byteCount = 0
        headStarted = false
    }

    /// Removes the unsent entries carrying `tag` (never an entry part of which was sent, nor the
    /// first `keepingHead` entry when a transport holds it); returns the bytes removed.
    public mutating func removeUnsent(tag: UInt64, keepingHead: Bool = false, pool: ChunkPool) -> Int {
        guard tag != 0 else { return 0 }
        var removed = 0
        if !rest.isEmpty {
            var kept = Deque<Entry>()
            kept.reserveCapacity(rest.count)
            for e in rest {
                if e.tag == tag {
                    removed += e.length
                    if e.owned { pool.give(e.chunk) }
                } else {
                    kept.append(e)
                }
            }
            if removed > 0 { rest = kept }
        }
        if let head = first, head.tag == tag, !headStarted, !keepingHead {
            removed += head.length
            if head.owned { pool.give(head.chunk) }
            first = rest.popFirst()
        }
        byteCount -= removed
        return removed
    }

    /// Drops every byte not yet sent, except an entry part of which was sent (or that a transport
    /// holds, `keepingHead`), so what reaches the peer stays whole frames; returns the bytes dropped.
    /// For a connection that is being closed for falling behind: its close frame goes next.
    public mutating func discardUnsent(keepingHead: Bool = false, pool: ChunkPool) -> Int {
        var dropped = 0
        for e in rest {
            dropped += e.length
            if e.owned { pool.give(e.chunk) }
        }
        rest = Deque()
        if let head = first, !headStarted, !keepingHead {
            dropped += head.length
            if head.owned { pool.give(head.chunk) }
            first = nil
        }
        byteCount -= dropped
        return dropped
    }

    /// Writes as much as the socket takes with one `writev` per call (looping while it keeps taking
    /// everything offered). `iovecs` is scratch space of `maxIovecs` entries owned by the loop.
    public mutating func flush(fd: Int32, iovecs: UnsafeMutablePointer<iovec>, maxIovecs: Int, pool: ChunkPool) -> FlushResult {
        while let head = first {
            iovecs[0] = iovec(iov_base: head.chunk.base + Int(head.start), iov_len: head.length)
            var n = 1
            var offered = head.length
            for e in rest {
                if n == maxIovecs { break }
                iovecs[n] = iovec(iov_base: e.chunk.base + Int(e.start), iov_len: e.length)
                offered += e.length
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
        if head.length < limit && !rest.isEmpty {
            let merged = pool.take()
            let room = min(limit, merged.capacity)
            var taken = 0
            while let entry = first, taken < room {
                let length = min(entry.length, room - taken)
                (merged.base + taken).copyMemory(from: entry.chunk.base + Int(entry.start), byteCount: length)
                taken += length
                if length < entry.length {
                    first!.start += Int32(length)
                    break
                }
                if entry.owned { pool.give(entry.chunk) }
                first = rest.popFirst()
            }
            merged.count = taken
            if let next = first { rest.prepend(next) }
            first = Entry(chunk: merged, start: 0, end: Int32(taken), tag: 0, owned: true)
        }
        let entry = first!
        return UnsafeRawBufferPointer(start: entry.chunk.base + Int(entry.start), count: min(entry.length, limit))
    }

    /// Marks the first `count` bytes as sent (after a transport wrote them from `coalescedHead`).
    public mutating func consumeSent(_ count: Int, pool: ChunkPool) {
        consume(count, pool: pool)
    }

    private mutating func consume(_ count: Int, pool: ChunkPool) {
        var left = count
        byteCount -= count
        while left > 0, var head = first {
            let available = head.length
            if left < available {
                head.start += Int32(left)
                first = head
                headStarted = true
                return
            }
            left -= available
            if head.owned { pool.give(head.chunk) }
            first = rest.popFirst()
            headStarted = false
        }
        if first == nil { rest = Deque() }  // an idle connection keeps no deque storage
    }
}
