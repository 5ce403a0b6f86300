/// The pins of one spatial-index cell, oldest first by (`createdAt`, `sequence`): what lets a
/// subscribe take the newest pins of an area without collecting and sorting all of them.
///
/// A sorted array of 40-byte entries: the order key, the id, and the pin's category as a small
/// tag of the store's (`PinStore.categoryTag`), so that walking a cell needs no lookup of the pin
/// until one passes the category filter. (A rare category is how a query rejects most of what
/// it walks; the area test, which needs the pin's point, rejects a bounded share, as a cover is
/// at most a few times its area.) Costs, for a cell of n entries:
/// - adding the newest pin (every `create`; a restore in creation order) appends: O(1) amortised;
/// - adding an older one (a pin moved into the cell, a clock that stepped back) is a binary search
///   and an insert: O(log n + n) moved entries, rare (moves are rate-limited owner edits);
/// - removing (delete, flag, expiry, a move out) is a binary search that marks the entry dead: O(log n).
///   Dead entries keep their key, so the array stays sorted; when they outnumber the live ones the
///   array is compacted, O(n) once per n/2 removals, so O(1) amortised. Walking skips them.
///
/// Memory: 40 bytes an entry, three entries a pin (one per index level), plus array slack: for a
/// million pins about 45 MB more than the hash sets of ids it replaced (`vigil-bench state`, peak
/// RSS 1.89 → 1.93 GB), for a restore no slower (3.7–4.4 s → 3.4–3.8 s, same machine, noisy).
struct CellRecency: Sendable {
    struct Entry: Sendable {
        var createdAt: Int64
        var sequence: UInt64
        var id: PinID
        var tag: UInt8

        /// The order of a subscribe reply, newest last here: (`createdAt`, `sequence`).
        @inline(__always)
        func precedes(_ other: Entry) -> Bool {
            (createdAt, sequence) < (other.createdAt, other.sequence)
        }

        @inline(__always)
        func sameKey(_ other: Entry) -> Bool {
            createdAt == other.createdAt && sequence == other.sequence
        }

        var isDead: Bool { id == CellRecency.dead }
    }

    /// The id a removed entry is given. Every bit set is no version-4 UUID (its version nibble
    /// would be F), so no pin the server makes has it; a pin with this id could come only from a
    /// damaged state file, and would be kept but never listed.
    static let dead = PinID(high: .max, low: .max)

    private(set) var entries: [Entry] = []
    private(set) var deadCount = 0

    var liveCount: Int { entries.count - deadCount }
    var isEmpty: Bool { liveCount == 0 }

    /// Files `entry` in order.
    mutating func insert(_ entry: Entry) {
        if let last = entries.last, entry.precedes(last) {
            entries.insert(entry, at: firstIndex(after: entry))
        } else {
            entries.append(entry)
        }
    }

    /// Appends without keeping the order, for a bulk load; `sort()` restores it.
    mutating func appendUnordered(_ entry: Entry) {
        entries.append(entry)
    }

    /// Whether `appendUnordered` left the entries out of order.
    var needsSort: Bool {
        zip(entries, entries.dropFirst()).contains { $1.precedes($0) }
    }

    mutating func sort() {
        entries.sort { $0.precedes($1) }
    }

    /// Marks `entry` (same key and id) dead; false when it is not held.
    @discardableResult
    mutating func remove(_ entry: Entry) -> Bool {
        var i = firstIndex(notBefore: entry)
        while i < entries.count, entries[i].sameKey(entry) {
            if entries[i].id == entry.id {
                entries[i].id = Self.dead
                deadCount += 1
                if deadCount > 32 && deadCount * 2 > entries.count { compact() }
                else if deadCount == entries.count { entries.removeAll(); deadCount = 0 }
                return true
            }
            i += 1
        }
        return false
    }

    /// The index of the newest live entry before `end` (exclusive), or nil; `skipped` counts the
    /// dead entries passed over.
    @inline(__always)
    func newestLive(before end: Int, skipped: inout Int) -> Int? {
        var i = end - 1
        while i >= 0 {
            if !entries[i].isDead { return i }
            skipped += 1
            i -= 1
        }
        return nil
    }

    private mutating func compact() {
        entries.removeAll { $0.isDead }
        deadCount = 0
    }

    /// The first index whose entry does not come before `entry`'s key.
    private func firstIndex(notBefore entry: Entry) -> Int {
        var low = 0, high = entries.count
        while low < high {
            let mid = (low + high) / 2
            if entries[mid].precedes(entry) { low = mid + 1 } else { high = mid }
        }
        return low
    }

    /// The first index whose entry comes after `entry`'s key (where an insert keeps the order).
    private func firstIndex(after entry: Entry) -> Int {
        var low = 0, high = entries.count
        while low < high {
            let mid = (low + high) / 2
            if entry.precedes(entries[mid]) { high = mid } else { low = mid + 1 }
        }
        return low
    }
}
