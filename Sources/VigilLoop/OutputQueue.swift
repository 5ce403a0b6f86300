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
/// The entries after the first sit in an `EntryRing`, so a slow consumer's long queue costs O(1)
/// per entry sent (an array's `removeFirst` would make draining it quadratic). An entry may carry a
/// tag (a panic stream's number) so that a newer location can replace an older one still unsent
/// (`removeUnsent(tag:)`): conflation for slow watchers.
public struct OutputQueue {
    /// One queued byte range. Its chunk is held through `QueuedChunk`, not by a counted
    /// reference, so an entry is plain data: queuing, copying and walking entries (a fan-out
    /// queues one per recipient; a flush walks them into iovecs) does no reference counting.
    struct Entry {
        let ref: Unmanaged<ByteChunk>
        var start: Int32
        var end: Int32
        /// What the bytes are, for conflation (0: untagged).
        let tag: UInt64
        /// Ours alone: may grow while it is the tail, and goes back to the pool when drained.
        let owned: Bool

        init(holding chunk: ByteChunk, start: Int32, end: Int32, tag: UInt64, owned: Bool) {
            self.ref = QueuedChunk.hold(chunk)
            self.start = start
            self.end = end
            self.tag = tag
            self.owned = owned
        }

        var length: Int { Int(end - start) }
        /// The chunk, lent for the duration of a use (no retain).
        var chunk: ByteChunk { ref.takeUnretainedValue() }
        var base: UnsafeMutableRawPointer { ref._withUnsafeGuaranteedRef { $0.base } }
    }

    // Field order: the flag and the 32-bit count in the 7 bytes `first` (25) leaves before the
    // next 8-byte field, so the queue is 40 bytes, not 49 (it is part of every connection's object).
    private var first: Entry?
    /// Some of `first` has been sent: it must go out whole before anything may be dropped or replaced.
    private var headStarted = false
    /// Bytes queued. 32 bits: a connection's budget is at most 2 × 1 GiB (`SendPolicies`; the
    /// config bounds `max_output_buffer_bytes` at 1 GiB) and an HTTP response is one chunk, whose
    /// offsets are 32-bit already (`Entry`).
    private var count: UInt32 = 0
    private var rest = EntryRing()

    public var byteCount: Int { Int(count) }

    public init() {}

    public var isEmpty: Bool { first == nil }

    /// Entries queued (tests: a merged run is one).
    var entryCount: Int { first == nil ? 0 : 1 + rest.count }

    /// Returns a pointer where `n` contiguous bytes may be written; call `commit(n)` after writing.
    /// Small writes share the tail's pooled chunk; a write larger than a pool chunk gets its own.
    public mutating func reserve(_ n: Int, pool: ChunkPool) -> UnsafeMutableRawPointer {
        if let tail = rest.last ?? first, tail.owned, tail.tag == 0 {
            let room: UnsafeMutableRawPointer? = tail.ref._withUnsafeGuaranteedRef { chunk in
                Int(tail.end) == chunk.count && chunk.capacity - chunk.count >= n ? chunk.base + chunk.count : nil
            }
            if let room { return room }
        }
        let chunk = n <= pool.chunkSize ? pool.take() : ByteChunk(capacity: n)
        push(Entry(holding: chunk, start: 0, end: 0, tag: 0, owned: true))
        return chunk.base
    }

    /// Adds `n` bytes written at the pointer the last `reserve` returned.
    public mutating func commit(_ n: Int) {
        if rest.isEmpty {
            first!.ref._withUnsafeGuaranteedRef { $0.commit(n) }
            first!.end += Int32(n)
        } else {
            rest[rest.count - 1].ref._withUnsafeGuaranteedRef { $0.commit(n) }
            rest[rest.count - 1].end += Int32(n)
        }
        count += UInt32(n)
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
        append(shared: chunk, from: chunk.start, to: chunk.count, tag: tag)
    }

    /// Queues a reference to `chunk`'s immutable bytes `start ..< end` (no copy).
    ///
    /// The merge rule: when the tail entry refers to the same shared chunk and ends where this
    /// range starts, and neither carries a tag, the tail grows to cover the range instead of a new
    /// entry being pushed. A fan-out writes a turn's event frames one after the other in one arena
    /// chunk (`JSONWriter(arenaCapacity:)`), so a subscriber of every event queues one entry a turn
    /// and its flush is one iovec. A tagged entry stays an entry of its own, so that
    /// `removeUnsent(tag:)` can take it back whole; extending a partly sent head keeps it whole
    /// too (the bytes added are whole frames after it).
    @inline(__always)
    public mutating func append(shared chunk: ByteChunk, from start: Int, to end: Int, tag: UInt64 = 0) {
        let length = end - start
        guard length > 0 else { return }
        if tag == 0 {
            // The tail is the ring's last entry, or `first` when the ring is empty.
            let id = Unmanaged.passUnretained(chunk).toOpaque()
            if let tail = rest.lastEntry {
                if tail.pointee.end == Int32(truncatingIfNeeded: start), tail.pointee.ref.toOpaque() == id,
                   tail.pointee.tag == 0, !tail.pointee.owned {
                    tail.pointee.end = Int32(truncatingIfNeeded: end)
                    count &+= UInt32(truncatingIfNeeded: length)
                    return
                }
            } else if let head = first, head.end == Int32(truncatingIfNeeded: start), head.ref.toOpaque() == id,
                      head.tag == 0, !head.owned {
                first!.end = Int32(truncatingIfNeeded: end)
                count &+= UInt32(truncatingIfNeeded: length)
                return
            }
        }
        pushShared(chunk, start, end, tag)
    }

    @inline(never)
    private mutating func pushShared(_ chunk: ByteChunk, _ start: Int, _ end: Int, _ tag: UInt64) {
        count += UInt32(end - start)
        push(Entry(holding: chunk, start: Int32(start), end: Int32(end), tag: tag, owned: false))
    }

    /// The memory bound for a queue that is not draining: copies every entry that refers to a
    /// shared chunk more than `sparseFactor` times the entry's length (a reader's few frames of a
    /// fan-out's arena, or of a writer's spare capacity) into chunks of the queue's own, so
    /// that what the queue keeps alive is at most `sparseFactor` × its counted bytes, plus the
    /// pool chunk its copies are packed into. Untagged copies are packed into pooled chunks (as
    /// `append` does); a tagged entry gets an exact-size chunk of its own, so it stays an entry
    /// that `removeUnsent(tag:)` can take back. The bytes, their order and what was sent of the
    /// head do not change (a partly sent head is still the head, its rest at its front).
    /// Returns the bytes copied.
    ///
    /// `ByteStream` calls it when a flush leaves bytes unsent, and copies (`isSparse`) rather than
    /// references what is appended while the socket stays full; a queue that drains at the end of
    /// the turn releases its references anyway.
    @discardableResult
    public mutating func copySparseEntries(pool: ChunkPool) -> Int {
        guard let head = first else { return 0 }
        var copied = 0
        var entries = rest
        rest = EntryRing()
        let bytes = count
        let started = headStarted
        first = nil
        count = 0
        var kept = OutputQueue()
        func take(_ e: Entry) {
            if !e.owned, Self.isSparse(e.chunk, length: e.length) {
                let source = UnsafeRawBufferPointer(start: e.base + Int(e.start), count: e.length)
                if e.tag == 0 {
                    kept.append(source, pool: pool)
                } else {
                    kept.append(shared: ByteChunk(copying: source), tag: e.tag)
                }
                copied += e.length
                QueuedChunk.release(e, pool: pool)
            } else {
                kept.push(e)  // the entry's hold moves with it
            }
        }
        take(head)
        while let e = entries.popFirst() { take(e) }
        entries.removeAll()
        self = kept
        count = bytes
        headStarted = started
        return copied
    }

    /// A shared chunk holding more than `sparseFactor` × `length` bytes: a reader queuing
    /// `length` of its bytes while it is behind should copy them (`copySparseEntries`).
    public static let sparseFactor = 2
    @inline(__always)
    public static func isSparse(_ chunk: ByteChunk, length: Int) -> Bool {
        chunk.capacity > sparseFactor * length
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
        if let f = first { QueuedChunk.release(f, pool: pool) }
        for e in rest { QueuedChunk.release(e, pool: pool) }
        first = nil
        rest.removeAll()
        count = 0
        headStarted = false
    }

    /// Removes the unsent entries carrying `tag` (never an entry part of which was sent, nor the
    /// first `keepingHead` entry when a transport holds it); returns the bytes removed.
    public mutating func removeUnsent(tag: UInt64, keepingHead: Bool = false, pool: ChunkPool) -> Int {
        guard tag != 0 else { return 0 }
        var removed = 0
        rest.retain { e in
            guard e.tag == tag else { return true }
            removed += e.length
            QueuedChunk.release(e, pool: pool)
            return false
        }
        if let head = first, head.tag == tag, !headStarted, !keepingHead {
            removed += head.length
            QueuedChunk.release(head, pool: pool)
            first = rest.popFirst()
        }
        count -= UInt32(removed)
        return removed
    }

    /// Drops every byte not yet sent, except an entry part of which was sent (or that a transport
    /// holds, `keepingHead`), so what reaches the peer stays whole frames; returns the bytes dropped.
    /// For a connection that is being closed for falling behind: its close frame goes next.
    public mutating func discardUnsent(keepingHead: Bool = false, pool: ChunkPool) -> Int {
        var dropped = 0
        for e in rest {
            dropped += e.length
            QueuedChunk.release(e, pool: pool)
        }
        rest.removeAll()
        if let head = first, !headStarted, !keepingHead {
            dropped += head.length
            QueuedChunk.release(head, pool: pool)
            first = nil
        }
        count -= UInt32(dropped)
        return dropped
    }

    /// Writes as much as the socket takes with one `writev` per call (looping while it keeps taking
    /// everything offered). `iovecs` is scratch space of `maxIovecs` entries owned by the loop.
    public mutating func flush(fd: Int32, iovecs: UnsafeMutablePointer<iovec>, maxIovecs: Int, pool: ChunkPool) -> FlushResult {
        while let head = first {
            iovecs[0] = iovec(iov_base: head.base + Int(head.start), iov_len: head.length)
            var n = 1
            var offered = head.length
            for e in rest {
                if n == maxIovecs { break }
                iovecs[n] = iovec(iov_base: e.base + Int(e.start), iov_len: e.length)
                offered += e.length
                n += 1
            }
            let written = Self.write(fd, iovecs, n)
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

    /// One write of `n` iovecs. A single region, the common case since a turn's events share an
    /// arena, goes through `send(2)`: on a socket it skips the VFS layer `writev` passes through
    /// (`vfs_writev`, `fdget_pos`: ~7% of the daemon's samples at 10 frames a write, perf, against
    /// ~4.5% for `sendto`'s path). `MSG_NOSIGNAL`: a peer gone is EPIPE, never SIGPIPE. A stream
    /// that is not a socket (ENOTSOCK) is written with `writev`.
    @inline(__always)
    static func write(_ fd: Int32, _ iovecs: UnsafeMutablePointer<iovec>, _ n: Int) -> Int {
        if n == 1 {
            let sent = send(fd, iovecs[0].iov_base, iovecs[0].iov_len, Int32(MSG_NOSIGNAL))
            if sent >= 0 || errno != ENOTSOCK { return sent }
        }
        return writev(fd, iovecs, Int32(n))
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
                (merged.base + taken).copyMemory(from: entry.base + Int(entry.start), byteCount: length)
                taken += length
                if length < entry.length {
                    first!.start += Int32(length)
                    break
                }
                QueuedChunk.release(entry, pool: pool)
                first = rest.popFirst()
            }
            merged.count = taken
            if let next = first { rest.prepend(next) }
            first = Entry(holding: merged, start: 0, end: Int32(taken), tag: 0, owned: true)
        }
        let entry = first!
        return UnsafeRawBufferPointer(start: entry.base + Int(entry.start), count: min(entry.length, limit))
    }

    /// Marks the first `count` bytes as sent (after a transport wrote them from `coalescedHead`).
    public mutating func consumeSent(_ count: Int, pool: ChunkPool) {
        consume(count, pool: pool)
    }

    private mutating func consume(_ count: Int, pool: ChunkPool) {
        var left = count
        self.count -= UInt32(count)
        while left > 0, var head = first {
            let available = head.length
            if left < available {
                head.start += Int32(left)
                first = head
                headStarted = true
                return
            }
            left -= available
            QueuedChunk.release(head, pool: pool)
            first = rest.popFirst()
            headStarted = false
        }
        if first == nil { rest.removeAll() }  // an idle connection keeps no ring block
    }
}

/// How output queues hold the chunks their entries refer to: one counted reference per chunk for
/// all queued entries together, however many queues hold it.
///
/// Why: a fan-out queues the same frame on hundreds of connections. A counted reference per
/// entry costs an atomic increment when queued and an atomic decrement when sent, per recipient,
/// on an object every core's cache fights over; those were the largest user-space items of the
/// fan-out profile (`swift_retain`/`swift_release` from `append(shared:)` and `flush`). Instead,
/// `ByteChunk.queuedEntries` counts the entries (a plain integer: queues live on one loop thread),
/// and the chunk is retained when the first entry appears and released when the last goes:
/// once per fan-out, not once per recipient.
enum QueuedChunk {
    @inline(__always)
    static func hold(_ chunk: ByteChunk) -> Unmanaged<ByteChunk> {
        chunk.queuedEntries &+= 1
        return chunk.queuedEntries == 1 ? Unmanaged.passRetained(chunk) : Unmanaged.passUnretained(chunk)
    }

    /// The entry is gone (sent or dropped): an owned chunk goes back to the pool, and the last
    /// entry of a chunk gives back the queues' reference.
    @inline(__always)
    static func release(_ entry: OutputQueue.Entry, pool: ChunkPool) {
        let last: Bool = entry.ref._withUnsafeGuaranteedRef { chunk in
            chunk.queuedEntries &-= 1
            return chunk.queuedEntries == 0
        }
        if entry.owned { pool.give(entry.chunk) }
        if last { entry.ref.release() }
    }
}
