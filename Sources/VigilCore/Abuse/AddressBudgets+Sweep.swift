/// Keeping the address table bounded: entries that hold nothing are dropped once their buckets
/// are full again and their voter number has been kept long enough, found through a heap of those
/// times. An entry has at most one element in the heap (`Entry.filedAt` says which), so the heap
/// is never larger than the table.
extension AddressBudgets {
    /// Drops every entry whose time has come and that holds nothing (no open stream, no live pin,
    /// every bucket full, its voter number no longer kept), and returns how many. Costs O(log n)
    /// per element due by `now` and nothing for the others: an element that comes due for an
    /// entry that was used since is filed again at the entry's new time, one that holds something
    /// again leaves the heap until its last close. The server calls it from its tick; `admit…`
    /// calls it too when the table is full.
    @discardableResult
    public mutating func sweep(now: Int64) -> Int {
        var dropped = 0
        while let top = droppable.min, top.at <= now {
            _ = droppable.popMin()
            guard let entry = entries[top.key], entry.filedAt == top.at else { continue }
            if entry.holdsSomething {
                entries[top.key]?.filedAt = nil          // filed again by its last close
                continue
            }
            let at = dropTime(entry)
            if at > now {
                file(top.key, at: at)
            } else {
                entries.removeValue(forKey: top.key)
                dropped += 1
            }
        }
        return dropped
    }

    /// The first time an entry that holds nothing may go: when its last bucket is full again and
    /// its voter number (if it has one) is no longer kept.
    func dropTime(_ entry: Entry) -> Int64 {
        max(entry.starts.fullAt(settings.panicStarts), entry.pinCreates.fullAt(settings.pinCreates),
            entry.subscribes.fullAt(settings.subscribes), entry.circleCreates.fullAt(settings.circleCreates), entry.voter == 0 ? .min : entry.voterKeptUntil)
    }

    mutating func file(_ key: AddressKey, at: Int64) {
        entries[key]?.filedAt = at
        droppable.insert(Droppable(at: at, key: key))
    }
}
