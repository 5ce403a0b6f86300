import CLinux
import Glibc
import Testing
import VigilBytes
@testable import VigilLoop

/// A small deterministic generator, so that a failing sequence can be replayed from its seed.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// `OutputQueue`'s merge rule (a run of one chunk's adjacent ranges is one entry) and its memory
/// bound (`copySparseEntries`, `ByteStream.append(shared:from:to:)` while the socket is full).
@Suite struct OutputQueueMergeTests {
    /// An arena of `frames` frames written one after the other, each `size` bytes, frame `i`
    /// filled with byte `i`; returns the chunk and each frame's range.
    func arena(frames: Int, size: Int, capacity: Int? = nil) -> (ByteChunk, [Range<Int>]) {
        let chunk = ByteChunk(capacity: capacity ?? frames * size)
        var ranges: [Range<Int>] = []
        for i in 0..<frames {
            (chunk.base + chunk.count).initializeMemory(as: UInt8.self, repeating: UInt8(truncatingIfNeeded: i), count: size)
            ranges.append(chunk.count..<chunk.count + size)
            chunk.commit(size)
        }
        return (chunk, ranges)
    }

    func flushAll(_ queue: inout OutputQueue, to a: Int32, from b: Int32, pool: ChunkPool) -> [UInt8] {
        let iov = UnsafeMutablePointer<iovec>.allocate(capacity: 64)
        defer { iov.deallocate() }
        var got: [UInt8] = []
        for _ in 0..<10_000 {
            let result = queue.flush(fd: a, iovecs: iov, maxIovecs: 64, pool: pool)
            got += Sockets.readAll(b).bytes
            if result == .drained { break }
        }
        return got
    }

    @Test func adjacentRangesOfOneChunkAreOneEntry() {
        let pool = ChunkPool(chunkSize: 1024)
        let (chunk, ranges) = arena(frames: 30, size: 100)
        var queue = OutputQueue()
        for r in ranges { queue.append(shared: chunk, from: r.lowerBound, to: r.upperBound) }
        #expect(queue.entryCount == 1)
        #expect(queue.byteCount == 3_000)
        #expect(chunk.queuedEntries == 1)
        // A gap (a frame this queue does not get), a tag, or another chunk starts a new entry.
        var sparse = OutputQueue()
        sparse.append(shared: chunk, from: ranges[0].lowerBound, to: ranges[0].upperBound)
        sparse.append(shared: chunk, from: ranges[2].lowerBound, to: ranges[2].upperBound)
        sparse.append(shared: chunk, from: ranges[3].lowerBound, to: ranges[3].upperBound, tag: 7)
        sparse.append(shared: chunk, from: ranges[4].lowerBound, to: ranges[4].upperBound)
        sparse.append(shared: chunk, from: ranges[5].lowerBound, to: ranges[5].upperBound)
        #expect(sparse.entryCount == 4)  // 0 | 2 | 3 (tagged) | 4-5
        // Nothing is merged into an own (pooled) chunk's entry either.
        [UInt8](repeating: 9, count: 10).withUnsafeBytes { sparse.append($0, pool: pool) }
        sparse.append(shared: chunk, from: ranges[6].lowerBound, to: ranges[6].upperBound)
        #expect(sparse.entryCount == 6)
        queue.removeAll(pool: pool)
        sparse.removeAll(pool: pool)
        #expect(chunk.queuedEntries == 0)
    }

    @Test func aMergedRunGoesOutAsOneIovecAndTheChunkIsReleasedAfterIt() {
        let (a, b) = Sockets.pair()
        defer { close(a); close(b) }
        let pool = ChunkPool(chunkSize: 1024)
        var queues = [OutputQueue](repeating: OutputQueue(), count: 3)
        weak var weakChunk: ByteChunk?
        var expected: [[UInt8]] = [[], [], []]
        do {
            let (chunk, ranges) = arena(frames: 20, size: 50)
            weakChunk = chunk
            for (i, r) in ranges.enumerated() {
                for q in 0..<3 where (i + q) % 3 != 0 || q == 0 {  // queue 0 gets every frame
                    queues[q].append(shared: chunk, from: r.lowerBound, to: r.upperBound)
                    expected[q] += [UInt8](repeating: UInt8(i), count: 50)
                }
            }
        }
        #expect(queues[0].entryCount == 1)
        #expect(weakChunk != nil)  // the queues hold it
        for q in 0..<3 {
            #expect(flushAll(&queues[q], to: a, from: b, pool: pool) == expected[q])
        }
        #expect(weakChunk == nil)  // released with the last entry, once
    }

    /// The model test: random appends (shared ranges of a few arenas, adjacent or not, tagged or
    /// not, and own bytes), flushes with partial writes, `removeUnsent`, `discardUnsent` and
    /// `copySparseEntries`. Every item is self-describing (its number and length in front), so the
    /// bytes received must parse as whole items, in order, and every item no call took back must
    /// arrive; the bytes the calls report taken back are exactly the items that never arrived.
    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
    func theBytesOnTheWireAreTheQueuedItemsWhole(seed: UInt64) throws {
        var rng = SplitMix64(seed: seed)
        let (a, b) = Sockets.pair(sendBuffer: 4_096)
        defer { close(a); close(b) }
        let pool = ChunkPool(chunkSize: 512)
        var queue = OutputQueue()
        let iov = UnsafeMutablePointer<iovec>.allocate(capacity: 8)
        defer { iov.deallocate() }

        struct Item { let tag: UInt64; var mayVanish: Bool }
        var items: [Item] = []
        var queuedItems: [Int] = []  // items possibly still queued (not known to be sent)
        var received: [UInt8] = []
        var appended = 0, taken = 0
        var arenaChunk = ByteChunk(capacity: 4_096)

        func itemBytes(_ id: Int, _ size: Int) -> [UInt8] {
            var bytes = [UInt8(truncatingIfNeeded: size), UInt8(truncatingIfNeeded: size >> 8)]
            bytes += [UInt8(truncatingIfNeeded: id), UInt8(truncatingIfNeeded: id >> 8), UInt8(truncatingIfNeeded: id >> 16)]
            bytes += (0..<(size - 5)).map { UInt8(truncatingIfNeeded: id &* 7 &+ $0) }
            return bytes
        }

        for _ in 0..<3_000 {
            switch Int.random(in: 0..<100, using: &rng) {
            case 0..<55:  // a shared range, in the current arena (adjacent to the last, or after a gap) or a new one
                let id = items.count
                let size = Int.random(in: 5...300, using: &rng)
                let bytes = itemBytes(id, size)
                if Int.random(in: 0..<4, using: &rng) == 0 {  // a frame this queue does not get
                    let skip = Int.random(in: 1...40, using: &rng)
                    if arenaChunk.capacity - arenaChunk.count >= skip { arenaChunk.commit(skip) }
                }
                if arenaChunk.capacity - arenaChunk.count < size || Int.random(in: 0..<30, using: &rng) == 0 {
                    arenaChunk = ByteChunk(capacity: Int.random(in: 1...3, using: &rng) == 1 ? 1_024 : 8_192)
                }
                let start = arenaChunk.count
                bytes.withUnsafeBytes { arenaChunk.append($0) }
                let tag: UInt64 = Int.random(in: 0..<5, using: &rng) == 0 ? UInt64.random(in: 1...3, using: &rng) : 0
                queue.append(shared: arenaChunk, from: start, to: arenaChunk.count, tag: tag)
                items.append(Item(tag: tag, mayVanish: false))
                queuedItems.append(id)
                appended += size
            case 55..<70:  // own bytes, copied
                let id = items.count
                let size = Int.random(in: 5...700, using: &rng)
                itemBytes(id, size).withUnsafeBytes { queue.append($0, pool: pool) }
                items.append(Item(tag: 0, mayVanish: false))
                queuedItems.append(id)
                appended += size
            case 70..<85:  // a flush; the kernel takes what fits; the peer reads some of it
                _ = queue.flush(fd: a, iovecs: iov, maxIovecs: 8, pool: pool)
                if Bool.random(using: &rng) {
                    received += Sockets.readAll(b, max: Int.random(in: 1...6_000, using: &rng)).bytes
                }
            case 85..<92:
                let tag = UInt64.random(in: 1...3, using: &rng)
                for id in queuedItems where items[id].tag == tag { items[id].mayVanish = true }
                taken += queue.removeUnsent(tag: tag, pool: pool)
            case 92..<94:
                for id in queuedItems { items[id].mayVanish = true }
                taken += queue.discardUnsent(pool: pool)
            default:
                queue.copySparseEntries(pool: pool)
            }
            #expect(queue.byteCount >= 0)
        }
        received += flushAll(&queue, to: a, from: b, pool: pool)
        #expect(queue.isEmpty && queue.byteCount == 0)
        #expect(received.count == appended - taken)

        // Parse: whole items, increasing numbers; the missing ones are exactly those a call could take.
        var position = 0
        var arrived = Set<Int>()
        var last = -1
        while position + 5 <= received.count {
            let size = Int(received[position]) | Int(received[position + 1]) << 8
            let id = Int(received[position + 2]) | Int(received[position + 3]) << 8 | Int(received[position + 4]) << 16
            try #require(size >= 5 && position + size <= received.count, "a cut item at byte \(position)")
            try #require(Array(received[position..<position + size]) == itemBytes(id, size), "item \(id) altered")
            try #require(id > last, "items out of order")
            arrived.insert(id)
            last = id
            position += size
        }
        #expect(position == received.count)
        let lost = items.indices.filter { !items[$0].mayVanish && !arrived.contains($0) }
        #expect(lost.isEmpty, "items lost: \(lost.prefix(10))")
    }

    /// The bound: after `copySparseEntries`, the queue keeps no chunk alive that is more than
    /// `sparseFactor` times what it refers to in it; the bytes are unchanged, and a tagged entry
    /// can still be taken back.
    @Test func aQueueBehindCopiesItsFewFramesOutOfALargeArena() {
        let (a, b) = Sockets.pair()
        defer { close(a); close(b) }
        let pool = ChunkPool(chunkSize: 1024)
        var queue = OutputQueue()
        weak var weakArena: ByteChunk?
        weak var weakDense: ByteChunk?
        var expected: [UInt8] = []
        do {
            let (big, ranges) = arena(frames: 100, size: 200)  // 20,000 bytes
            weakArena = big
            for i in [3, 4, 40] {  // 600 bytes of 20,000
                queue.append(shared: big, from: ranges[i].lowerBound, to: ranges[i].upperBound, tag: i == 40 ? 9 : 0)
            }
            let (dense, denseRanges) = arena(frames: 4, size: 200)  // the queue refers to all of it
            weakDense = dense
            for r in denseRanges { queue.append(shared: dense, from: r.lowerBound, to: r.upperBound) }
            expected = [UInt8](repeating: 3, count: 200) + [UInt8](repeating: 4, count: 200)
            expected += (0..<4).flatMap { [UInt8](repeating: UInt8($0), count: 200) }
        }
        #expect(queue.byteCount == 1_400)
        let copied = queue.copySparseEntries(pool: pool)
        #expect(copied == 600)
        #expect(queue.byteCount == 1_400)
        #expect(weakArena == nil, "the arena is no longer kept alive by three of its frames")
        #expect(weakDense != nil, "a chunk the queue mostly refers to is kept, not copied")
        #expect(queue.removeUnsent(tag: 9, pool: pool) == 200)  // the tagged frame is still its own entry
        #expect(flushAll(&queue, to: a, from: b, pool: pool) == expected)
        #expect(weakDense == nil)
    }

    /// The bound through the stream: once a flush leaves bytes unsent, what the stream still owes
    /// of a large shared arena is copied, and what is appended while the socket stays full is
    /// copied, not referenced; the peer still gets every byte in order.
    @Test func aStreamBehindDoesNotKeepArenasAlive() throws {
        let f = try StreamFixture(sendBuffer: 4_096)
        let (loop, stream, b) = (f.loop, f.stream, f.peer)
        defer { try? f.finish() }
        var expected: [UInt8] = []
        weak var first: ByteChunk?
        weak var second: ByteChunk?
        do {
            // Enough of the arena for the socket to fill, little enough of it to be sparse.
            let (big, ranges) = arena(frames: 64, size: 4_096, capacity: 2_000_000)
            first = big
            for r in ranges {
                stream.append(shared: big, from: r.lowerBound, to: r.upperBound)
                expected += [UInt8](repeating: UInt8(truncatingIfNeeded: expected.count / 4_096), count: 4_096)
            }
        }
        #expect(first != nil)
        try loop.turn(timeoutMs: 0)
        #expect(stream.queuedBytes > 0, "the socket must have filled")
        #expect(first == nil, "the frames still owed were copied out of the arena")
        do {
            let (big, ranges) = arena(frames: 2, size: 300, capacity: 100_000)
            second = big
            for (i, r) in ranges.enumerated() {
                stream.append(shared: big, from: r.lowerBound, to: r.upperBound)
                expected += [UInt8](repeating: UInt8(i), count: 300)
            }
        }
        #expect(second == nil, "appended while behind: copied, not referenced")
        var got: [UInt8] = []
        for _ in 0..<10_000 where got.count < expected.count {
            got += Sockets.readAll(b).bytes
            try loop.turn(timeoutMs: 100)
        }
        #expect(got == expected)
        #expect(stream.queuedBytes == 0)
    }
}
