import HeapModule
import VigilGeo

/// The live pins, with the two indexes that keep every operation cheap:
///
/// - a spatial index: each pin is listed under its geohash cell at a few index levels
///   (`indexLevels`), each cell's pins in recency order (`CellRecency`), so an area query visits
///   only the cells that cover the area and, in them, only the newest pins it needs
///   (`pins(in:...)`, in PinStore+Query.swift);
/// - an expiry heap ordered by `expiresAt`, so expiring costs nothing for pins that are not due.
///   Entries are never removed early: an entry whose pin is gone or whose `expiresAt` changed is
///   stale and skipped when it reaches the top (edits are rate-limited, so stale entries are bounded).
///
/// A value type: a copy is a consistent snapshot (copy-on-write), which persistence will use.
public struct PinStore: Sendable {
    /// Geohash precisions the spatial index keeps (≈ 630 km, 20 km, 600 m cells).
    static let indexLevels = [2, 4, 6]

    struct ExpiryEntry: Comparable, Sendable {
        let expiresAt: Int64
        let id: PinID
        static func < (a: ExpiryEntry, b: ExpiryEntry) -> Bool {
            (a.expiresAt, a.id) < (b.expiresAt, b.id)
        }
    }

    public internal(set) var pins: [PinID: Pin] = [:]
    /// Cell key (`GeohashCell.key` at an index level) → that cell's pins, oldest first.
    var spatial: [UInt64: CellRecency] = [:]
    /// Category names → the small tags index entries carry, in order of first use; names past
    /// the 255th share `CategoryTags.overflow` (their pins are looked up to be filtered).
    var categoryTags = CategoryTags()
    var expiry = Heap<ExpiryEntry>()
    var nextSequence: UInt64 = 0
    /// Pins per cell at the cluster precisions, kept wherever the spatial index changes (`index`,
    /// `unindex`, `reindex`, `appendToIndex`); counts nothing until `countClusters` names them.
    public internal(set) var clusters = ClusterCounts(precisions: nil)

    public init() {}

    public var count: Int { pins.count }

    public subscript(id: PinID) -> Pin? { pins[id] }

    /// Stores a new pin and returns it as stored: numbered with the next `sequence`, which is how
    /// the caller learns it without looking the pin up again.
    @discardableResult
    public mutating func insert(_ pin: Pin) -> Pin {
        var pin = pin
        nextSequence += 1
        pin.sequence = nextSequence
        let previous = pins.updateValue(pin, forKey: pin.id)
        precondition(previous == nil, "duplicate pin id")
        index(pin)
        expiry.insert(ExpiryEntry(expiresAt: pin.expiresAt, id: pin.id))
        return pin
    }

    /// Stores an edited pin, moving it in the indexes when its cell or expiry changed: O(1) for
    /// an edit that stays in its cells, a removal and an insert per index level it leaves.
    public mutating func replace(_ pin: Pin) {
        guard let old = pins[pin.id] else { preconditionFailure("replacing an unknown pin") }
        pins[pin.id] = pin
        reindex(from: old, to: pin)
        if old.expiresAt != pin.expiresAt {
            expiry.insert(ExpiryEntry(expiresAt: pin.expiresAt, id: pin.id))
        }
    }

    @discardableResult
    public mutating func remove(_ id: PinID) -> Pin? {
        guard let pin = pins.removeValue(forKey: id) else { return nil }
        unindex(pin)
        return pin
    }

    /// Sets `voter`'s vote on pin `id` in place (a vote moves the pin in no index). Nil when no
    /// such pin is held, false when the voter had that vote already.
    @discardableResult
    public mutating func setVote(_ id: PinID, voter: UInt64, value: Int8) -> Bool? {
        pins[id]?.setVote(voter, value)
    }

    /// Keeps `json` as the stored pin's JSON object (`Pin.json`). The caller encoded it from the
    /// pin as this store holds it now; a pin not held (removed meanwhile) is left alone.
    public mutating func keepJSON(_ json: [UInt8], for id: PinID) {
        pins[id]?.json = json
    }

    /// Removes and returns every pin whose `expiresAt` is at or before `now`, oldest first.
    public mutating func removeExpired(now: Int64) -> [Pin] {
        var expired: [Pin] = []
        while let top = expiry.min, top.expiresAt <= now {
            _ = expiry.popMin()
            guard let pin = pins[top.id], pin.expiresAt == top.expiresAt else { continue }  // stale entry
            remove(pin.id)
            expired.append(pin)
        }
        return expired
    }

    /// The earliest pending expiry (possibly of a stale entry), for tests and diagnostics.
    public var nextExpiry: Int64? { expiry.min?.expiresAt }

    /// Files `pin` in its cell at every index level.
    mutating func index(_ pin: Pin) {
        let entry = entry(pin)
        for level in Self.indexLevels {
            spatial[pin.cell.ancestor(precision: level).key, default: CellRecency()].insert(entry)
        }
        if pin.countsInClusters { clusters.add(pin.cell, pin.point, tag: entry.tag) }
    }

    mutating func unindex(_ pin: Pin) {
        let entry = entry(pin)
        for level in Self.indexLevels {
            remove(entry, fromCell: pin.cell.ancestor(precision: level).key)
        }
        if pin.countsInClusters { clusters.remove(pin.cell, pin.point, tag: entry.tag) }
    }

    /// Moves a replaced pin's entries where its cell or order key changed, level by level: a move
    /// within a 600 m cell touches nothing, one across it only the finest level.
    mutating func reindex(from old: Pin, to new: Pin) {
        let before = entry(old), after = entry(new)
        // The mean position moves with the point, even within one full-precision cell.
        // A range set or removed takes the pin out of the counts or puts it back.
        if old.point != new.point || before.tag != after.tag || old.countsInClusters != new.countsInClusters {
            if old.countsInClusters { clusters.remove(old.cell, old.point, tag: before.tag) }
            if new.countsInClusters { clusters.add(new.cell, new.point, tag: after.tag) }
        }
        let sameKey = before.sameKey(after) && before.tag == after.tag
        if sameKey && old.cell == new.cell { return }
        for level in Self.indexLevels {
            let from = old.cell.ancestor(precision: level).key, to = new.cell.ancestor(precision: level).key
            guard !sameKey || from != to else { continue }
            remove(before, fromCell: from)
            spatial[to, default: CellRecency()].insert(after)
        }
    }

    private mutating func remove(_ entry: CellRecency.Entry, fromCell key: UInt64) {
        // In place (the dictionary's modify accessor): copying a big cell out and back would cost
        // O(its pins) per removal.
        if spatial[key]?.remove(entry) == true, spatial[key]?.isEmpty == true {
            spatial.removeValue(forKey: key)
        }
    }

    /// The index entry of `pin`, its category tagged (a new category gets the next tag).
    mutating func entry(_ pin: Pin) -> CellRecency.Entry {
        CellRecency.Entry(createdAt: pin.createdAt, sequence: pin.sequence, id: pin.id, tag: categoryTags.tag(pin.category))
    }
}
