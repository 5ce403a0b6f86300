import HeapModule

/// Export and restore for durable state: the store's pins out as plain values, and back in
/// with the indexes rebuilt.
extension PinStore {
    /// Every pin, in creation order (`sequence`), so that a snapshot's bytes depend only on the
    /// store's content and a restore sees the pins in the order they were made.
    ///
    /// Sorts (sequence, id) pairs rather than the pins themselves: moving 1,000,000 small pairs
    /// is far cheaper than moving 1,000,000 pins with their strings and vote tables.
    public func exportPins() -> [Pin] {
        var order: [(sequence: UInt64, id: PinID)] = []
        order.reserveCapacity(pins.count)
        for (id, pin) in pins { order.append((pin.sequence, id)) }
        order.sort { ($0.sequence, $0.id) < ($1.sequence, $1.id) }
        var out: [Pin] = []
        out.reserveCapacity(order.count)
        for entry in order {
            if let pin = pins[entry.id] { out.append(pin) }
        }
        return out
    }

    /// Puts pins back as they were: each keeps its `sequence` (so creation order, and with it the
    /// order of subscribe replies, survives a restart), and later inserts number on from the
    /// highest one. A pin whose id is held already replaces it (last one wins), so a replayed
    /// duplicate cannot trip `insert`'s duplicate check. A `sequence` of 0 (a pin that never
    /// went through a store) gets the next number, as `insert` would give it.
    ///
    /// Takes an array, not any collection: a generic called from another module runs
    /// unspecialised, copying each pin through value witnesses (1.2 s instead of 0.75 s for
    /// 300,000 pins). Most of what remains is the spatial index: an entry per cell and level.
    ///
    /// Into an empty store (startup) the cells are filled by appending, in the order given, and
    /// only a cell the order left unsorted (pins from a clock that stepped back) is sorted at the
    /// end; the expiry heap is built in one O(n) heapify instead of n O(log n) inserts. Into a
    /// filled one (journal replay, one pin at a time) each pin is an insert or replace like any
    /// other, and a replaced pin that stays in its cells costs no index work at all. Pins are
    /// taken as given, expired ones included; the caller decides what to drop.
    public mutating func restore(_ restored: [Pin]) {
        let wasEmpty = pins.isEmpty
        pins.reserveCapacity(pins.count + restored.count)
        var entries: [ExpiryEntry] = []
        entries.reserveCapacity(restored.count)
        var appending = wasEmpty
        for original in restored {
            var pin = original
            if pin.sequence == 0 {
                nextSequence += 1
                pin.sequence = nextSequence
            } else if pin.sequence > nextSequence {
                nextSequence = pin.sequence
            }
            if let old = pins.updateValue(pin, forKey: pin.id) {
                // A duplicate id (only a damaged input has one): the cells must be in order
                // before an entry can be found in them, so the bulk load ends here.
                if appending { sortCellsAppendedOutOfOrder(); appending = false }
                reindex(from: old, to: pin)
                if old.expiresAt == pin.expiresAt { continue }     // its expiry entry still holds
            } else if appending {
                appendToIndex(pin)
            } else {
                index(pin)
            }
            entries.append(ExpiryEntry(expiresAt: pin.expiresAt, id: pin.id))
        }
        if appending { sortCellsAppendedOutOfOrder() }
        if wasEmpty {
            // A replaced pin's old entry may be in `entries` too: it is then stale, and skipped
            // like any stale entry when it reaches the top.
            expiry = Heap(entries)
        } else {
            for entry in entries { expiry.insert(entry) }
        }
    }

    private mutating func sortCellsAppendedOutOfOrder() {
        for key in Array(spatial.keys) where spatial[key]?.needsSort == true { spatial[key]?.sort() }
    }

    /// `index` for a bulk load: appends to each cell, order restored by the caller.
    private mutating func appendToIndex(_ pin: Pin) {
        let entry = entry(pin)
        for level in Self.indexLevels {
            spatial[pin.cell.ancestor(precision: level).key, default: CellRecency()].appendUnordered(entry)
        }
        if pin.countsInClusters { clusters.add(pin.cell, pin.point, tag: entry.tag) }
    }
}

extension PinStore {
    /// Counts every pin at `precisions` from now on, starting with a count of the pins held:
    /// O(pins × precisions), once, when a hub takes over a restored store. A store already
    /// counting these precisions is left as it is.
    public mutating func countClusters(precisions: ClosedRange<Int>) {
        guard clusters.precisions != precisions else { return }
        clusters = ClusterCounts(precisions: precisions)
        for pin in pins.values where pin.countsInClusters {
            clusters.add(pin.cell, pin.point, tag: categoryTags.tag(pin.category))
        }
    }

    /// The cluster counts as "cell key/category" → [pins, latitude sum, longitude sum], kept or
    /// (`recount`) counted afresh from the pins: for tests and diagnostics, which compare the two
    /// (and stores whose tags were given in another order).
    public func clusterCountsByName(recount: Bool = false) -> [String: [Int64]] {
        var counts = clusters
        var tags = categoryTags
        if recount {
            counts = ClusterCounts(precisions: clusters.precisions)
            for pin in pins.values where pin.countsInClusters { counts.add(pin.cell, pin.point, tag: tags.tag(pin.category)) }
        }
        var out: [String: [Int64]] = [:]
        for (cell, tallies) in counts.allCells {
            for t in tallies {
                let name = Int(t.tag) < tags.names.count ? tags.names[Int(t.tag)] : "?"
                out["\(cell)/\(name)"] = [Int64(t.count), t.latSum, t.lonSum]
            }
        }
        return out
    }
}
