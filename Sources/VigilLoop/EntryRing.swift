/// The output queue's entries after its inline first one: a ring in one plain heap block, whose
/// bookkeeping (capacity, head, count) lives in the block, so the queue holds only one pointer.
///
/// Why not `Deque`: a fan-out recipient gets tens of entries in a turn and the end-of-turn flush
/// drains them. With `Deque`, every turn paid for its storage object (allocation, a uniqueness
/// check on every append and pop, about five regrowths from empty, the old buffers' release):
/// ~170 user-space instructions per delivery in the callgrind profile of the fan-out. Here an
/// append is a store and an increment; the block starts at `initialCapacity` entries and doubles,
/// and goes back to malloc when the queue empties (an idle connection holds none).
///
/// The block is not reference-counted: a ring (and the `OutputQueue` holding it) is mutated in
/// place where it lives and never copied while it holds a block (only empty queues are copied,
/// e.g. `Array(repeating: OutputQueue(), ...)`). Whoever owns it calls `removeAll` before letting
/// it go, as the queue's owner already must to hand its chunks back (`ByteStream`'s close).
struct EntryRing: Sequence {
    typealias Entry = OutputQueue.Entry

    private struct Header {
        var capacity: Int32  // a power of two
        var head: Int32
        var count: Int32
    }

    private static let entriesOffset = 16  // the header, rounded up to the entries' alignment
    static let initialCapacity: Int32 = 32

    private var block: UnsafeMutableRawPointer?

    init() {}

    @inline(__always) private var header: UnsafeMutablePointer<Header> {
        block.unsafelyUnwrapped.assumingMemoryBound(to: Header.self)
    }

    @inline(__always) private static func header(_ block: UnsafeMutableRawPointer) -> UnsafeMutablePointer<Header> {
        block.assumingMemoryBound(to: Header.self)
    }

    @inline(__always) private static func entries(_ block: UnsafeMutableRawPointer) -> UnsafeMutablePointer<Entry> {
        (block + entriesOffset).assumingMemoryBound(to: Entry.self)
    }

    var count: Int { block == nil ? 0 : Int(header.pointee.count) }
    var isEmpty: Bool { count == 0 }

    /// The `i`th entry from the front (`0 ..< count`).
    subscript(i: Int) -> Entry {
        get {
            precondition(i >= 0 && i < count, "EntryRing index out of range")
            let h = header.pointee
            return Self.entries(block!)[Int((h.head &+ Int32(i)) & (h.capacity - 1))]
        }
        set {
            precondition(i >= 0 && i < count, "EntryRing index out of range")
            let h = header.pointee
            Self.entries(block!)[Int((h.head &+ Int32(i)) & (h.capacity - 1))] = newValue
        }
    }

    var last: Entry? { isEmpty ? nil : self[count - 1] }

    /// The last entry, to change in place (valid until the ring next changes); nil when empty.
    var lastEntry: UnsafeMutablePointer<Entry>? {
        @inline(__always) get {
            guard let block else { return nil }
            let h = Self.header(block).pointee
            guard h.count > 0 else { return nil }
            return Self.entries(block) + Int((h.head &+ h.count &- 1) & (h.capacity &- 1))
        }
    }

    mutating func append(_ entry: Entry) {
        guard let block, Self.header(block).pointee.count < Self.header(block).pointee.capacity else {
            grow()
            return append(entry)
        }
        let h = Self.header(block)
        Self.entries(block)[Int((h.pointee.head &+ h.pointee.count) & (h.pointee.capacity &- 1))] = entry
        h.pointee.count &+= 1
    }

    mutating func prepend(_ entry: Entry) {
        if block == nil || header.pointee.count == header.pointee.capacity { grow() }
        let h = header
        h.pointee.head = (h.pointee.head &- 1) & (h.pointee.capacity - 1)
        Self.entries(block!)[Int(h.pointee.head)] = entry
        h.pointee.count &+= 1
    }

    mutating func popFirst() -> Entry? {
        guard count > 0 else { return nil }
        let h = header
        let entry = Self.entries(block!)[Int(h.pointee.head)]
        h.pointee.head = (h.pointee.head &+ 1) & (h.pointee.capacity - 1)
        h.pointee.count &-= 1
        return entry
    }

    /// Keeps the entries for which `keep` is true, in order (in place).
    mutating func retain(where keep: (Entry) -> Bool) {
        let n = count
        var kept = 0
        for i in 0..<n {
            let entry = self[i]
            if keep(entry) {
                if kept != i { self[kept] = entry }
                kept += 1
            }
        }
        if block != nil { header.pointee.count = Int32(kept) }
    }

    /// Empties the ring and frees its block.
    mutating func removeAll() {
        block?.deallocate()
        block = nil
    }

    /// Doubles the block (or makes the first), the entries moved to its front in order: at most
    /// two contiguous runs, copied whole (entries are plain data).
    private mutating func grow() {
        guard let old = block else {
            block = Self.allocate(capacity: Self.initialCapacity)
            Self.header(block!).pointee = Header(capacity: Self.initialCapacity, head: 0, count: 0)
            return
        }
        let h = Self.header(old).pointee
        let capacity = h.capacity * 2
        let grown = Self.allocate(capacity: capacity)
        let from = Self.entries(old), to = Self.entries(grown)
        let firstRun = Int(Swift.min(h.count, h.capacity - h.head))
        to.initialize(from: from + Int(h.head), count: firstRun)
        (to + firstRun).initialize(from: from, count: Int(h.count) - firstRun)
        old.deallocate()
        block = grown
        Self.header(grown).pointee = Header(capacity: capacity, head: 0, count: h.count)
    }

    private static func allocate(capacity: Int32) -> UnsafeMutableRawPointer {
        let block = UnsafeMutableRawPointer.allocate(
            byteCount: entriesOffset + Int(capacity) * MemoryLayout<Entry>.stride, alignment: 16)
        block.bindMemory(to: Header.self, capacity: 1)
        (block + entriesOffset).bindMemory(to: Entry.self, capacity: Int(capacity))
        return block
    }

    struct Iterator: IteratorProtocol {
        let entries: UnsafeMutablePointer<Entry>?
        let mask: Int32
        var position: Int32
        var left: Int32

        mutating func next() -> Entry? {
            guard left > 0, let entries else { return nil }
            defer {
                position = (position &+ 1) & mask
                left &-= 1
            }
            return entries[Int(position)]
        }
    }

    func makeIterator() -> Iterator {
        guard let block else { return Iterator(entries: nil, mask: 0, position: 0, left: 0) }
        let h = header.pointee
        return Iterator(entries: Self.entries(block), mask: h.capacity - 1, position: h.head, left: h.count)
    }
}
