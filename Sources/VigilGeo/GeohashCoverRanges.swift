/// The grid-index ranges a box covers at one precision: one row range and a few disjoint column
/// ranges (more than one when the box crosses or touches the antimeridian).
///
/// The cell count is known from the ranges alone, so a too-large cover is rejected in O(1)
/// before anything is enumerated.
///
/// Why the columns are a set of ranges and not one: longitudes 180 and -180 are the same
/// meridian and `GeoBox.contains` treats them so, but the grid puts lon -180 in column 0 and
/// lon 180 in the last column. A part that starts at west -180 therefore also needs the last
/// column, and a part that ends at east 180 also needs column 0, or a pin sitting exactly on
/// the antimeridian would be accepted by the filter yet never offered to the subscriber.
struct GeohashCoverRanges {
    let grid: GeohashGrid
    /// Sorted, disjoint, non-adjacent closed column ranges. Empty for an invalid box.
    private(set) var columns: [ClosedRange<Int>] = []
    /// Closed row range; meaningless when `columns` is empty.
    private(set) var rows: ClosedRange<Int> = 0...0

    /// The ranges for every cell holding some point of `box` (a point on a shared cell edge is
    /// held by the cell above/east of it, so the cell below/west of the box's edge is not
    /// included). A nil or invalid box covers nothing.
    init(box: GeoBox?, grid: GeohashGrid) {
        self.grid = grid
        guard let box, box.isValid else { return }
        rows = grid.row(box.south)...grid.row(box.north)
        let lastColumn = grid.columnCount - 1
        var pieces: [ClosedRange<Int>] = []
        pieces.reserveCapacity(4)
        for part in box.parts {
            // Non-crossing part: west <= east, so the columns are ordered too.
            pieces.append(grid.column(part.west)...grid.column(part.east))
            if part.west == -180 { pieces.append(lastColumn...lastColumn) }
            if part.east == 180 { pieces.append(0...0) }
        }
        pieces.sort { $0.lowerBound < $1.lowerBound }
        // Merge overlapping pieces (the two parts of a crossing box can share a column) so
        // no cell is counted or emitted twice.
        for piece in pieces {
            if let last = columns.last, piece.lowerBound <= last.upperBound + 1 {
                columns[columns.count - 1] = last.lowerBound...Swift.max(last.upperBound, piece.upperBound)
            } else {
                columns.append(piece)
            }
        }
    }

    /// Number of cells, without enumerating them. At most 2^30 * 2^30, so it fits an Int.
    var count: Int {
        guard !columns.isEmpty else { return 0 }
        return columns.reduce(0) { $0 + $1.count } * rows.count
    }

    /// Every covered cell, row by row from the south, columns from the west within a row.
    func cells() -> [GeohashCell] {
        guard !columns.isEmpty else { return [] }
        var result: [GeohashCell] = []
        result.reserveCapacity(count)
        for iy in rows {
            for range in columns {
                for ix in range {
                    result.append(GeohashCell(bits: grid.bits(column: ix, row: iy), precision: grid.precision))
                }
            }
        }
        return result
    }
}
