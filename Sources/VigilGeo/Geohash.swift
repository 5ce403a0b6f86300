/// Point-level geohash operations: the cell holding a point, and string encode/decode.
///
/// Convention (matches the published geohash vectors): a value on a cell edge belongs to the
/// cell above/east of it, and lat 90 / lon 180 belong to the top row / last column. So (0, 0)
/// is "s000…", (90, 180) is "zzz…" and (-90, -180) is "000…".
public enum Geohash {
    /// 12 characters = 60 bits, the most that fits beside the 4-bit precision in a cell's key.
    public static let maxPrecision = 12

    /// The cell of `precision` (1...12) holding `p`. For a valid point, `cell.box.contains(p)`.
    /// Out-of-range coordinates clamp to the grid's edge, NaN maps to the first row/column;
    /// validate points before indexing them.
    public static func cell(_ p: GeoPoint, precision: Int) -> GeohashCell {
        let grid = GeohashGrid(precision: precision)
        return GeohashCell(bits: grid.bits(column: grid.column(p.lon), row: grid.row(p.lat)), precision: precision)
    }

    /// The lower-case geohash string of `p` at `precision` (1...12).
    public static func encode(_ p: GeoPoint, precision: Int) -> String {
        cell(p, precision: precision).string
    }

    /// The bounds and centre of a geohash string; nil when the string is not a geohash.
    public static func decode(_ hash: String) -> (box: GeoBox, center: GeoPoint)? {
        guard let cell = GeohashCell(hash) else { return nil }
        return (cell.box, cell.center)
    }
}
