/// One geohash cell: the 5 * precision geohash bits, right-aligned, and the precision (1...12).
///
/// Stored as the single word `key` = `(bits << 4) | precision` (60 bits of hash + 4 of
/// precision), so the struct is 8 bytes, equality and hashing are one integer, and the same
/// cell spelled at different precisions ("u" vs "u0") never collides. `key` is the value to use
/// for dictionary keys and channel ids.
public struct GeohashCell: Hashable, Sendable, CustomStringConvertible {
    /// `(bits << 4) | precision`; unique across precisions.
    public let key: UInt64

    /// The cell's 5 * precision geohash bits, right-aligned; the first geohash bit is the top one.
    public var bits: UInt64 { key >> 4 }

    /// Number of base32 characters, 1...12.
    public var precision: Int { Int(key & 0xF) }

    /// `bits` must fit in 5 * precision bits and precision must be 1...12 (checked: a bad cell
    /// would silently alias another channel).
    public init(bits: UInt64, precision: Int) {
        precondition(precision >= 1 && precision <= Geohash.maxPrecision, "geohash precision \(precision) outside 1...\(Geohash.maxPrecision)")
        precondition(bits >> UInt64(5 * precision) == 0, "geohash bits wider than \(5 * precision)")
        self.key = (bits << 4) | UInt64(precision)
    }

    /// Parses a base32 geohash of 1...12 characters, case-insensitively. Nil for an empty or
    /// too long string or any character outside the alphabet.
    public init?(_ hash: String) {
        var bits: UInt64 = 0
        var count = 0
        for byte in hash.utf8 {
            count += 1
            guard count <= Geohash.maxPrecision, let value = GeohashBase32.value(of: byte) else { return nil }
            bits = (bits << 5) | UInt64(value)
        }
        guard count >= 1 else { return nil }
        self.init(bits: bits, precision: count)
    }

    /// The lower-case base32 spelling.
    public var string: String {
        let precision = self.precision
        let bits = self.bits
        return String(unsafeUninitializedCapacity: precision) { buffer in
            for i in 0..<precision {
                let shift = UInt64(5 * (precision - 1 - i))
                buffer[i] = GeohashBase32.symbols[Int((bits >> shift) & 0x1F)]
            }
            return precision
        }
    }

    public var description: String { string }

    /// The cell's bounds. Edges are exact, and shared edges between neighbours are bit-identical.
    public var box: GeoBox {
        let grid = GeohashGrid(precision: precision)
        let (ix, iy) = grid.cell(bits: bits)
        return GeoBox(
            south: grid.southEdge(iy),
            west: grid.westEdge(ix),
            north: grid.southEdge(iy + 1),
            east: grid.westEdge(ix + 1)
        )
    }

    /// The middle of `box`.
    public var center: GeoPoint {
        let box = self.box
        return GeoPoint(lat: (box.south + box.north) / 2, lon: (box.west + box.east) / 2)
    }

    /// The enclosing cell at a coarser (or equal) precision: the hash's first `precision` characters.
    public func ancestor(precision ancestorPrecision: Int) -> GeohashCell {
        precondition(ancestorPrecision >= 1 && ancestorPrecision <= precision, "ancestor precision \(ancestorPrecision) outside 1...\(precision)")
        return GeohashCell(bits: bits >> UInt64(5 * (precision - ancestorPrecision)), precision: ancestorPrecision)
    }

    /// True when `other` lies inside this cell (equal, or this is one of its ancestors).
    public func contains(_ other: GeohashCell) -> Bool {
        other.precision >= precision && other.ancestor(precision: precision) == self
    }

    /// The adjacent cell of the same precision. East and west wrap around the antimeridian;
    /// nil when the step would leave the grid over a pole (any direction with a north component
    /// from the top row, south component from the bottom row).
    public func neighbor(_ direction: Direction) -> GeohashCell? {
        let grid = GeohashGrid(precision: precision)
        let (ix, iy) = grid.cell(bits: bits)
        let row = iy + direction.rowStep
        guard row >= 0 && row < grid.rowCount else { return nil }
        // Columns form a ring: lon 180 and -180 are one meridian.
        let column = (ix + direction.columnStep + grid.columnCount) % grid.columnCount
        return GeohashCell(bits: grid.bits(column: column, row: row), precision: precision)
    }
}
