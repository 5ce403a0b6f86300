import HeapModule
import VigilGeo

/// The live pins, with the two indexes that keep every operation cheap:
///
/// - a spatial index: each pin is listed under its geohash cell at a few index levels
///   (`indexLevels`), so an area query visits only the cells that cover the area, whatever its size;
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
    private var spatial: [UInt64: Set<PinID>] = [:]
    var expiry = Heap<ExpiryEntry>()
    var nextSequence: UInt64 = 0

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

    /// Stores an edited pin, moving it in the indexes when its cell or expiry changed.
    public mutating func replace(_ pin: Pin) {
        guard let old = pins[pin.id] else { preconditionFailure("replacing an unknown pin") }
        pins[pin.id] = pin
        if old.cell != pin.cell {
            unindex(old)
            index(pin)
        }
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

    /// Every pin exactly inside `area` whose category bit is in `categories`, newest first,
    /// at most `limit` (and whether more matched). `cells` is the area's cover at `precision`.
    public func pins(in area: GeoArea, cells: [GeohashCell], precision: Int, categories: UInt64,
                     settings: PinSettings, limit: Int) -> (pins: [Pin], truncated: Bool) {
        let level = Self.indexLevels.last(where: { $0 <= precision }) ?? Self.indexLevels[0]
        var keys = Set<UInt64>()
        for cell in cells {
            if precision >= level {
                keys.insert(cell.ancestor(precision: level).key)
            } else {
                // A coarse cover cell spans 32^(level - precision) index cells.
                let shift = 5 * (level - precision)
                for k in 0..<(UInt64(1) << UInt64(shift)) {
                    keys.insert(GeohashCell(bits: cell.bits << UInt64(shift) | k, precision: level).key)
                }
            }
        }
        var found: [Pin] = []
        for key in keys {
            guard let ids = spatial[key] else { continue }
            for id in ids {
                guard let pin = pins[id], area.contains(pin.point) else { continue }
                guard let bit = settings.categoryIndex(pin.category), categories & (1 << UInt64(bit)) != 0 else { continue }
                found.append(pin)
            }
        }
        found.sort { ($0.createdAt, $0.sequence) > ($1.createdAt, $1.sequence) }
        if found.count > limit {
            return (Array(found.prefix(limit)), true)
        }
        return (found, false)
    }

    mutating func index(_ pin: Pin) {
        for level in Self.indexLevels {
            spatial[pin.cell.ancestor(precision: level).key, default: []].insert(pin.id)
        }
    }

    mutating func unindex(_ pin: Pin) {
        for level in Self.indexLevels {
            let key = pin.cell.ancestor(precision: level).key
            spatial[key]?.remove(pin.id)
            if spatial[key]?.isEmpty == true { spatial[key] = nil }
        }
    }
}
