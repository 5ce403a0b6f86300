/// The integer grid behind geohash cells of one precision, and the bit interleaving that turns
/// a (column, row) pair into geohash bits.
///
/// At precision p a geohash carries 5p bits, alternating longitude and latitude starting with
/// longitude, so longitude gets ceil(5p/2) bits and latitude floor(5p/2). Column `ix` is the
/// longitude strip `[-180 + ix*w, -180 + (ix+1)*w)` with `w = 360 / 2^lonBits`; row `iy` likewise
/// over latitude from -90. The last column and row also take their upper edge (lon 180, lat 90).
///
/// Invariant: every strip edge is an exact double (a multiple of 45 * 2^-27 below 2^8 in
/// magnitude fits easily in 53 bits), and `column`/`row` return exactly the strip whose closed
/// lower edge is <= the value, correcting the one possible off-by-one of the floating-point
/// division. Points, cells and covers all go through these two functions, so they agree at cell
/// edges by construction, and a cell's box always contains the points assigned to it.
struct GeohashGrid {
    let precision: Int
    let lonBits: Int
    let latBits: Int

    init(precision: Int) {
        precondition(precision >= 1 && precision <= Geohash.maxPrecision, "geohash precision \(precision) outside 1...\(Geohash.maxPrecision)")
        self.precision = precision
        self.lonBits = (5 * precision + 1) / 2
        self.latBits = (5 * precision) / 2
    }

    var columnCount: Int { 1 << lonBits }
    var rowCount: Int { 1 << latBits }

    /// The column holding longitude `lon`; out-of-range values clamp, NaN gives column 0.
    func column(_ lon: Double) -> Int {
        Self.strip(of: lon, origin: -180, span: 360, bits: lonBits)
    }

    /// The row holding latitude `lat`; out-of-range values clamp, NaN gives row 0.
    func row(_ lat: Double) -> Int {
        Self.strip(of: lat, origin: -90, span: 180, bits: latBits)
    }

    /// West edge of column `ix`; `westEdge(columnCount)` is 180. Exact.
    func westEdge(_ ix: Int) -> Double { Self.edge(ix, origin: -180, span: 360, bits: lonBits) }

    /// South edge of row `iy`; `southEdge(rowCount)` is 90. Exact.
    func southEdge(_ iy: Int) -> Double { Self.edge(iy, origin: -90, span: 180, bits: latBits) }

    /// The geohash bits (right-aligned, 5 * precision of them) of the cell at (ix, iy).
    func bits(column ix: Int, row iy: Int) -> UInt64 {
        let lon = Self.spread(UInt64(ix))
        let lat = Self.spread(UInt64(iy))
        // The stream's first (most significant) bit is longitude. With an odd bit total the
        // top bit sits at an even position, where `spread` already puts the top lon bit; with
        // an even total longitude has to move up one place and latitude takes the even places.
        if (5 * precision) % 2 == 1 {
            return lon | (lat << 1)
        }
        return (lon << 1) | lat
    }

    /// Inverse of `bits(column:row:)`.
    func cell(bits: UInt64) -> (column: Int, row: Int) {
        if (5 * precision) % 2 == 1 {
            return (Int(Self.compact(bits)), Int(Self.compact(bits >> 1)))
        }
        return (Int(Self.compact(bits >> 1)), Int(Self.compact(bits)))
    }

    // MARK: - Strips

    private static func edge(_ index: Int, origin: Double, span: Double, bits: Int) -> Double {
        // span / 2^bits is exact (a power-of-two division) and so is the product and sum; see
        // the type's invariant.
        origin + Double(index) * (span / Double(1 << bits))
    }

    private static func strip(of value: Double, origin: Double, span: Double, bits: Int) -> Int {
        let count = 1 << bits
        // `!(value > origin)` also catches NaN, which must not reach Int(_:).
        if !(value > origin) { return 0 }
        if value >= origin + span { return count - 1 }
        let width = span / Double(count)
        // value - origin is in (0, span); the subtraction may round by half an ulp of a number
        // below 360, i.e. far less than one strip (>= 3e-7 degrees), so the estimate is off by
        // at most one, and the two comparisons against exact edges settle it.
        var index = Swift.min(Int((value - origin) / width), count - 1)
        if value < edge(index, origin: origin, span: span, bits: bits) {
            index -= 1
        } else if index + 1 < count && value >= edge(index + 1, origin: origin, span: span, bits: bits) {
            index += 1
        }
        return index
    }

    // MARK: - Bit interleaving

    /// Moves bit i of the low 32 bits of `v` to bit 2i (classic binary magic-number spreading).
    static func spread(_ v: UInt64) -> UInt64 {
        var x = v & 0x0000_0000_FFFF_FFFF
        x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF
        x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF
        x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F
        x = (x | (x << 2)) & 0x3333_3333_3333_3333
        x = (x | (x << 1)) & 0x5555_5555_5555_5555
        return x
    }

    /// Inverse of `spread`: gathers the even bits of `v` into the low 32 bits.
    static func compact(_ v: UInt64) -> UInt64 {
        var x = v & 0x5555_5555_5555_5555
        x = (x | (x >> 1)) & 0x3333_3333_3333_3333
        x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F
        x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF
        x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF
        x = (x | (x >> 16)) & 0x0000_0000_FFFF_FFFF
        return x
    }
}
