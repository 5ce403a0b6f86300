/// The last `capacity` events of one stream, oldest first, in a ring: appending never moves
/// the events already held, and the storage grows only as far as the stream actually goes.
///
/// Invariant: the held events have contiguous seqs `firstSeq...lastSeq`, because a stream's seqs
/// are contiguous and only the oldest event is ever dropped.
public struct PanicHistory: Sendable {
    public let capacity: Int
    private var storage: [PanicEvent] = []
    /// Index in `storage` of the oldest event once the ring is full (0 until then).
    private var head = 0

    public init(capacity: Int) {
        precondition(capacity >= 1)
        self.capacity = capacity
    }

    public var count: Int { storage.count }
    public var isEmpty: Bool { storage.isEmpty }

    /// Seq of the oldest event held (nil when empty).
    public var firstSeq: UInt64? { storage.isEmpty ? nil : storage[head].seq }

    /// Appends the stream's next event, dropping the oldest when full.
    mutating func append(_ event: PanicEvent) {
        if let first = firstSeq {
            precondition(event.seq == first + UInt64(storage.count), "history seqs must be contiguous")
        }
        if storage.count < capacity {
            storage.append(event)
        } else {
            storage[head] = event
            head = head + 1 == capacity ? 0 : head + 1
        }
    }

    /// Enough to take back the next `append` (`undoAppend`) without holding the storage: holding
    /// it would make that append copy every event (copy-on-write).
    public struct Mark: Sendable {
        let wasFull: Bool
        /// The event the next append overwrites when the ring is full.
        let overwritten: PanicEvent?
    }

    public var mark: Mark {
        let full = storage.count == capacity
        return Mark(wasFull: full, overwritten: full ? storage[head] : nil)
    }

    /// Takes back the newest event, appended right after `mark` was taken.
    mutating func undoAppend(_ mark: Mark) {
        guard !storage.isEmpty else { return }
        if let overwritten = mark.overwritten, mark.wasFull {
            head = head == 0 ? capacity - 1 : head - 1
            storage[head] = overwritten
        } else {
            storage.removeLast()
        }
    }

    /// The held event with this seq (nil when it was dropped already, or is not there yet): what a
    /// replay reads one event at a time, so that a watcher catching up never costs a copy of the
    /// history.
    public func event(seq: UInt64) -> PanicEvent? {
        guard let first = firstSeq, seq >= first, seq - first < UInt64(storage.count) else { return nil }
        return self[Int(seq - first)]
    }

    /// Whether both hold the same events in the same order: O(1) for two copies of one history
    /// (the same storage), else one comparison per event.
    public func holdsTheSameEvents(as other: PanicHistory) -> Bool {
        guard storage.count == other.storage.count, firstSeq == other.firstSeq else { return false }
        if head == other.head && storage.withUnsafeBufferPointer({ a in other.storage.withUnsafeBufferPointer { a.baseAddress == $0.baseAddress } }) {
            return true
        }
        for offset in 0..<storage.count where self[offset] != other[offset] { return false }
        return true
    }

    /// Every held event, oldest first.
    public var all: [PanicEvent] {
        (0..<storage.count).map { self[$0] }
    }

    /// The `offset`-th oldest event held.
    private subscript(offset: Int) -> PanicEvent {
        let index = head + offset
        return storage[index < capacity ? index : index - capacity]
    }
}
